package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// hostileLayout is a workspace whose canary tree sits next to the backing
// directory (base/ws/src and base/ws/canary) while the mountpoint sits
// deeper elsewhere (base/m/deep/mnt). A relative link "../canary" therefore
// reaches the canary only when the daemon resolves it in the backing tree;
// the kernel resolving it on the mount reaches the decoy base/m/deep/canary,
// which the tests leave unchecked.
type hostileLayout struct {
	d      *daemon
	canary string // absolute canary directory, must never change
	digest string // canary digest before the test
}

func startHostile(t *testing.T) *hostileLayout {
	t.Helper()
	base := t.TempDir()
	dirs := &daemonDirs{
		Src:   filepath.Join(base, "ws", "src"),
		Mnt:   filepath.Join(base, "m", "deep", "mnt"),
		State: filepath.Join(base, "state"),
	}
	require.NoError(t, os.MkdirAll(dirs.Src, 0o755))
	require.NoError(t, os.MkdirAll(dirs.Mnt, 0o755))
	h := &hostileLayout{canary: filepath.Join(base, "ws", "canary")}
	makeCanary(t, h.canary)
	makeCanary(t, filepath.Join(base, "m", "deep", "canary")) // the decoy
	h.digest = treeDigest(t, h.canary)
	h.d = startDaemon(t, daemonOptions{Dirs: dirs, Files: map[string]string{
		"inside.txt":        "inside\n",
		"sub/keep.txt":      "keep\n",
		"swap/existing.txt": "inside existing\n",
		"swap/doomed.txt":   "inside doomed\n",
		"fswap/victim.txt":  "inside victim\n",
	}})
	src := h.d.Src
	// Links out of the workspace, made out of band in the backing directory.
	require.NoError(t, os.Symlink(h.canary, filepath.Join(src, "oob-dir")))
	require.NoError(t, os.Symlink("../canary", filepath.Join(src, "oob-rel")))
	require.NoError(t, os.Symlink(filepath.Join(h.canary, "secret.txt"), filepath.Join(src, "oob-file")))
	return h
}

// requireCanaryIntact fails when anything under the canary changed.
func (h *hostileLayout) requireCanaryIntact(t *testing.T) {
	t.Helper()
	require.Equal(t, h.digest, treeDigest(t, h.canary), "something outside the workspace changed")
}

// TestHostile_PathsOutsideTheRootAreRefused sends every escape the socket
// admits (.. chains, absolute paths, cwd, links made out of band and through
// the mount, NUL bytes, 4 KiB components, invalid UTF-8) on one raw
// connection, with unconditional set so no guard hides a sandbox hole.
func TestHostile_PathsOutsideTheRootAreRefused(t *testing.T) {
	h := startHostile(t)
	d := h.d

	// Links out of the workspace, made through the mount: the daemon stores
	// the link as given; following it is the kernel's business on the mount
	// and refused on the socket.
	require.NoError(t, os.Symlink("../canary", d.m("mnt-dir")))
	require.NoError(t, os.Symlink(filepath.Join(h.canary, "existing.txt"), d.m("mnt-abs")))
	target, err := os.Readlink(filepath.Join(d.Src, "mnt-dir"))
	require.NoError(t, err)
	assert.Equal(t, "../canary", target, "the link is stored verbatim in the backing directory")
	target, err = os.Readlink(d.m("mnt-abs"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(h.canary, "existing.txt"), target)

	long := strings.Repeat("n", 4096)
	abs := func(rel string) string { return jsonString(filepath.Join(h.canary, rel)) }
	sandbox := provider.CodeSandboxDenied
	cases := []struct {
		name, method, params string
		code                 provider.Code // FS code in the error data
		rpc                  int           // JSON-RPC code when code is ""
	}{
		{"dotdot read", "fs.read", `{"path":"../canary/secret.txt"}`, sandbox, 0},
		{"dotdot through a subdir", "fs.read", `{"path":"sub/../../canary/secret.txt"}`, sandbox, 0},
		{"dotdot chain to /etc", "fs.read", `{"path":"../../../../../../../../../../../../etc/passwd"}`, sandbox, 0},
		{"absolute /etc", "fs.read", `{"path":"/etc/passwd"}`, sandbox, 0},
		{"absolute canary", "fs.read", `{"path":` + abs("secret.txt") + `}`, sandbox, 0},
		{"dotdot stat", "fs.stat", `{"path":"../canary/secret.txt"}`, sandbox, 0},
		{"dotdot list", "fs.list", `{"path":"../canary"}`, sandbox, 0},
		{"list parent", "fs.list", `{"path":".."}`, sandbox, 0},
		{"dotdot watch", "fs.watch", `{"path":"../canary"}`, sandbox, 0},
		{"dotdot write", "fs.write", `{"path":"../canary/planted.txt","content":"x\n","unconditional":true}`, sandbox, 0},
		{"dotdot write guarded", "fs.write", `{"path":"../canary/planted.txt","content":"x\n"}`, sandbox, 0},
		{"absolute write", "fs.write", `{"path":` + abs("planted.txt") + `,"content":"x\n","unconditional":true}`, sandbox, 0},
		{"cwd outside", "fs.write", `{"path":"planted.txt","cwd":` + jsonString(h.canary) + `,"content":"x\n","unconditional":true}`, sandbox, 0},
		{"cwd dotdot", "fs.write", `{"path":"canary/planted.txt","cwd":"..","content":"x\n","unconditional":true}`, sandbox, 0},
		{"dotdot edit", "fs.edit", `{"path":"../canary/existing.txt","oldString":"canary","newString":"pwned","unconditional":true}`, sandbox, 0},
		{"dotdot delete", "fs.delete", `{"path":"../canary/doomed.txt","unconditional":true}`, sandbox, 0},
		{"move out of the canary", "fs.move", `{"from":"../canary/secret.txt","to":"stolen.txt","unconditional":true}`, sandbox, 0},
		{"move into the canary", "fs.move", `{"from":"inside.txt","to":"../canary/planted.txt","unconditional":true}`, sandbox, 0},
		{"patch add outside", "fs.patch", `{"patch":"*** Begin Patch\n*** Add File: ../canary/planted.txt\n+x\n*** End Patch","unconditional":true}`, sandbox, 0},
		{"patch delete outside", "fs.patch", `{"patch":"*** Begin Patch\n*** Delete File: ../canary/doomed.txt\n*** End Patch","unconditional":true}`, sandbox, 0},
		{"patch move outside", "fs.patch", `{"patch":"*** Begin Patch\n*** Update File: inside.txt\n*** Move to: ../canary/planted.txt\n@@\n-inside\n+moved\n*** End Patch","unconditional":true}`, sandbox, 0},
		{"out-of-band dir link read", "fs.read", `{"path":"oob-dir/secret.txt"}`, sandbox, 0},
		{"out-of-band relative link read", "fs.read", `{"path":"oob-rel/secret.txt"}`, sandbox, 0},
		{"out-of-band file link read", "fs.read", `{"path":"oob-file"}`, sandbox, 0},
		{"out-of-band dir link write", "fs.write", `{"path":"oob-dir/planted.txt","content":"x\n","unconditional":true}`, sandbox, 0},
		{"out-of-band file link write", "fs.write", `{"path":"oob-file","content":"x\n","unconditional":true}`, sandbox, 0},
		{"out-of-band dir link delete", "fs.delete", `{"path":"oob-rel/doomed.txt","unconditional":true}`, sandbox, 0},
		{"out-of-band link as cwd", "fs.write", `{"path":"planted.txt","cwd":"oob-dir","content":"x\n","unconditional":true}`, sandbox, 0},
		{"mount-made dir link read", "fs.read", `{"path":"mnt-dir/secret.txt"}`, sandbox, 0},
		{"mount-made dir link write", "fs.write", `{"path":"mnt-dir/planted.txt","content":"x\n","unconditional":true}`, sandbox, 0},
		{"mount-made file link read", "fs.read", `{"path":"mnt-abs"}`, sandbox, 0},
		{"mount-made file link write", "fs.write", `{"path":"mnt-abs","content":"x\n","unconditional":true}`, sandbox, 0},
		{"mount-made file link edit", "fs.edit", `{"path":"mnt-abs","oldString":"canary","newString":"pwned","unconditional":true}`, sandbox, 0},
		{"mount-made link move source", "fs.move", `{"from":"mnt-dir/secret.txt","to":"stolen2.txt","unconditional":true}`, sandbox, 0},
		{"mount-made link move destination", "fs.move", `{"from":"inside.txt","to":"mnt-dir/planted.txt","unconditional":true}`, sandbox, 0},
		{"patch through a link", "fs.patch", `{"patch":"*** Begin Patch\n*** Update File: oob-dir/existing.txt\n@@\n-canary existing\n+pwned\n*** End Patch","unconditional":true}`, sandbox, 0},
		{"NUL in path", "fs.read", `{"path":"inside.txt\u0000../canary/secret.txt"}`, provider.CodeInvalidArgument, 0},
		{"NUL in write path", "fs.write", `{"path":"../canary/\u0000planted.txt","content":"x\n","unconditional":true}`, provider.CodeInvalidArgument, 0},
		{"NUL in cwd", "fs.write", `{"path":"planted.txt","cwd":"sub\u0000","content":"x\n","unconditional":true}`, provider.CodeInvalidArgument, 0},
		{"NUL in move destination", "fs.move", `{"from":"inside.txt","to":"x\u0000y","unconditional":true}`, provider.CodeInvalidArgument, 0},
		{"invalid UTF-8 path", "fs.write", "{\"path\":\"bad-\xff.txt\",\"content\":\"x\\n\",\"unconditional\":true}", "", control.CodeInvalidParams},
		{"invalid UTF-8 outside", "fs.read", "{\"path\":\"../canary/\xfe\xff\"}", "", control.CodeInvalidParams},
		{"unpaired surrogate path", "fs.write", `{"path":"bad-\udc80.txt","content":"x\n","unconditional":true}`, "", control.CodeInvalidParams},
		{"4 KiB component outside", "fs.write", `{"path":"../canary/` + long + `","content":"x\n","unconditional":true}`, sandbox, 0},
	}
	raw := dialRaw(t, d.Socket)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw.t = t
			r := raw.call(rpcLine(i+1, tc.method, tc.params))
			require.NotNil(t, r.Error, "%s %s must be refused, got %s", tc.method, tc.params, r.Raw)
			assert.NotEmpty(t, r.Error.Message, "a refusal says why")
			if tc.code != "" {
				assert.Equal(t, tc.code, r.fsCode(), "%s", r.Raw)
			} else {
				assert.Equal(t, tc.rpc, r.Error.Code, "%s", r.Raw)
			}
		})
	}
	raw.t = t

	// 4 KiB components inside the workspace: refused with an FS code the
	// client can route, nothing created, connection alive.
	for i, params := range []string{
		`{"path":"` + long + `","content":"x\n","unconditional":true}`,
		`{"path":"sub/` + long + `/x.txt","content":"x\n","unconditional":true}`,
	} {
		r := raw.call(rpcLine(1000+i, "fs.write", params))
		require.NotNil(t, r.Error, "a 4 KiB path component must be refused: %s", r.Raw)
		assert.NotEmpty(t, r.fsCode(), "%s", r.Raw)
		assert.NotEmpty(t, r.Error.Message)
	}
	r := raw.call(rpcLine(1100, "fs.stat", `{"path":"`+long+`"}`))
	if r.Error == nil {
		assert.Contains(t, r.Raw, `"exists":false`, "a 4 KiB name cannot exist")
	}
	raw.requireAlive()

	h.requireCanaryIntact(t)
	for _, name := range []string{"stolen.txt", "stolen2.txt", "planted.txt", "bad-\xff.txt"} {
		_, err := os.Lstat(filepath.Join(d.Src, name))
		assert.ErrorIs(t, err, os.ErrNotExist, "%s must not have been created", name)
	}
	assertBacking(t, d, "inside.txt", "inside\n")
	stopAndCheckRaces(t, d)
}

// TestHostile_SocketWritesWhileADirectoryIsSwappedForALink exchanges the
// workspace directory swap/ with a link to the canary (renameat2
// RENAME_EXCHANGE, out of band) while two sessions write, edit, delete and
// move inside it: every request either lands inside or is refused.
func TestHostile_SocketWritesWhileADirectoryIsSwappedForALink(t *testing.T) {
	h := startHostile(t)
	d := h.d
	require.NoError(t, os.Symlink("../canary", filepath.Join(d.Src, "swap-alt")))
	stopSwap := swapLoop(t, filepath.Join(d.Src, "swap"), filepath.Join(d.Src, "swap-alt"))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const rounds = 120
	var ok, refused atomic.Int64
	var mu sync.Mutex
	codes := map[provider.Code]int{}
	var unclear []string
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := control.Dial(d.Socket)
			if err != nil {
				mu.Lock()
				unclear = append(unclear, "dial: "+err.Error())
				mu.Unlock()
				return
			}
			defer c.Close()
			note := func(err error) {
				if err == nil {
					ok.Add(1)
					return
				}
				refused.Add(1)
				mu.Lock()
				defer mu.Unlock()
				code := provider.CodeOf(err)
				codes[code]++
				if code == "" || provider.MessageOf(err) == "" {
					unclear = append(unclear, err.Error())
				}
			}
			for i := 0; i < rounds; i++ {
				_, err := c.Write(ctx, control.WriteParams{Path: "swap/existing.txt", Content: fmt.Sprintf("inside existing %d %d\n", g, i), Unconditional: true})
				note(err)
				_, err = c.Edit(ctx, control.EditParams{Path: "swap/existing.txt", OldString: "existing", NewString: "existing!", Unconditional: true})
				note(err)
				_, err = c.Write(ctx, control.WriteParams{Path: fmt.Sprintf("swap/new-%d-%d.txt", g, i), Content: "new\n", Unconditional: true})
				note(err)
				_, err = c.Delete(ctx, control.DeleteParams{Path: "swap/doomed.txt", Unconditional: true})
				note(err)
				_, err = c.Write(ctx, control.WriteParams{Path: "swap/doomed.txt", Content: "inside doomed\n", Unconditional: true})
				note(err)
				_, err = c.Move(ctx, control.MoveParams{From: "swap/doomed.txt", To: fmt.Sprintf("taken-%d-%d.txt", g, i), Unconditional: true})
				note(err)
				_, err = c.Read(ctx, control.ReadParams{Path: "swap/existing.txt"})
				note(err)
			}
		}()
	}
	wg.Wait()
	swaps := stopSwap()
	t.Logf("%d swaps, %d requests succeeded, %d refused: %v", swaps, ok.Load(), refused.Load(), codes)
	assert.Empty(t, unclear, "refusals without an FS code or message")
	assert.Positive(t, ok.Load(), "some requests must land inside")
	assert.Positive(t, swaps, "the swapper must have run")

	h.requireCanaryIntact(t)
	taken, err := filepath.Glob(filepath.Join(d.Src, "taken-*.txt"))
	require.NoError(t, err)
	for _, p := range taken {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "inside doomed\n", string(b), "%s was moved in from outside", p)
	}
	stopAndCheckRaces(t, d)
}

// TestHostile_MountOpsWhileBackingEntriesAreSwappedForLinks does the same
// through the mount, one kind of operation at a time: the kernel holds
// nodes for swap/ and fswap/victim.txt while, out of band, they are
// exchanged with links into the canary. The daemon must not follow those
// links when it acts on a cached node. (The kernel following a link it
// looked up reaches the decoy, see hostileLayout.)
func TestHostile_MountOpsWhileBackingEntriesAreSwappedForLinks(t *testing.T) {
	h := startHostile(t)
	d := h.d
	src := d.Src
	require.NoError(t, os.Symlink("../canary", filepath.Join(src, "swap-alt")))
	require.NoError(t, os.Symlink("../../canary/victim.txt", filepath.Join(src, "fswap", "victim-alt")))

	// Each phase runs one operation in a loop while both entries are being
	// swapped; its name is the operation the daemon performs.
	phases := []struct {
		name string
		op   func(g, i int) error
	}{
		{"open O_TRUNC and write in a swapped directory", func(g, i int) error {
			return os.WriteFile(d.m("swap/existing.txt"), []byte(fmt.Sprintf("mount %d %d\n", g, i)), 0o644)
		}},
		{"open O_TRUNC and write a swapped file", func(g, i int) error {
			return os.WriteFile(d.m("fswap/victim.txt"), []byte(fmt.Sprintf("mount %d %d\n", g, i)), 0o644)
		}},
		{"create in a swapped directory", func(g, i int) error {
			return os.WriteFile(d.m(fmt.Sprintf("swap/new-%d-%d.txt", g, i)), []byte("new\n"), 0o644)
		}},
		{"truncate a swapped file (setattr size)", func(g, i int) error {
			return os.Truncate(d.m("fswap/victim.txt"), 3)
		}},
		{"truncate in a swapped directory (setattr size)", func(g, i int) error {
			return os.Truncate(d.m("swap/existing.txt"), 3)
		}},
		{"chmod a swapped file (setattr mode)", func(g, i int) error {
			return os.Chmod(d.m("fswap/victim.txt"), os.FileMode(0o600+(i%2)*0o44))
		}},
		{"chmod in a swapped directory (setattr mode)", func(g, i int) error {
			return os.Chmod(d.m("swap/existing.txt"), os.FileMode(0o600+(i%2)*0o44))
		}},
		{"setxattr on a swapped file", func(g, i int) error {
			return unix.Setxattr(d.m("fswap/victim.txt"), "user.dsh.test", []byte("x"), 0)
		}},
		{"unlink in a swapped directory", func(g, i int) error {
			if err := os.WriteFile(d.m("swap/doomed.txt"), []byte("inside doomed\n"), 0o644); err != nil {
				return err
			}
			return os.Remove(d.m("swap/doomed.txt"))
		}},
		{"rename out of a swapped directory", func(g, i int) error {
			_ = os.WriteFile(d.m("swap/existing.txt"), []byte("inside existing\n"), 0o644)
			return os.Rename(d.m("swap/existing.txt"), d.m(fmt.Sprintf("taken-%d-%d.txt", g, i)))
		}},
		{"rename into a swapped directory", func(g, i int) error {
			p := d.m(fmt.Sprintf("give-%d-%d.txt", g, i))
			if err := os.WriteFile(p, []byte("given\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(p, d.m("swap/planted.txt"))
		}},
		{"mkdir and rmdir in a swapped directory", func(g, i int) error {
			p := d.m("swap/sub")
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			return os.Remove(p)
		}},
	}
	const rounds = 150
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			// Warm the kernel's nodes while the entries are real.
			_, _ = os.ReadFile(d.m("swap/existing.txt"))
			_, _ = os.ReadFile(d.m("fswap/victim.txt"))
			stopDir := swapLoop(t, filepath.Join(src, "swap"), filepath.Join(src, "swap-alt"))
			stopFile := swapLoop(t, filepath.Join(src, "fswap", "victim.txt"), filepath.Join(src, "fswap", "victim-alt"))
			var ok, failed atomic.Int64
			var mu sync.Mutex
			errnos := map[string]int{}
			var wg sync.WaitGroup
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < rounds; i++ {
						if err := ph.op(g, i); err != nil {
							failed.Add(1)
							mu.Lock()
							errnos[errnoOf(err).Error()]++
							mu.Unlock()
						} else {
							ok.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			swaps := stopDir() + stopFile()
			t.Logf("%d swaps; %d succeeded, %d failed: %v", swaps, ok.Load(), failed.Load(), errnos)
			assert.Positive(t, swaps)
			assert.Equal(t, h.digest, treeDigest(t, h.canary), "%s changed the canary outside the workspace", ph.name)
			// Put the canary back so the next phase starts clean.
			require.NoError(t, os.RemoveAll(h.canary))
			makeCanary(t, h.canary)
		})
	}
	stopAndCheckRaces(t, d)
}

// swapLoop exchanges a and b (RENAME_EXCHANGE) in a loop until the returned
// stop function is called; stop returns the number of exchanges.
func swapLoop(t *testing.T, a, b string) func() int {
	t.Helper()
	var n atomic.Int64
	done := make(chan struct{})
	finished := make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				finished <- nil
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				finished <- fmt.Errorf("exchange %s and %s: %w", a, b, err)
				return
			}
			n.Add(1)
		}
	}()
	return func() int {
		close(done)
		require.NoError(t, <-finished)
		return int(n.Load())
	}
}

// TestHostile_MountNames checks names the mount must refuse or store
// faithfully: invalid UTF-8 (allowed by POSIX, so it works and the socket
// still lists the directory), and names over the limits (ENAMETOOLONG, not
// EIO, and nothing created). NUL cannot reach the mount: the system call
// interface ends names at NUL.
func TestHostile_MountNames(t *testing.T) {
	h := startHostile(t)
	d := h.d
	ctx := testCtx(t)

	bad := "bad-\xff\xfe.txt"
	require.NoError(t, os.WriteFile(d.m(bad), []byte("bytes name\n"), 0o644), "POSIX names are bytes; the mount stores them")
	got, err := os.ReadFile(filepath.Join(d.Src, bad))
	require.NoError(t, err, "the backing file has the same byte name")
	assert.Equal(t, "bytes name\n", string(got))
	list, err := d.Client.List(ctx, control.ListParams{Path: "."})
	require.NoError(t, err, "listing a directory holding a non-UTF-8 name")
	assert.NotEmpty(t, list.Entries)
	raw := dialRaw(t, d.Socket)
	r := raw.call(rpcLine(1, "fs.read", "{\"path\":\""+bad+"\"}"))
	require.NotNil(t, r.Error, "raw non-UTF-8 bytes on the socket are refused: %s", r.Raw)
	assert.Equal(t, control.CodeInvalidParams, r.Error.Code)
	raw.requireAlive()

	for _, n := range []int{256, 1100, 4096} {
		name := strings.Repeat("L", n)
		err := os.WriteFile(d.m(name), []byte("x"), 0o644)
		assert.ErrorIs(t, err, syscall.ENAMETOOLONG, "a %d-byte name", n)
		err = os.Mkdir(d.m(name), 0o755)
		assert.ErrorIs(t, err, syscall.ENAMETOOLONG, "mkdir of a %d-byte name", n)
		err = os.Symlink("x", d.m(name))
		assert.ErrorIs(t, err, syscall.ENAMETOOLONG, "symlink named with %d bytes", n)
	}
	require.NoError(t, os.WriteFile(d.m(strings.Repeat("M", 255)), []byte("x"), 0o644), "255 bytes is the limit and works")
	entries, err := os.ReadDir(d.Src)
	require.NoError(t, err)
	for _, e := range entries {
		assert.Less(t, len(e.Name()), 256)
	}
	h.requireCanaryIntact(t)
	stopAndCheckRaces(t, d)
}

// TestHostile_OneGiBRequestLine streams a 1 GiB request line without ever
// holding it: the daemon answers an error without its RSS growing by more
// than 100 MiB, and the connection goes on.
func TestHostile_OneGiBRequestLine(t *testing.T) {
	// A bound well under the line and under the RSS allowance proves the
	// line is refused as it streams, not buffered.
	const bound = 8 << 20
	d := startDaemon(t, daemonOptions{Args: []string{"--max-request-bytes", fmt.Sprint(bound)}})
	pid := d.pid()
	before := procStatusKiB(t, pid, "VmRSS")

	var peak atomic.Int64
	peak.Store(before)
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if kib, ok := statusField(string(b), "VmRSS"); ok && kib > peak.Load() {
				peak.Store(kib)
			}
		}
	}()

	raw := dialRaw(t, d.Socket)
	require.NoError(t, raw.nc.SetWriteDeadline(time.Now().Add(3*time.Minute)))
	_, err := raw.nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.write","params":{"path":"big.txt","content":"`))
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	for i := 0; i < 1024; i++ {
		_, err := raw.nc.Write(chunk)
		require.NoError(t, err, "the daemon stopped reading after %d MiB", i)
	}
	_, err = raw.nc.Write([]byte("\"}}\n"))
	require.NoError(t, err)
	r := raw.recv()
	close(stopSampling)
	<-sampled

	require.NotNil(t, r.Error, "a 1 GiB line must be refused: %.200s", r.Raw)
	assert.Equal(t, control.CodeInvalidRequest, r.Error.Code)
	assert.Contains(t, r.Error.Message, "exceeds")
	assert.Contains(t, r.Error.Message, fmt.Sprint(bound), "the error names the configured bound")
	raw.requireAlive()
	_, err = os.Stat(filepath.Join(d.Src, "big.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	growth := peak.Load() - before
	t.Logf("daemon RSS %d KiB before, peak %d KiB while streaming 1 GiB (growth %d KiB)", before, peak.Load(), growth)
	assert.Less(t, growth, int64(100<<10), "the daemon's RSS grew by more than 100 MiB for one oversized line")
	stopAndCheckRaces(t, d)
}

// TestHostile_TenThousandConnectionsOpenedAndDropped opens and drops 10,000
// connections (some mid-request); the daemon still answers and releases
// every descriptor.
func TestHostile_TenThousandConnectionsOpenedAndDropped(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := testCtx(t)
	pid := d.pid()
	_, err := d.Client.Status(ctx)
	require.NoError(t, err)
	fdsBefore := openFDs(t, pid)

	// A full accept queue answers EAGAIN at once (non-blocking connect);
	// such a dial is retried, like any client would, and counted.
	const total, workers = 10000, 8
	var busy atomic.Int64
	var next atomic.Int64
	var mu sync.Mutex
	var dialErrs []string
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				var nc net.Conn
				var err error
				for tries := 0; tries < 1000; tries++ {
					if nc, err = net.Dial("unix", d.Socket); errnoOf(err) != syscall.EAGAIN {
						break
					}
					busy.Add(1)
					time.Sleep(time.Millisecond)
				}
				if err != nil {
					mu.Lock()
					dialErrs = append(dialErrs, err.Error())
					mu.Unlock()
					continue
				}
				switch i % 4 {
				case 1: // half a request
					_, _ = nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.re`))
				case 2: // a whole request, not waiting for the answer
					_, _ = nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.stat","params":{"path":"."}}` + "\n"))
				}
				_ = nc.Close()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d connections; %d dials found the accept queue full and were retried", total, busy.Load())
	assert.Empty(t, dialErrs, "connections the daemon never accepted")

	st, err := d.Client.Status(ctx)
	require.NoError(t, err, "daemon.status after 10,000 dropped connections")
	t.Logf("status after the storm: %d connections, %d fds before", st.Connections, fdsBefore)
	require.Eventually(t, func() bool {
		s, err := d.Client.Status(ctx)
		return err == nil && s.Connections == 1
	}, time.Minute, 50*time.Millisecond, "dropped connections are forgotten")
	require.Eventually(t, func() bool { return openFDs(t, pid) <= fdsBefore+2 }, time.Minute, 50*time.Millisecond,
		"the daemon holds %d descriptors, %d before the storm", openFDs(t, pid), fdsBefore)
	stopAndCheckRaces(t, d)
}

// TestHostile_PeerWithAnotherUIDIsRefused runs a child as uid 65534: the
// 0700 socket directory stops it at connect (EACCES); with the directories
// opened up by the test, SO_PEERCRED refuses it with a line that says what
// to do.
func TestHostile_PeerWithAnotherUIDIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a child under another uid needs root")
	}
	d := startDaemon(t, daemonOptions{})
	ctx := testCtx(t)

	// The child binary must be readable by uid 65534.
	binDir, err := os.MkdirTemp("", "dsh-peer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	bin := filepath.Join(binDir, "peer")
	exe, err := os.ReadFile(testBinary(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, exe, 0o755))

	runPeer := func() string {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^TestHelperPeerConnect$")
		cmd.Env = []string{helperEnv + "=" + helperPeerConnect, helperSocketEnv + "=" + d.Socket, "PATH=/usr/bin:/bin"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "peer child: %s", out)
		return string(out)
	}

	out := runPeer()
	assert.True(t, strings.HasPrefix(out, fmt.Sprintf("dial\t%d\t", int(syscall.EACCES))),
		"the 0700 socket directory refuses another uid at connect: %q", out)

	// Open the path up, so the only barrier left is SO_PEERCRED.
	type saved struct {
		path string
		mode os.FileMode
	}
	var restore []saved
	t.Cleanup(func() {
		for _, s := range restore {
			_ = os.Chmod(s.path, s.mode)
		}
	})
	open := func(p string, add os.FileMode) {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		if fi.Mode().Perm()&add == add {
			return
		}
		restore = append(restore, saved{p, fi.Mode().Perm()})
		require.NoError(t, os.Chmod(p, fi.Mode().Perm()|add))
	}
	open(d.Socket, 0o666)
	for dir := filepath.Dir(d.Socket); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		open(dir, 0o011)
	}

	out = runPeer()
	require.True(t, strings.HasPrefix(out, "line\t"), "with the path open the child connects and gets an answer: %q", out)
	var r rawResponse
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "line\t")), &r), out)
	require.NotNil(t, r.Error, "uid 65534 must be refused: %s", out)
	assert.Equal(t, control.CodePeerRefused, r.Error.Code)
	assert.Contains(t, r.Error.Message, "uid 65534")
	assert.Contains(t, r.Error.Message, "--allow-uid 65534", "the refusal says how to allow the peer")
	assert.NotContains(t, out, `"result"`)

	st, err := d.Client.Status(ctx)
	require.NoError(t, err, "the daemon goes on after refusing a peer")
	assert.NotNil(t, st)
	stopAndCheckRaces(t, d)
}
