package branch

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// env is a workspace, its backend and a state directory.
type env struct {
	t     testing.TB
	ws    string
	state string
	lower *local.FS
	m     *Manager
	opts  Options
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, ws: t.TempDir(), state: t.TempDir(), opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	lfs, err := newLower(e.ws)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lfs.Close() })
	e.lower = lfs
	e.open()
	t.Cleanup(func() { _ = e.m.Close() })
	return e
}

// open (re)opens the manager, as a daemon start does.
func (e *env) open() {
	e.t.Helper()
	if e.opts.Upper == nil {
		e.opts.Upper = openUpper
	}
	m, err := Open(e.state, e.lower, e.opts)
	require.NoError(e.t, err)
	e.m = m
}

// restart closes and reopens the manager.
func (e *env) restart() {
	e.t.Helper()
	require.NoError(e.t, e.m.Close())
	e.open()
}

// put writes a workspace file directly (out of band).
func (e *env) put(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, rel)
	require.NoError(e.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(e.t, os.WriteFile(p, []byte(content), 0o644))
}

// get reads a workspace file ("<absent>" when missing).
func (e *env) get(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.ws, rel))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	require.NoError(e.t, err)
	return string(b)
}

// bt resolves rel in branch b.
func bt(t testing.TB, b *Branch, rel string) provider.Target {
	t.Helper()
	tg, err := b.Resolve(context.Background(), rel, provider.ResolveOptions{})
	require.NoError(t, err)
	return tg
}

// bread reads rel in branch b ("<absent>" when missing).
func bread(t testing.TB, b *Branch, rel string) string {
	t.Helper()
	s, err := b.ReadText(context.Background(), bt(t, b, rel))
	if provider.CodeOf(err) == provider.CodeNotFound {
		return "<absent>"
	}
	require.NoError(t, err)
	return s
}

// bwrite writes rel in branch b unconditionally.
func bwrite(t testing.TB, b *Branch, rel, content string) {
	t.Helper()
	_, err := b.WriteText(context.Background(), bt(t, b, rel), content, nil)
	require.NoError(t, err)
}

// bdelete deletes rel in branch b unconditionally.
func bdelete(t testing.TB, b *Branch, rel string) {
	t.Helper()
	_, err := b.DeleteFile(context.Background(), bt(t, b, rel), nil)
	require.NoError(t, err)
}

// snapshot returns every workspace file's content, hidden staging left out.
func (e *env) snapshot() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	require.NoError(e.t, filepath.Walk(e.ws, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.ws, p)
		if rel == StagingDir && info.IsDir() {
			return filepath.SkipDir
		}
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		}
		if info.IsDir() {
			if rel != "." {
				out[rel+"/"] = "<dir>"
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = string(b)
		return nil
	}))
	return out
}

// openUpper opens a branch's upper directory as cmd/dshmount serve does.
func openUpper(dir string) (Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}

// newLower opens the workspace backend.
func newLower(ws string) (*local.FS, error) { return local.New(ws, local.Options{}) }

// errStopped is a commit stopped by a test hook, the disk left as a kill
// would leave it.
var errStopped = errors.New("commit stopped by a test hook")
