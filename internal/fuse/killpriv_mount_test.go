package fuse

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/branch"
)

// onThreadWithoutFsetid runs f on a locked OS thread whose effective set
// lacks CAP_FSETID (capabilities are per thread; the FUSE request carries
// the thread's id), then restores the capability.
func onThreadWithoutFsetid(t *testing.T, drop bool, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if !drop {
			defer runtime.UnlockOSThread()
			f()
			return
		}
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Errorf("capget: %v", err)
			return // the thread stays locked and dies with the goroutine
		}
		saved := data
		data[0].Effective &^= 1 << capFsetid
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			t.Errorf("capset: %v", err)
			return
		}
		f()
		if err := unix.Capset(&hdr, &saved[0]); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// privOp is one operation that may drop set-id bits.
type privOp struct {
	name      string
	dropCap   bool // the caller lacks CAP_FSETID
	do        func(p string) error
	wantKills bool // on native ext4, for a set-uid file
}

var privOps = []privOp{
	{"write", true, func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte("x"), 1)
		return closeAfter(f, err)
	}, true},
	{"write with CAP_FSETID", false, func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte("x"), 1)
		return closeAfter(f, err)
	}, false},
	{"truncate", true, func(p string) error { return unix.Truncate(p, 1) }, true},
	{"truncate with CAP_FSETID", false, func(p string) error { return unix.Truncate(p, 1) }, false},
	{"ftruncate", true, func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return closeAfter(f, f.Truncate(3))
	}, true},
	{"open O_TRUNC", true, func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		return f.Close()
	}, true},
	{"fallocate", true, func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		return closeAfter(f, unix.Fallocate(int(f.Fd()), 0, 0, 8192))
	}, true},
	{"copy_file_range", true, func(p string) error {
		src, err := os.CreateTemp(filepath.Dir(p), "src")
		if err != nil {
			return err
		}
		defer os.Remove(src.Name())
		if _, err := src.WriteString("abc"); err != nil {
			return closeAfter(src, err)
		}
		dst, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return closeAfter(src, err)
		}
		offIn, offOut := int64(0), int64(2)
		_, err = unix.CopyFileRange(int(src.Fd()), &offIn, int(dst.Fd()), &offOut, 3, 0)
		return closeAfter(src, closeAfter(dst, err))
	}, true},
	{"chown", false, func(p string) error { return os.Chown(p, 0, 0) }, true},
	{"chmod keeps what it sets", true, func(p string) error { return unix.Chmod(p, 0o6755) }, false},
}

func closeAfter(f *os.File, err error) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// privModes are the starting modes: set-uid and set-gid with group
// execute (both dropped), set-gid without it (kept: mandatory locking).
var privModes = []uint32{0o6775, 0o2765, 0o4644}

// prepare creates file p with content and mode.
func prepare(t *testing.T, p string, mode uint32) {
	t.Helper()
	require.NoError(t, os.WriteFile(p, []byte("0123456789"), 0o644))
	require.NoError(t, os.Chmod(p, os.FileMode(mode&0o777)|unixModeBits(mode)))
}

// modeAfter runs op on path q and returns the mode of file p after it.
func modeAfter(t *testing.T, p, q string, op privOp) uint32 {
	t.Helper()
	var opErr error
	onThreadWithoutFsetid(t, op.dropCap, func() { opErr = op.do(q) })
	require.NoError(t, opErr, op.name)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(p, &st))
	return st.Mode & 0o7777
}

// unixModeBits maps set-id bits to os.FileMode.
func unixModeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&unix.S_ISUID != 0 {
		m |= os.ModeSetuid
	}
	if mode&unix.S_ISGID != 0 {
		m |= os.ModeSetgid
	}
	return m
}

// TestKillPriv_SetIDBitsDropLikeOnTheDisk compares, operation by operation,
// the mode a file ends with through the mount (bound and not, with and
// without passthrough) with the mode the same operation leaves on the
// native disk.
func TestKillPriv_SetIDBitsDropLikeOnTheDisk(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		native := t.TempDir()
		for _, bound := range []bool{false, true} {
			if bound {
				e.session()
			}
			for i, op := range privOps {
				for _, mode := range privModes {
					name := fmt.Sprintf("bound=%v/%s/%04o", bound, op.name, mode)
					t.Run(name, func(t *testing.T) {
						file := fmt.Sprintf("f-%v-%d-%o", bound, i, mode) // a file of its own per case
						prepare(t, filepath.Join(native, file), mode)
						want := modeAfter(t, filepath.Join(native, file), filepath.Join(native, file), op)
						if mode == 0o4644 {
							assert.Equal(t, op.wantKills, want&unix.S_ISUID == 0, "native %s", op.name)
						}
						prepare(t, e.b(file), mode)
						if bound {
							// A bound writer needs a fresh observation.
							_, err := os.ReadFile(e.m(file))
							require.NoError(t, err)
						}
						got := modeAfter(t, e.b(file), e.m(file), op)
						assert.Equal(t, fmt.Sprintf("%04o", want), fmt.Sprintf("%04o", got), "backing mode after %s", op.name)
						var st unix.Stat_t
						require.NoError(t, unix.Stat(e.m(file), &st))
						assert.Equal(t, fmt.Sprintf("%04o", want), fmt.Sprintf("%04o", st.Mode&0o7777), "mode seen through the mount after %s", op.name)
					})
				}
			}
		}
	})
}

// withDebugLog sets c to log every FUSE request to h, when h is set.
func (c Config) withDebugLog(h slog.Handler) Config {
	if h != nil {
		c.Debug, c.Logger = true, slog.New(h)
	}
	return c
}

// opCounter is a slog.Handler that counts the FUSE requests of one kind
// in go-fuse's debug log ("rx 12: GETATTR n3 ...").
type opCounter struct {
	op string
	n  *atomic.Int64
}

func (c opCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c opCounter) Handle(_ context.Context, r slog.Record) error {
	if _, rest, ok := strings.Cut(r.Message, ": "); ok && strings.HasPrefix(r.Message, "rx ") && strings.HasPrefix(rest, c.op+" ") {
		c.n.Add(1)
	}
	return nil
}
func (c opCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c opCounter) WithGroup(string) slog.Handler      { return c }

// TestKillPriv_ChownSendsNoGetattr: with KILLPRIV_V2 the kernel does not
// fetch the attributes again before every chown (to compute the set-id
// bits to drop): the daemon drops them.
func TestKillPriv_ChownSendsNoGetattr(t *testing.T) {
	getattrs := &atomic.Int64{}
	e := newEnv(t, envOptions{debugLog: opCounter{op: "GETATTR", n: getattrs}})
	const files = 20
	for i := range files {
		e.put(fmt.Sprintf("f%d", i), "x")
		_, err := os.Stat(e.m(fmt.Sprintf("f%d", i)))
		require.NoError(t, err)
	}
	before := getattrs.Load()
	for i := range files {
		require.NoError(t, os.Chown(e.m(fmt.Sprintf("f%d", i)), 0, 0))
	}
	assert.Zero(t, getattrs.Load()-before, "GETATTR requests for %d chowns", files)
}

// TestKillPriv_BranchMountDropsLikeTheDisk: on a branch mount the daemon
// drops the bits on the branch's copy, and the workspace's file keeps them.
// Only the operations that drop bits are compared: a branch's copy-up
// itself loses the set-id bits today (a write by a caller with CAP_FSETID
// leaves 2765 as 0765 on the branch), which is the branch's to fix.
func TestKillPriv_BranchMountDropsLikeTheDisk(t *testing.T) {
	for _, pt := range []bool{false, true} {
		t.Run(fmt.Sprintf("passthrough=%v", pt), func(t *testing.T) {
			be := newBranchEnv(t, envOptions{passthrough: pt})
			native := t.TempDir()
			for i, op := range privOps {
				for _, mode := range []uint32{0o6775, 0o4644} {
					t.Run(fmt.Sprintf("%s/%04o", op.name, mode), func(t *testing.T) {
						file := fmt.Sprintf("b-%d-%o", i, mode)
						prepare(t, filepath.Join(native, file), mode)
						want := modeAfter(t, filepath.Join(native, file), filepath.Join(native, file), op)
						prepare(t, be.b(file), mode)
						bpath := filepath.Join(be.bmnt, file)
						got := modeAfter(t, bpath, bpath, op)
						assert.Equal(t, fmt.Sprintf("%04o", want), fmt.Sprintf("%04o", got), "branch mode after %s", op.name)
						var st unix.Stat_t
						require.NoError(t, unix.Stat(be.b(file), &st))
						assert.Equal(t, fmt.Sprintf("%04o", mode), fmt.Sprintf("%04o", st.Mode&0o7777), "the workspace's file")
					})
				}
			}
		})
	}
}

// TestKillPriv_BranchKeepsAndCommitsSetIDBits: a copy-up keeps a file's
// set-id bits (a write by a caller with CAP_FSETID keeps them, as on the
// disk), and the commit gives the workspace file the branch's bits.
func TestKillPriv_BranchKeepsAndCommitsSetIDBits(t *testing.T) {
	be := newBranchEnv(t, envOptions{})
	for name, mode := range map[string]uint32{"suid": 0o4755, "sgid": 0o2775, "both": 0o6755} {
		prepare(t, be.b(name), mode)
		f, err := os.OpenFile(filepath.Join(be.bmnt, name), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("branch"), 0)
		require.NoError(t, closeAfter(f, err))
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(be.bmnt, name), &st))
		assert.Equal(t, fmt.Sprintf("%04o", mode), fmt.Sprintf("%04o", st.Mode&0o7777), "%s in the branch after a root write", name)
	}
	_, err := be.mgr.Commit(context.Background(), be.br.Name(), false, nil, branch.Hooks{})
	require.NoError(t, err)
	for name, mode := range map[string]uint32{"suid": 0o4755, "sgid": 0o2775, "both": 0o6755} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(be.b(name), &st))
		assert.Equal(t, fmt.Sprintf("%04o", mode), fmt.Sprintf("%04o", st.Mode&0o7777), "%s in the workspace after the commit", name)
		data, err := os.ReadFile(be.b(name))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(data), "branch"), "%s committed", name)
	}
}
