package branch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// benchEnv is an env for benchmarks over an existing workspace.
func benchEnv(b *testing.B, ws string) *env {
	b.Helper()
	lfs, err := local.New(ws, local.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = lfs.Close() })
	e := &env{t: b, ws: ws, state: b.TempDir(), lower: lfs, opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	e.open()
	b.Cleanup(func() { _ = e.m.Close() })
	return e
}

// BenchmarkCreate_100kFileWorkspace: creating a branch does not depend on
// the workspace's size.
func BenchmarkCreate_100kFileWorkspace(b *testing.B) {
	ws := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(ws, fmt.Sprintf("d%03d", d))
		require.NoError(b, os.Mkdir(dir, 0o755))
		for f := range 1000 {
			require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d.txt", f)), []byte("x\n"), 0o644))
		}
	}
	e := benchEnv(b, ws)
	i := 0
	for b.Loop() {
		_, err := e.m.Create(fmt.Sprintf("b%d", i))
		require.NoError(b, err)
		i++
	}
}

// BenchmarkCopyUp_1MiB: the first change of a 1 MiB file in a branch
// (copy-up of the workspace bytes and their version, then the edit).
func BenchmarkCopyUp_1MiB(b *testing.B) {
	ws := b.TempDir()
	line := strings.Repeat("y", 1023) + "\n"
	require.NoError(b, os.WriteFile(filepath.Join(ws, "big.txt"), []byte("FIRST\n"+strings.Repeat(line, 1023)), 0o644))
	e := benchEnv(b, ws)
	ctx := context.Background()
	b.SetBytes(1 << 20)
	i := 0
	for b.Loop() {
		b.StopTimer()
		br, err := e.m.Create(fmt.Sprintf("c%d", i))
		require.NoError(b, err)
		i++
		t := bt(b, br, "big.txt")
		b.StartTimer()
		_, err = br.EditText(ctx, t, provider.EditRequest{OldString: "FIRST", NewString: "first"}, nil)
		require.NoError(b, err)
	}
}

// BenchmarkCopyUpOnly_1MiB: the copy-up alone (read, hash, write the upper
// file, no fsync: the branch's files are safe from a kill, not a power cut).
func BenchmarkCopyUpOnly_1MiB(b *testing.B) {
	ws := b.TempDir()
	require.NoError(b, os.WriteFile(filepath.Join(ws, "big.bin"), make([]byte, 1<<20), 0o644))
	e := benchEnv(b, ws)
	br, err := e.m.Create("c")
	require.NoError(b, err)
	ctx := context.Background()
	b.SetBytes(1 << 20)
	for b.Loop() {
		br.mu.Lock()
		_, undo, err := br.copyUp(ctx, "write", "big.bin")
		undo()
		br.mu.Unlock()
		require.NoError(b, err)
	}
}

// BenchmarkCommit_200Files: a journaled commit of 200 changed files with
// fsync (syncfs of the staging and of the workspace, fsynced journal).
func BenchmarkCommit_200Files(b *testing.B) {
	ws := b.TempDir()
	for i := range 200 {
		require.NoError(b, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%03d.txt", i)), []byte("old\n"), 0o644))
	}
	e := benchEnv(b, ws)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		b.StopTimer()
		name := fmt.Sprintf("c%d", i)
		br, err := e.m.Create(name)
		require.NoError(b, err)
		for f := range 200 {
			_, err := br.WriteText(ctx, bt(b, br, fmt.Sprintf("f%03d.txt", f)), fmt.Sprintf("round %d\n", i), nil)
			require.NoError(b, err)
		}
		i++
		b.StartTimer()
		files, err := e.m.Commit(ctx, name, false, nil, Hooks{})
		require.NoError(b, err)
		require.Len(b, files, 200)
	}
}

// BenchmarkRebase_200Files20Merges: a rebase of a branch that changed 200
// files of 40 lines (its change on line 5), 20 of which the workspace
// changed since (on line 30): 20 three-way merges, 180 files untouched.
func BenchmarkRebase_200Files20Merges(b *testing.B) {
	ws := b.TempDir()
	var base strings.Builder
	for l := range 40 {
		fmt.Fprintf(&base, "line %02d of a file the branch and the workspace both change\n", l)
	}
	e := benchEnv(b, ws)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		b.StopTimer()
		for f := range 200 {
			require.NoError(b, os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%03d.txt", f)), []byte(base.String()), 0o644))
		}
		name := fmt.Sprintf("r%d", i)
		br, err := e.m.Create(name)
		require.NoError(b, err)
		for f := range 200 {
			t := bt(b, br, fmt.Sprintf("f%03d.txt", f))
			cur, err := br.ReadText(ctx, t)
			require.NoError(b, err)
			_, err = br.WriteText(ctx, t, strings.Replace(cur, "line 05 ", fmt.Sprintf("branch %d ", i), 1), nil)
			require.NoError(b, err)
		}
		for f := range 20 {
			p := filepath.Join(ws, fmt.Sprintf("f%03d.txt", f*10))
			cur, err := os.ReadFile(p)
			require.NoError(b, err)
			require.NoError(b, os.WriteFile(p, []byte(strings.Replace(string(cur), "line 30 ", fmt.Sprintf("workspace %d ", i), 1)), 0o644))
		}
		i++
		b.StartTimer()
		res, err := e.m.Rebase(ctx, name, false)
		require.NoError(b, err)
		require.Len(b, res.Merged, 20)
		b.StopTimer()
		require.NoError(b, e.m.Discard(name))
		b.StartTimer()
	}
}
