package fuse

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
)

// label is a security.selinux value; without SELinux loaded root may still
// set it on the disk.
var label = []byte("system_u:object_r:dsh_t:s0")

const labelXattr = "security.selinux"

// getLabel reads security.selinux of p: its value, or the error.
func getLabel(p string) ([]byte, error) {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, labelXattr, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// setLabelBacking labels the backing file rel out of band: no event
// reaches the daemon (the test mount has no watcher).
func (e *env) setLabelBacking(rel string) {
	require.NoError(e.t, unix.Setxattr(e.b(rel), labelXattr, label, 0))
}

func TestXattrAbsence_RememberedUntilAnOutOfBandChangeIsReported(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "a\n")
	_, err := getLabel(e.m("a.txt"))
	require.ErrorIs(t, err, unix.ENODATA)

	e.setLabelBacking("a.txt")
	_, err = getLabel(e.m("a.txt"))
	assert.ErrorIs(t, err, unix.ENODATA, "the absence is answered from memory until a change is reported")

	// The watcher reports the attribute change (ctime moved) as an
	// out-of-band setattr.
	_, err = e.engine.RecordExternal(context.Background(), policy.ExternalChange{Op: policy.OpSetattr, Target: e.lfs.TargetForRel("a.txt")})
	require.NoError(t, err)
	v, err := getLabel(e.m("a.txt"))
	require.NoError(t, err, "a reported change drops every remembered absence")
	assert.Equal(t, label, v)
}

func TestXattrAbsence_DropDataForgetsIt(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "a\n")
	_, err := getLabel(e.m("a.txt"))
	require.ErrorIs(t, err, unix.ENODATA)
	e.setLabelBacking("a.txt")
	e.srv.DropData("a.txt") // a change the watcher counts as the mount's own
	v, err := getLabel(e.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, label, v)
}

func TestXattrAbsence_ASocketMutationForgetsIt(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "a\n")
	e.put("b.txt", "b\n")
	_, err := getLabel(e.m("b.txt"))
	require.ErrorIs(t, err, unix.ENODATA)
	e.setLabelBacking("b.txt")
	// Any change the mount did not make, here an agent's write of another
	// file, moves the epoch.
	_, err = e.engine.Write(context.Background(), policy.Actor{Channel: policy.ChannelSocket},
		e.lfs.TargetForRel("a.txt"), "a2\n", policy.Guard{Unconditional: true})
	require.NoError(t, err)
	v, err := getLabel(e.m("b.txt"))
	require.NoError(t, err)
	assert.Equal(t, label, v)
}

func TestXattrAbsence_SetAndRemoveThroughTheMountAreSeenAtOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "a\n")
	_, err := getLabel(e.m("a.txt"))
	require.ErrorIs(t, err, unix.ENODATA)
	require.NoError(t, unix.Setxattr(e.m("a.txt"), labelXattr, label, 0))
	v, err := getLabel(e.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, label, v)

	require.NoError(t, unix.Removexattr(e.m("a.txt"), labelXattr))
	_, err = getLabel(e.m("a.txt"))
	require.ErrorIs(t, err, unix.ENODATA)
	// A set through the mount of another file drops this file's absence too.
	e.put("b.txt", "b\n")
	e.setLabelBacking("a.txt")
	require.NoError(t, unix.Setxattr(e.m("b.txt"), "user.x", []byte("1"), 0))
	v, err = getLabel(e.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, label, v)
}

func TestXattrAbsence_DirectoriesAreAlwaysAsked(t *testing.T) {
	e := newEnv(t, envOptions{})
	require.NoError(t, os.Mkdir(e.m("d"), 0o755))
	_, err := getLabel(e.m("d"))
	require.ErrorIs(t, err, unix.ENODATA)
	// The watcher does not compare a directory's ctime: an attribute set on
	// it out of band must be seen without an event.
	e.setLabelBacking("d")
	v, err := getLabel(e.m("d"))
	require.NoError(t, err)
	assert.Equal(t, label, v)
}
