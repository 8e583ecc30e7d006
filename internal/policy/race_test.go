package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// TestEngine_ConcurrentSessionsOneWinnerPerVersion races 64 sessions, each
// reading then editing one file through the Engine over provider/local, with
// the store as the digest cache. Every version that was read and
// edited has exactly one winning edit; every loser gets FS_STALE_VERSION.
func TestEngine_ConcurrentSessionsOneWinnerPerVersion(t *testing.T) {
	const sessions, rounds = 64, 10
	ctx := context.Background()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "counter.txt"), []byte("start\n"), 0o644))
	store := openStore(t, t.TempDir(), quietOptions())
	fs, err := local.New(root, local.Options{Digests: store})
	require.NoError(t, err)
	e := NewEngine(store, fs)
	target := fs.TargetForRel("counter.txt")

	var (
		mu      sync.Mutex
		winners = make(map[provider.Version]int)
		losers  int
		wg      sync.WaitGroup
	)
	for w := 0; w < sessions; w++ {
		a := openSession(t, store)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				text, info, err := e.Read(ctx, a, target)
				if !assert.NoError(t, err) {
					return
				}
				_, err = e.Edit(ctx, a, target, provider.EditRequest{
					OldString: text, NewString: fmt.Sprintf("%s by %d round %d\n", a.Session, w, r),
				}, Guard{})
				mu.Lock()
				if err == nil {
					winners[info.Version]++
				} else {
					losers++
					assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "loser error: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	require.NotEmpty(t, winners)
	for v, n := range winners {
		assert.Equal(t, 1, n, "version %s had %d winning edits", v, n)
	}
	assert.Equal(t, sessions*rounds, len(winners)+losers)
	entries, err := store.Audit(AuditQuery{Path: "counter.txt", Kind: AuditChanges, Limit: sessions * rounds})
	require.NoError(t, err)
	assert.Len(t, entries, len(winners), "one audit entry per winning edit")
}

// emptyStatFS is the local backend whose Stat reports the version of an
// empty file whatever the file holds: what a stat taken just before another
// writer filled the file reports.
type emptyStatFS struct{ *local.FS }

func (f emptyStatFS) Stat(ctx context.Context, t provider.Target) (*provider.Info, error) {
	info, err := f.FS.Stat(ctx, t)
	if info != nil {
		info.Version, info.Size = version.OfBytes(nil), 0
	}
	return info, err
}

// TestRead_ObservesTheBytesItReturned: versions name bytes and can recur
// (a file emptied, written, emptied again), so a read must observe the
// version of the text it returns, not of a stat taken before. With the
// stat's (empty) version, an edit of the returned text passed the guard
// once the file was empty again, and failed with FS_EDIT_NOT_FOUND instead
// of FS_STALE_VERSION.
func TestRead_ObservesTheBytesItReturned(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := filepath.Join(root, "f.txt")
	require.NoError(t, os.WriteFile(p, []byte("written\n"), 0o644))
	store := openStore(t, t.TempDir(), quietOptions())
	lfs, err := local.New(root, local.Options{Digests: store})
	require.NoError(t, err)
	e := NewEngine(store, emptyStatFS{lfs})
	a := openSession(t, store)
	target := lfs.TargetForRel("f.txt")

	text, info, err := e.Read(ctx, a, target)
	require.NoError(t, err)
	require.Equal(t, "written\n", text)
	assert.Equal(t, version.OfBytes([]byte(text)), info.Version, "the version names the bytes returned")
	obs, ok := store.Observation(a.Session, target.Key)
	require.True(t, ok)
	assert.Equal(t, Present(info.Version), obs)

	// The file is emptied: the session never saw those bytes, so an edit
	// of what it did see is stale, not "not found".
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	_, err = e.Edit(ctx, a, target, provider.EditRequest{OldString: "written", NewString: "x"}, Guard{})
	require.Error(t, err)
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "%v", err)
}
