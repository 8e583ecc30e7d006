package registry

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDir_Precedence(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	assert.Equal(t, "/x", Dir(env(map[string]string{EnvRunDir: "/x", "XDG_RUNTIME_DIR": "/run/user/1"}), 1))
	assert.Equal(t, "/run/user/1/dshmount", Dir(env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}), 1))
	assert.Equal(t, "/run/dshmount", Dir(env(nil), 0))
	assert.Equal(t, "/tmp/dshmount-1000", Dir(env(nil), 1000))
}

func TestRegister_FindTheInnermostLiveDaemon(t *testing.T) {
	dir := t.TempDir()
	sock := func(name string) string {
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, nil, 0o600))
		return p
	}
	me := uint32(os.Getuid())
	outer := Entry{PID: os.Getpid(), Mount: "/mnt/ws", Source: "/src/ws", Socket: listen(t, "ws.sock"), UID: me}
	inner := Entry{PID: os.Getpid(), Mount: "/mnt/ws/sub", Source: "/src/sub", Socket: listen(t, "sub.sock"), UID: me}
	dead := Entry{PID: 1 << 30, Mount: "/mnt/dead", Source: "/src/dead", Socket: sock("dead.sock")}
	gone := Entry{PID: os.Getpid(), Mount: "/mnt/gone", Source: "/src/gone", Socket: "/nonexistent/gone.sock"}
	var removes []func() error
	for _, e := range []Entry{outer, inner, dead, gone} {
		rm, err := Register(dir, e)
		require.NoError(t, err)
		removes = append(removes, rm)
	}

	p, ok, err := Find(dir, "/mnt/ws/src/pkg")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Place{Entry: outer, Rel: "src/pkg"}, p)

	p, ok, err = Find(dir, "/src/ws")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Place{Entry: outer, Rel: ""}, p, "the workspace directory counts as well")

	p, ok, err = Find(dir, "/mnt/ws/sub/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, inner.Socket, p.Socket, "the innermost mount wins")
	assert.Equal(t, "a", p.Rel)

	_, ok, err = Find(dir, "/mnt/dead/x")
	require.NoError(t, err)
	assert.False(t, ok, "an entry whose daemon is gone is ignored")
	_, ok, err = Find(dir, "/mnt/gone/x")
	require.NoError(t, err)
	assert.False(t, ok, "an entry whose socket is gone is ignored (a reused pid)")
	_, ok, err = Find(dir, "/mnt/wsx")
	require.NoError(t, err)
	assert.False(t, ok, "a sibling with a common prefix is not inside")

	require.NoError(t, removes[0]())
	_, ok, err = Find(dir, "/mnt/ws/src")
	require.NoError(t, err)
	assert.False(t, ok, "a removed entry is gone")
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	assert.Len(t, names, 3)
}

// listen serves a Unix socket named name in a temporary directory for the
// test's duration; it returns its path.
func listen(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	ln, err := net.Listen("unix", p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	return p
}

// TestTrust_PlantedDirectoryEntryAndSocketAreRefused is item 5 of issue
// 28 at the package level: a run directory of another uid or writable by
// others is refused with the reason, an entry file of another uid is not
// listed, and a socket served by another process than the entry's pid is
// not found.
func TestTrust_PlantedDirectoryEntryAndSocketAreRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting files of another uid needs root")
	}
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	require.NoError(t, os.Mkdir(foreign, 0o755))
	require.NoError(t, os.Chown(foreign, 65534, 65534))
	err := CheckDir(foreign, 1000)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "belongs to uid 65534, not to you (uid 1000) or root")
	assert.NoError(t, CheckDir(foreign, 65534), "the owner trusts its own directory")
	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o777))
	require.NoError(t, os.Chmod(open, 0o1777))
	err = CheckDir(open, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "writable by others")
	require.NoError(t, os.Symlink(base, filepath.Join(base, "link")))
	assert.ErrorContains(t, CheckDir(filepath.Join(base, "link"), 0), "not a directory")
	assert.NoError(t, CheckDir(filepath.Join(base, "missing"), 0))
	_, err = Register(foreign, Entry{PID: os.Getpid(), Socket: "/x", Source: "/s"})
	assert.ErrorContains(t, err, "belongs to uid 65534", "a daemon does not register in another uid's directory")

	// An entry another uid wrote is not listed.
	dir := filepath.Join(base, "run")
	sock := listen(t, "d.sock")
	_, err = Register(dir, Entry{PID: os.Getpid(), Mount: "/mnt/a", Source: "/src/a", Socket: sock})
	require.NoError(t, err)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "root's run directory is readable by the uids it serves")
	planted := filepath.Join(dir, "planted.json")
	require.NoError(t, os.WriteFile(planted, []byte(`{"pid":1,"mount":"/mnt/b","source":"/src/b","socket":"`+sock+`"}`), 0o644))
	require.NoError(t, os.Chown(planted, 65534, 65534))
	es, err := List(dir)
	require.NoError(t, err)
	require.Len(t, es, 1, "the planted entry is not listed")
	assert.Equal(t, "/mnt/a", es[0].Mount)
	assert.Equal(t, uint32(0), es[0].UID)

	// An entry naming a socket another process serves is not found.
	other := exec.Command("sleep", "60")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	_, err = Register(dir, Entry{PID: other.Process.Pid, Mount: "/mnt/c", Source: "/src/c", Socket: sock})
	require.NoError(t, err)
	_, ok, err := Find(dir, "/mnt/c/x")
	assert.False(t, ok, "a socket served by pid %d is not daemon %d's", os.Getpid(), other.Process.Pid)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not by the daemon the entry names")
	p, ok, err := Find(dir, "/mnt/a/x")
	require.NoError(t, err)
	assert.True(t, ok, "the genuine entry is found: %v", p)
}

func TestRegister_FallbackDirectoryIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dshmount-x")
	_, err := Register(dir, Entry{PID: os.Getpid(), Socket: "/x", Source: "/s"})
	require.NoError(t, err)
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	want := os.FileMode(0o700)
	if os.Getuid() == 0 {
		want = 0o755
	}
	assert.Equal(t, want, fi.Mode().Perm())
	require.NoError(t, os.Chmod(dir, 0o777))
	_, err = Register(dir, Entry{PID: os.Getpid(), Socket: "/y", Source: "/s"})
	require.Error(t, err, "a run directory others may write is refused")
	assert.True(t, strings.Contains(err.Error(), "writable by others"), err.Error())
}
