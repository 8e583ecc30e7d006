package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The POSIX comparison bound to a session (issue 20, "Tests"): the cases of
// TestPOSIX_MountBehavesLikeTheDisk run once more, the mount side in a
// child process bound to a session under `dshmount exec`. Every file a
// case touches is one the case created, so the session is never refused:
// the outcomes must be those of the disk.

// helperPosixBound runs the POSIX cases on a mount directory (see
// runPosixBoundHelper).
const helperPosixBound = "posix-bound"

// helperPosixRootEnv names the directory the posix-bound helper runs the
// cases under (root/<persona>/<case>).
const helperPosixRootEnv = "DSH_INTEGRATION_POSIX_ROOT"

// helperPosixOnlyEnv, when set, limits the posix-bound helper to the
// comma-separated "persona/case" keys it lists.
const helperPosixOnlyEnv = "DSH_INTEGRATION_POSIX_ONLY"

// posixOutcomePrefix starts each outcome line of the helper; the other
// lines of its output are the testing package's.
const posixOutcomePrefix = "posix-outcome "

// posixBoundLine is one outcome line of the posix-bound helper.
type posixBoundLine struct {
	Persona string  `json:"persona"`
	Case    string  `json:"case"`
	Outcome outcome `json:"outcome"`
}

// ownWorkCases are the sequences of issue 20 (items 4 and 5) in which a
// session changes a file through one name or descriptor and then goes on
// with its own work: on the disk every step succeeds, and a session must
// never be refused for it (EACCES, ESTALE).
var ownWorkCases = []posixCase{
	{name: "OwnLinkChmodThroughOtherNameThenRemove", setup: func(c *caseDir) error { return c.file("c", 0o644) },
		op: func(c *caseDir) error {
			return all(func() error { return unix.Link(c.p("c"), c.p("c2")) }, func() error { return c.chmod("c2", 0o600) },
				func() error { return unix.Unlink(c.p("c")) })
		}, stat: []string{"c", "c2"}},
	{name: "OwnLinkChownThroughOtherNameThenWrite", setup: func(c *caseDir) error { return c.file("c", 0o644) },
		op: func(c *caseDir) error {
			return all(func() error { return unix.Link(c.p("c"), c.p("c2")) }, func() error { return c.chown("c2", c.persona) },
				func() error { return c.writeByte("c") }, func() error { return unix.Unlink(c.p("c2")) })
		}, stat: []string{"c", "c2"}},
	{name: "OwnWriteThroughLinkThenRenameOverIt",
		setup: func(c *caseDir) error {
			return all(func() error { return c.file("a", 0o644) }, func() error { return c.file("b", 0o644) })
		},
		op: func(c *caseDir) error {
			return all(func() error { return unix.Link(c.p("b"), c.p("b2")) }, func() error { return c.writeByte("b2") },
				func() error { return unix.Rename(c.p("a"), c.p("b")) }, func() error { return c.writeByte("b2") },
				func() error { return unix.Unlink(c.p("b2")) })
		}, stat: []string{"a", "b", "b2"}},
	{name: "OwnUnflushedWriteThenFtruncate",
		op: func(c *caseDir) error {
			return c.withFd("f", func(fd int) error {
				return all(func() error { return pwrite(fd, "hello world", 0) }, func() error { return unix.Ftruncate(fd, 2) })
			})
		}, stat: []string{"f"}},
	{name: "OwnFallocateThenFtruncate",
		op: func(c *caseDir) error {
			return c.withFd("f", func(fd int) error {
				return all(func() error { return unix.Fallocate(fd, 0, 0, 8192) }, func() error { return unix.Ftruncate(fd, 100) })
			})
		}, stat: []string{"f"}},
	{name: "OwnUnflushedWriteThenUnlinkBeforeClose",
		op: func(c *caseDir) error {
			return c.withFd("f", func(fd int) error {
				return all(func() error { return pwrite(fd, "hello", 0) }, func() error { return unix.Unlink(c.p("f")) })
			})
		}, stat: []string{"f"}},
	{name: "OwnPunchAndCopyRangeThenRename", setup: func(c *caseDir) error { return c.file("src", 0o644) },
		op: func(c *caseDir) error {
			return c.withFd("f", func(fd int) error {
				return all(func() error { return pwrite(fd, strings.Repeat("x", 10000), 0) },
					func() error {
						return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 100, 5000)
					},
					func() error { return copyRange(c.p("src"), fd, 9000, 8) },
					func() error { return unix.Rename(c.p("f"), c.p("g")) },
					func() error { return unix.Ftruncate(fd, 9004) })
			})
		}, stat: []string{"f", "g"}},
	{name: "OwnMmapWriteThenFtruncate",
		op: func(c *caseDir) error {
			return c.withFd("f", func(fd int) error {
				return all(func() error { return unix.Ftruncate(fd, 4096) }, func() error { return mmapStore(fd, 4096, "MMAP", 10) },
					func() error { return unix.Ftruncate(fd, 12) })
			})
		}, stat: []string{"f"}},
}

// boundCases are the cases of the bound comparison: the POSIX table and
// the session's own work.
func boundCases() []posixCase { return append(slices.Clone(posixCases), ownWorkCases...) }

// withFd creates rel (O_RDWR), runs fn on the descriptor and closes it.
func (c *caseDir) withFd(rel string, fn func(fd int) error) error {
	fd, err := unix.Open(c.p(rel), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", rel, err)
	}
	return errors.Join(fn(fd), unix.Close(fd))
}

// pwrite writes s at off through fd.
func pwrite(fd int, s string, off int64) error {
	_, err := unix.Pwrite(fd, []byte(s), off)
	return err
}

// copyRange copies n bytes from the start of src into fd at off with
// copy_file_range.
func copyRange(src string, fd int, off int64, n int) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	var soff int64
	_, err = unix.CopyFileRange(sfd, &soff, fd, &off, n, 0)
	return err
}

// mmapStore maps the first size bytes of fd shared, stores s at off and
// msyncs.
func mmapStore(fd, size int, s string, off int) error {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(mem[off:], s)
	return errors.Join(unix.Msync(mem, unix.MS_SYNC), unix.Munmap(mem))
}

// posixPersonas are the users every case runs as.
var posixPersonas = []cred{credRoot, credNobody}

// runPosixBoundHelper runs every case for every persona under the
// directory helperPosixRootEnv names, with runPosixCase (which needs a
// *testing.T: the cases run as subtests of a test run by testing.Main),
// and prints one posixOutcomePrefix line per case. testing.Main exits the
// process: 0 when every case ran.
func runPosixBoundHelper() int {
	root := os.Getenv(helperPosixRootEnv)
	all := func(string, string) (bool, error) { return true, nil }
	testing.Main(all, []testing.InternalTest{{Name: "PosixBound", F: func(t *testing.T) {
		require.NotEmpty(t, root, helperPosixRootEnv)
		posixBoundCases(t, root, posixKeys(os.Getenv(helperPosixOnlyEnv)), os.Stdout)
	}}}, nil, nil)
	return 2 // not reached
}

// posixKeys parses a comma-separated list of "persona/case" keys; nil for
// an empty list (every case).
func posixKeys(list string) map[string]bool {
	if list == "" {
		return nil
	}
	keys := map[string]bool{}
	for k := range strings.SplitSeq(list, ",") {
		keys[k] = true
	}
	return keys
}

// posixBoundCases runs the cases under root (those in only, when it is not
// nil) and prints their outcomes.
func posixBoundCases(t *testing.T, root string, only map[string]bool, out *os.File) {
	for _, persona := range posixPersonas {
		for _, pc := range boundCases() {
			if only != nil && !only[persona.name+"/"+pc.name] {
				continue
			}
			t.Run(persona.name+"/"+pc.name, func(t *testing.T) {
				o := runPosixCase(t, pc, persona, filepath.Join(root, persona.name, pc.name))
				b, err := json.Marshal(posixBoundLine{Persona: persona.name, Case: pc.name, Outcome: o})
				require.NoError(t, err)
				_, err = fmt.Fprintf(out, "%s%s\n", posixOutcomePrefix, b)
				require.NoError(t, err)
			})
		}
	}
}

// TestHelperPosixBound checks the posix-bound helper's output on a native
// directory: one parsable outcome line per case and persona.
func TestHelperPosixBound(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the POSIX table switches users and chowns files: it needs root")
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer out.Close()
	posixBoundCases(t, nativeRoot(t), nil, out)
	b, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, len(posixPersonas)*len(boundCases()))
	var l posixBoundLine
	line, ok := strings.CutPrefix(lines[0], posixOutcomePrefix)
	require.True(t, ok, lines[0])
	require.NoError(t, json.Unmarshal([]byte(line), &l))
	assert.Equal(t, posixCases[0].name, l.Case)
	assert.Equal(t, "root", l.Persona)
	assert.Equal(t, "ok", l.Outcome.Op)
}

// boundPosixOutcomes runs the posix-bound helper bound to a new session of
// d under the mount directory root (the cases in only, every case when it
// is empty) and returns the outcomes by "persona/case".
func boundPosixOutcomes(t *testing.T, d *daemon, root string, only []string) map[string]outcome {
	t.Helper()
	sess, err := openStrict(testCtx(t), d, "bound-posix")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshBinary, "exec", "--socket", d.Socket, "--session", string(sess), "--",
		testBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+helperPosixBound, helperPosixRootEnv+"="+root,
		helperPosixOnlyEnv+"="+strings.Join(only, ","))
	cmd.Dir = d.Mnt
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	got := map[string]outcome{}
	sc := bufio.NewScanner(&stdout)
	var rest []string
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), posixOutcomePrefix)
		if !ok {
			rest = append(rest, sc.Text())
			continue
		}
		var l posixBoundLine
		require.NoError(t, json.Unmarshal([]byte(line), &l), "outcome line %q", line)
		got[l.Persona+"/"+l.Case] = l.Outcome
	}
	require.NoError(t, runErr, "posix-bound helper: %s\nstderr:\n%s", strings.Join(rest, "\n"), stderr.String())
	return got
}

func TestPOSIX_BoundSessionBehavesLikeTheDisk(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("the POSIX table switches users and chowns files: it needs root")
	}
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"Passthrough", []string{"--allow-other"}},
		{"DaemonReadWrite", []string{"--allow-other", "--passthrough=false"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			diffs := comparePosixBound(t, mode.args, nil)
			t.Logf("%d cases × %d users bound to a session; %d differ", len(boundCases()), len(posixPersonas), len(diffs))
			for _, s := range diffs {
				t.Log(s)
			}
		})
	}
}

// comparePosixBound starts a daemon with args, runs the cases in only
// (every case when it is empty) bound to a session on its mount and
// natively, fails the test for every difference and returns them.
func comparePosixBound(t *testing.T, args []string, only []string) []string {
	t.Helper()
	d := startDaemon(t, daemonOptions{Args: args})
	openToOthers(t, d.Mnt)
	got := boundPosixOutcomes(t, d, d.m("bound"), only)
	selected := posixKeys(strings.Join(only, ","))
	native := nativeRoot(t)
	var diffs []string
	for _, persona := range posixPersonas {
		for _, pc := range boundCases() {
			key := persona.name + "/" + pc.name
			if selected != nil && !selected[key] {
				continue
			}
			t.Run(key, func(t *testing.T) {
				want := runPosixCase(t, pc, persona, filepath.Join(native, persona.name, pc.name))
				t.Logf("disk: %s", want)
				mount, ok := got[key]
				if !assert.True(t, ok, "the bound helper reported no outcome for %s", key) {
					diffs = append(diffs, key+": no outcome from the bound helper")
					return
				}
				if !assert.Equal(t, want, mount, "%s as %s: disk vs mount bound to a session", pc.name, persona.name) {
					diffs = append(diffs, fmt.Sprintf("%s as %s:\n    disk:  %s\n    bound: %s", pc.name, persona.name, want, mount))
				}
			})
		}
	}
	if selected != nil {
		assert.Len(t, got, len(selected), "outcomes of the selected cases")
	}
	return diffs
}

// TestPOSIX_BoundWriteByNonOwnerClearsSUIDAndSGID is the smallest failing
// sequence of the bound comparison: root creates f with mode 04777 (02777),
// a process bound to a session running as uid 65534 opens it O_WRONLY,
// pwrites one byte at 0 and closes it; the disk then shows 0777, as
// the kernel drops the set-id bits on a write by a caller without
// CAP_FSETID.
func TestPOSIX_BoundWriteByNonOwnerClearsSUIDAndSGID(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("the case switches users: it needs root")
	}
	diffs := comparePosixBound(t, []string{"--allow-other"},
		[]string{"nobody/WriteByNonOwnerClearsSUID", "nobody/WriteByNonOwnerClearsSGID"})
	assert.Empty(t, diffs)
}
