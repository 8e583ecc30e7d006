package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

var (
	_ recorder = localRecorder{}
	_ recorder = sharedRecorder{}
)

// TestRecorder_ChosenOnceFromTheEnginesCapability pins the one owner of the
// local-or-shared choice: Open reads the engine's Shared once and picks the
// recorder every local-or-shared behaviour goes through.
func TestRecorder_ChosenOnceFromTheEnginesCapability(t *testing.T) {
	srv := startEtcd(t)
	tests := []struct {
		name string
		open func(t *testing.T) *Store
		want recorder
	}{
		{"badger: local", func(t *testing.T) *Store { return openStore(t, t.TempDir(), quietOptions()) }, localRecorder{}},
		{"etcd: shared", func(t *testing.T) *Store { return openShared(t, srv, quietOptions()) }, sharedRecorder{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.IsType(t, tc.want, tc.open(t).rec)
		})
	}
}

// TestRecorder_LocalStoreClaimsNothing pins that a local store claims no
// file for any kind of change: the provider's per-target locks already
// serialize the only daemon's changes.
func TestRecorder_LocalStoreClaimsNothing(t *testing.T) {
	ctx := context.Background()
	tg := provider.Target{Key: "/ws/f", DisplayPath: "f"}
	tests := []struct {
		name  string
		claim func(e *Engine) (*Claim, error)
	}{
		{"socket mutation", func(e *Engine) (*Claim, error) { return e.store.Claim(ctx, "edit", "f", tg.Key) }},
		{"multi-file commit", func(e *Engine) (*Claim, error) {
			return e.ClaimCommit(ctx, "commit", []CommitFile{{Target: tg, Base: "v1"}})
		}},
		{"bound change through the mount", func(e *Engine) (*Claim, error) {
			err := e.claimMount(OpWrite, tg)
			return e.mclaims.take(tg.Key), err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine(t)
			c, err := tc.claim(e)
			require.NoError(t, err)
			assert.Nil(t, c)
		})
	}
}
