package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// BenchmarkGuardedEdit is the price of the store per guarded edit: one
// session edits one file back and forth through the Engine over
// provider/local (no fsync), its store on Badger or on an embedded etcd on
// loopback (one member, fsync on). p50_ms and p99_ms are per edit.
func BenchmarkGuardedEdit(b *testing.B) {
	engines := map[string]func(b *testing.B, root string) *Store{
		"badger": func(b *testing.B, root string) *Store {
			return openStore(b, b.TempDir(), quietOptions().WithWorkspaceRoot(root))
		},
		"etcd": func(b *testing.B, root string) *Store {
			return openShared(b, startEtcd(b), quietOptions().WithWorkspaceRoot(root))
		},
	}
	for _, name := range []string{"badger", "etcd"} {
		b.Run(name, func(b *testing.B) {
			root := b.TempDir()
			require.NoError(b, os.WriteFile(filepath.Join(root, "edit.txt"), []byte("const word = \"alpha\"\n"), 0o644))
			s := engines[name](b, root)
			fs, err := local.New(root, local.Options{Digests: s, Durability: local.DurabilityNone})
			require.NoError(b, err)
			b.Cleanup(func() { _ = fs.Close() })
			e := NewEngine(s, fs)
			a := openSession(b, s)
			t := fs.TargetForRel("edit.txt")
			ctx := context.Background()
			_, _, err = e.Read(ctx, a, t)
			require.NoError(b, err)
			pairs := [2][2]string{{"alpha", "omega"}, {"omega", "alpha"}}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				_, err := e.Edit(ctx, a, t, provider.EditRequest{OldString: pairs[i%2][0], NewString: pairs[i%2][1]}, Guard{})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		})
	}
}

// BenchmarkCommit200 is the store's price of a 200-file commit (atomic
// patch, branch commit) without the file writes: the claim (journal record,
// chunked claims; nothing on Badger), one recorded change per file, the
// release. claim_ms is the claim alone.
func BenchmarkCommit200(b *testing.B) {
	for _, name := range []string{"badger", "etcd"} {
		b.Run(name, func(b *testing.B) {
			var s *Store
			if name == "badger" {
				s = openStore(b, b.TempDir(), quietOptions().WithWorkspaceRoot("/ws"))
			} else {
				s = openShared(b, startEtcd(b), quietOptions().WithWorkspaceRoot("/ws"))
			}
			e := newEngine(s, nil)
			a := openSession(b, s)
			files := commitFiles(0, 200)
			ctx := context.Background()
			var claimed time.Duration
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				c, err := e.ClaimCommit(ctx, "bench", files)
				if err != nil {
					b.Fatal(err)
				}
				claimed += time.Since(t0)
				after := map[provider.Key]provider.Version{}
				for _, f := range files {
					v := provider.Version(fmt.Sprint("v", i))
					after[f.Target.Key] = v
					if err := e.RecordApplied(ctx, AppliedChange{Actor: a, Op: OpWrite, Target: f.Target, After: v, Detail: "bench"}); err != nil {
						b.Fatal(err)
					}
				}
				c.Release(after)
				if err := s.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(claimed.Microseconds())/1000/float64(b.N), "claim_ms")
		})
	}
}
