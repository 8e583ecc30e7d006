package fuse

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// xattrVersion reads user.dsh.version through the mount.
func (e *env) xattrVersion(rel string) provider.Version {
	e.t.Helper()
	sz, err := unix.Getxattr(e.m(rel), VersionXattr, nil)
	require.NoError(e.t, err)
	buf := make([]byte, sz)
	n, err := unix.Getxattr(e.m(rel), VersionXattr, buf)
	require.NoError(e.t, err)
	return provider.Version(buf[:n])
}

func TestVersionXattr_IsTheProviderVersionAndChangesWithWrites(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("a.txt", "same size\n")
		v0 := e.xattrVersion("a.txt")
		assert.Equal(t, e.version("a.txt"), v0)

		// Same-size rewrites with other bytes in quick succession: every
		// one is a new version.
		seen := map[provider.Version]bool{v0: true}
		for i := 0; i < 5; i++ {
			require.NoError(t, os.WriteFile(e.m("a.txt"), []byte(fmt.Sprintf("same siz%d\n", i)), 0o644))
			v := e.xattrVersion("a.txt")
			assert.Equal(t, e.version("a.txt"), v, "xattr and provider agree")
			assert.False(t, seen[v], "write %d repeated a version", i)
			seen[v] = true
		}
		// The bytes it had: the version it had.
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("same size\n"), 0o644))
		assert.Equal(t, v0, e.xattrVersion("a.txt"), "identical bytes, identical version")

		buf := make([]byte, 256)
		n, err := unix.Listxattr(e.m("a.txt"), buf)
		require.NoError(t, err)
		assert.Contains(t, strings.Split(string(buf[:n]), "\x00"), VersionXattr)
		assert.ErrorIs(t, unix.Setxattr(e.m("a.txt"), VersionXattr, []byte("v1-0"), 0), syscall.EPERM)
		assert.ErrorIs(t, unix.Removexattr(e.m("a.txt"), VersionXattr), syscall.EPERM)
		_, err = unix.Getxattr(e.m("a.txt"), VersionXattr, make([]byte, 2))
		assert.ErrorIs(t, err, syscall.ERANGE)
	})
}

func TestRecord_UnboundWriteChangesVersionAndAuditsPid(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("a.txt", "x")
		before := e.version("a.txt")
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("y"), 0o644))
		after := e.version("a.txt")
		require.NotEqual(t, before, after)

		entries := e.audit("a.txt")
		require.NotEmpty(t, entries)
		last := entries[0]
		assert.Equal(t, policy.OpWrite, last.Op)
		assert.Equal(t, int32(os.Getpid()), last.Actor.PID, "the writer's process, not one of its threads")
		assert.Equal(t, policy.ChannelMount, last.Actor.Channel)
		assert.Equal(t, policy.SessionID(""), last.Actor.Session)
		// A person's change is audited without hashing the file (a build's
		// outputs would be read twice); the guard hashes when it decides.
		assert.Empty(t, last.After)

		_, ok := e.store.LastWrite(e.lfs.TargetForRel("a.txt").Key)
		require.True(t, ok)
	})
}

func TestRecord_EveryMutationIsAudited(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "x")
	require.NoError(t, os.WriteFile(e.m("new.txt"), nil, 0o644))
	require.NoError(t, os.Chmod(e.m("a.txt"), 0o600))
	require.NoError(t, os.Truncate(e.m("a.txt"), 0))
	require.NoError(t, os.Link(e.m("a.txt"), e.m("hard.txt")))
	require.NoError(t, os.Rename(e.m("new.txt"), e.m("renamed.txt")))
	require.NoError(t, os.Remove(e.m("renamed.txt")))

	assert.Equal(t, []string{"truncate", "setattr"}, ops(e.audit("a.txt")))
	assert.Equal(t, []string{"link"}, ops(e.audit("hard.txt")))
	assert.Equal(t, []string{"rename", "create"}, ops(e.audit("new.txt")))
	assert.Equal(t, []string{"unlink", "rename"}, ops(e.audit("renamed.txt")))
}

func TestInvalidate_SocketEditIsVisibleAtOnce(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.put("dir/a.txt", "old text\n")
		// Let the kernel cache the name, attributes and pages.
		got, err := os.ReadFile(e.m("dir/a.txt"))
		require.NoError(t, err)
		require.Equal(t, "old text\n", string(got))

		s, err := e.store.OpenSession("agent")
		require.NoError(t, err)
		agent := policy.Actor{Session: s.ID, Channel: policy.ChannelSocket}
		target := e.lfs.TargetForRel("dir/a.txt")
		_, _, err = e.engine.Read(ctx, agent, target)
		require.NoError(t, err)

		out, err := e.engine.Edit(ctx, agent, target,
			provider.EditRequest{OldString: "old", NewString: "a much longer new"}, policy.Guard{})
		require.NoError(t, err)
		got, err = os.ReadFile(e.m("dir/a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "a much longer new text\n", string(got), "no stale name, size or pages")
		assert.Equal(t, out.Version, e.xattrVersion("dir/a.txt"))

		// A socket write of a new file and a delete show at once too.
		_, err = e.engine.Write(ctx, agent, e.lfs.TargetForRel("dir/b.txt"), "bee\n", policy.Guard{})
		require.NoError(t, err)
		got, err = os.ReadFile(e.m("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, "bee\n", string(got))
		_, _, err = e.engine.Read(ctx, agent, target)
		require.NoError(t, err)
		_, err = e.engine.Delete(ctx, agent, target, policy.Guard{})
		require.NoError(t, err)
		_, err = os.Stat(e.m("dir/a.txt"))
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.ElementsMatch(t, []string{"b.txt"}, e.names("dir"))
	})
}

func TestInvalidate_OpenFileSeesAgentEditOnReopen(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.put("a.txt", "12345")
	f, err := os.Open(e.m("a.txt"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 5)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)

	_, err = e.engine.Write(ctx, policy.Actor{Channel: policy.ChannelSocket}, e.lfs.TargetForRel("a.txt"),
		"abcdefgh", policy.Guard{Unconditional: true})
	require.NoError(t, err)

	// The open descriptor keeps the old inode (atomic publish); a new open
	// sees the new file.
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(buf))
	got, err := os.ReadFile(e.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "abcdefgh", string(got))
}
