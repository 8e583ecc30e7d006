package registry

import (
	"os"
	"path/filepath"
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
	outer := Entry{PID: os.Getpid(), Mount: "/mnt/ws", Source: "/src/ws", Socket: sock("ws.sock")}
	inner := Entry{PID: os.Getpid(), Mount: "/mnt/ws/sub", Source: "/src/sub", Socket: sock("sub.sock")}
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
