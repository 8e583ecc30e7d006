package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/fuse"
)

func TestServeConfig_MountpointMustStayOutOfTheWorkspace(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ws")
	require.NoError(t, os.MkdirAll(filepath.Join(src, "inner"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "outer", "ws2"), 0o755))
	require.NoError(t, os.Symlink(src, filepath.Join(dir, "alias")))
	cases := []struct {
		name, source, mount, want string
	}{
		{"same", src, src, "same directory"},
		{"same through a symlink", src, filepath.Join(dir, "alias"), "same directory"},
		{"inside", src, filepath.Join(src, "inner"), "inside SOURCE"},
		{"source inside mount", filepath.Join(dir, "outer", "ws2"), filepath.Join(dir, "outer"), "inside MOUNTPOINT"},
		{"missing mountpoint", src, filepath.Join(dir, "nope"), "create the directory first"},
		{"source not a dir", filepath.Join(dir, "nofile"), dir, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := serveConfig{Source: c.source, Mountpoint: c.mount, StateDir: filepath.Join(dir, "state")}
			_, err := cfg.resolve(slog.New(slog.DiscardHandler))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestServeConfig_DefaultsLiveInOnePlace(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "project")
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	xdg, err := os.MkdirTemp("", "xdg")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(xdg) })
	t.Setenv("XDG_STATE_HOME", xdg)

	cfg, err := parseServeArgs([]string{"--hide", ".git", "--hide", "*.key", "--read-only", "docs",
		"--allow-uid", "1000", "--allow-uid", "1001", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []string{".git", "*.key"}, cfg.Hide)
	assert.Equal(t, []string{"docs"}, cfg.ReadOnly)
	assert.Equal(t, []uint32{1000, 1001}, cfg.AllowUIDs)
	assert.Equal(t, defaultGrace, cfg.Grace)
	assert.True(t, cfg.Passthrough)

	cfg, err = cfg.resolve(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	state := filepath.Dir(filepath.Dir(cfg.Socket))
	assert.Equal(t, cfg.StateDir, state)
	assert.Equal(t, filepath.Join(xdg, "dshmount"), filepath.Dir(cfg.StateDir))
	assert.True(t, strings.HasPrefix(filepath.Base(cfg.StateDir), "project-"), cfg.StateDir)
	assert.Equal(t, filepath.Join(cfg.StateDir, "run", "control.sock"), cfg.Socket)

	again, err := serveConfig{Source: src, Mountpoint: mnt}.resolve(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Equal(t, cfg.StateDir, again.StateDir, "the state directory is stable for one workspace")

	long := serveConfig{Source: src, Mountpoint: mnt, Socket: "/" + strings.Repeat("s", 120)}
	_, err = long.resolve(slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--socket")

	_, err = parseServeArgs([]string{src}, io.Discard, io.Discard)
	require.Error(t, err)
	_, err = parseServeArgs([]string{"--allow-uid", "bob", src, mnt}, io.Discard, io.Discard)
	require.Error(t, err)
}

// lockedBuffer is a goroutine-safe stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServe_MountsServesAndShutsDownOnCancel(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("DSH_REQUIRE_FUSE") == "1" {
			t.Fatalf("DSH_REQUIRE_FUSE=1 but /dev/fuse is missing: %v", err)
		}
		t.Skipf("cannot mount: /dev/fuse is missing: %v", err)
	}
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(src, ".git"), 0o755))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &lockedBuffer{}
	rc := make(chan int, 1)
	go func() {
		rc <- run(ctx, []string{"serve", "--state", filepath.Join(dir, "st"), "--hide", ".git", src, mnt},
			stdio{in: strings.NewReader(""), out: pw, err: stderr})
		_ = pw.Close()
	}()

	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, "stderr: %s", stderr.String())
	sock := filepath.Join(dir, "st", "run", "control.sock")
	require.Equal(t, fmt.Sprintf("ready mount=%s socket=%s\n", mnt, sock), line)
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	// The socket answers and the mount works.
	cl, err := control.Dial(sock)
	require.NoError(t, err)
	defer cl.Close()
	st, err := cl.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, mnt, st.Mount)
	got, err := os.ReadFile(filepath.Join(mnt, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(got))
	_, err = os.Stat(filepath.Join(mnt, ".git"))
	assert.ErrorIs(t, err, os.ErrNotExist, "--hide applies")

	// An agent write over the socket shows on the mount at once.
	_, err = cl.Write(ctx, control.WriteParams{Path: "b.txt", Content: "from the agent\n"})
	require.NoError(t, err)
	got, err = os.ReadFile(filepath.Join(mnt, "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "from the agent\n", string(got))

	cancel()
	select {
	case code := <-rc:
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not stop; stderr: %s", stderr.String())
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), " "+mnt+" ", "unmounted on shutdown")
	_, err = os.Stat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is removed")
}

// TestServe_HelpSaysWhenAllowOtherIsNeeded pins what serve --help tells about
// other users (issue 20, item 3): when --allow-other is needed, that
// default_permissions is always on, and that POSIX ACLs are not supported.
func TestServe_HelpSaysWhenAllowOtherIsNeeded(t *testing.T) {
	var help bytes.Buffer
	_, err := parseServeArgs([]string{"--help"}, &help, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
	text := strings.Join(strings.Fields(help.String()), " ")
	for _, want := range []string{
		"default_permissions is always on",
		"pass --allow-other when several users share it, or when root runs tools that switch to another uid",
		"a mode of 0000 stays 0000",
		"POSIX ACLs are not supported",
	} {
		assert.Contains(t, text, want)
	}
}

func TestServeConfig_AllowUIDNeedsARootDaemon(t *testing.T) {
	err := checkAllowUIDs(1000, []uint32{65534})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--allow-uid needs a daemon running as root")
	assert.Contains(t, err.Error(), "uid 1000")
	assert.NoError(t, checkAllowUIDs(0, []uint32{65534}), "a root daemon may allow another uid")
	assert.NoError(t, checkAllowUIDs(1000, nil), "without --allow-uid any daemon starts")
}

func TestServeConfig_SocketLimitFlags(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseServeArgs([]string{"--max-connections", "8", "--max-connections-per-uid", "3", "--max-pending-bytes", "1000000", "--max-request-bytes", "1000",
		"--request-timeout", "2s", "--idle-timeout", "1m", dir, dir}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 8, cfg.MaxConnections)
	assert.Equal(t, 3, cfg.MaxConnectionsPerUID)
	assert.Equal(t, int64(1000000), cfg.MaxPendingBytes)
	assert.Equal(t, 2*time.Second, cfg.RequestTimeout)
	assert.Equal(t, time.Minute, cfg.IdleTimeout)

	for _, bad := range [][]string{
		{"--max-connections", "0"},
		{"--max-connections", "8", "--max-connections-per-uid", "9"},
		{"--max-connections-per-uid", "-1"},
		{"--max-pending-bytes", "10", "--max-request-bytes", "20"},
		{"--request-timeout", "0s"},
		{"--idle-timeout", "-1s"},
	} {
		_, err := parseServeArgs(append(bad, dir, dir), io.Discard, io.Discard)
		assert.Error(t, err, "%v", bad)
	}
}

func TestServeConfig_DescriptorBudgetKeepsTheMountsShare(t *testing.T) {
	cfg := control.Config{MaxConnections: 100}
	need := uint64(cfg.Descriptors()) + mountDescriptors
	require.NoError(t, descriptorBudget(need, cfg))
	err := descriptorBudget(need-1, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--max-connections")
	assert.Contains(t, err.Error(), "kept for the mount")
	assert.Greater(t, cfg.Descriptors(), 100, "each connection costs a descriptor")
}

func TestServeConfig_TheWorkspaceWatcherIsOnByDefault(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "project"), filepath.Join(dir, "mnt")
	cfg, err := parseServeArgs([]string{src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.True(t, cfg.Watch, "out-of-band changes are watched unless turned off")
	cfg, err = parseServeArgs([]string{"--watch=false", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.Watch, "--watch=false turns it off")
}

func TestServeConfig_KernelCachesAreLongOnlyWithTheWatcher(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "project"), filepath.Join(dir, "mnt")
	cfg, err := parseServeArgs([]string{src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, fuse.WatchedTimeout, cfg.EntryTO)
	assert.Equal(t, fuse.WatchedTimeout, cfg.AttrTO)
	assert.Equal(t, fuse.WatchedTimeout, cfg.NegTO, "missing names are cached as long as names")
	assert.True(t, cfg.DirCache)

	cfg, err = parseServeArgs([]string{"--watch=false", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, fuse.DefaultEntryTimeout, cfg.EntryTO, "nothing drops an out-of-band change: short timeouts")
	assert.Equal(t, fuse.DefaultAttrTimeout, cfg.AttrTO)
	assert.Zero(t, cfg.NegTO, "no missing-name cache without the watcher")
	assert.False(t, cfg.DirCache, "no listing cache without the watcher")

	cfg, err = parseServeArgs([]string{"--entry-timeout", "2s", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, cfg.EntryTO, "an explicit timeout is kept")
	assert.Equal(t, 2*time.Second, cfg.NegTO, "missing names follow the entry timeout")
	assert.Equal(t, fuse.WatchedTimeout, cfg.AttrTO)

	_, err = parseServeArgs([]string{"--readdirplus", "sometimes", src, mnt}, io.Discard, io.Discard)
	require.Error(t, err)
}

func TestServeConfig_DirectoryDescriptorsFitUnderTheLimit(t *testing.T) {
	cfg := control.Config{MaxConnections: 100}
	need := uint64(cfg.Descriptors()) + mountDescriptors
	got, err := dirDescriptors(need+5000, cfg, 4096, false)
	require.NoError(t, err)
	assert.Equal(t, 4096, got, "room for the default")
	got, err = dirDescriptors(need+100, cfg, 4096, false)
	require.NoError(t, err)
	assert.Equal(t, 100, got, "the default is lowered to what the limit leaves")
	got, err = dirDescriptors(need, cfg, 4096, false)
	require.NoError(t, err)
	assert.Zero(t, got)
	_, err = dirDescriptors(need+100, cfg, 4096, true)
	require.Error(t, err, "an asked-for cap that does not fit")
	assert.Contains(t, err.Error(), "--dir-fds")
	got, err = dirDescriptors(need, cfg, 0, true)
	require.NoError(t, err)
	assert.Zero(t, got)
}

func TestServeConfig_DirectoryDescriptorsNeedTheWatcher(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "project"), filepath.Join(dir, "mnt")
	cfg, err := parseServeArgs([]string{src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, fuse.DefaultDirFDs, cfg.DirFDs)
	assert.False(t, cfg.DirFDsSet)
	cfg, err = parseServeArgs([]string{"--watch=false", "--dir-fds", "100", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, cfg.DirFDs, "nothing would report a directory moved out of band")
	cfg, err = parseServeArgs([]string{"--dir-fds", "100", src, mnt}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 100, cfg.DirFDs)
	assert.True(t, cfg.DirFDsSet)
	_, err = parseServeArgs([]string{"--dir-fds", "-1", src, mnt}, io.Discard, io.Discard)
	assert.Error(t, err)
}

// TestServeConfig_OwnDirsOutsideWorkspaceAndMount is item 4 of issue 28:
// the state directory, the socket and the run directory inside the
// workspace or the mount (through a symlink too, and the default state
// directory of a workspace that is the home directory) are refused at
// start, naming the overlap and the flag to pass.
func TestServeConfig_OwnDirsOutsideWorkspaceAndMount(t *testing.T) {
	dir, err := os.MkdirTemp("", "own") // short: the default socket path must fit
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ws, mnt := filepath.Join(dir, "home"), filepath.Join(dir, "mnt")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(ws, "sub"), filepath.Join(dir, "alias")))
	t.Setenv("DSH_RUN_DIR", filepath.Join(dir, "run"))
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", ws)
	cases := []struct {
		name, state, socket, runDir string
		want                        []string
	}{
		{name: "state in the workspace", state: filepath.Join(ws, ".dshstate"),
			want: []string{"state directory " + filepath.Join(ws, ".dshstate") + " is inside the workspace " + ws, "pass --state"}},
		{name: "state through a symlink", state: filepath.Join(dir, "alias", "st"),
			want: []string{"inside the workspace", filepath.Join(ws, "sub", "st")}},
		{name: "state in the mount", state: filepath.Join(mnt, "st"), want: []string{"inside the mount"}},
		{name: "default state in a home workspace", want: []string{"state directory " + filepath.Join(ws, ".local", "state", "dshmount"), "inside the workspace", "--state DIR outside it", "XDG_STATE_HOME"}},
		{name: "socket in the mount", state: filepath.Join(dir, "st"), socket: filepath.Join(mnt, "s.sock"), want: []string{"socket " + filepath.Join(mnt, "s.sock") + " is inside the mount", "pass --socket"}},
		{name: "run directory in the workspace", state: filepath.Join(dir, "st"), runDir: filepath.Join(ws, "run"), want: []string{"run directory", "inside the workspace", "DSH_RUN_DIR"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.runDir != "" {
				t.Setenv("DSH_RUN_DIR", c.runDir)
			}
			cfg := serveConfig{Source: ws, Mountpoint: mnt, StateDir: c.state, Socket: c.socket}
			_, err := cfg.resolve(slog.New(slog.DiscardHandler))
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			_, serr := os.Stat(filepath.Join(ws, ".dshstate"))
			assert.True(t, os.IsNotExist(serr), "nothing was created in the workspace")
		})
	}
	ok := serveConfig{Source: ws, Mountpoint: mnt, StateDir: filepath.Join(dir, "st")}
	_, err = ok.resolve(slog.New(slog.DiscardHandler))
	require.NoError(t, err, "a state directory beside the workspace is fine")
}

func TestServeFlags_RefuseABadStoreBeforeTheDaemonStarts(t *testing.T) {
	_, err := parseServeArgs([]string{"--store", "etcd://nohost/x", "src", "mnt"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "not HOST:PORT", "serve refuses a bad --store before it starts")
}
