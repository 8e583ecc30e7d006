package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestEdit_TwoClientsRaceExactlyOneWins(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "shared.txt", "round 0\n")
	a, b := env.client(t), env.client(t)
	ctx := context.Background()
	for round := range 20 {
		old := fmt.Sprintf("round %d", round)
		// Both read the same version.
		_, err := a.Read(ctx, ReadParams{Path: "shared.txt"})
		require.NoError(t, err)
		_, err = b.Read(ctx, ReadParams{Path: "shared.txt"})
		require.NoError(t, err)

		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Edit(ctx, EditParams{Path: "shared.txt", OldString: old, NewString: fmt.Sprintf("round %d", round+1)})
			}()
		}
		wg.Wait()
		wins, stale := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, provider.ErrStaleVersion):
				stale++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		require.Equal(t, 1, wins, "round %d: exactly one edit wins", round)
		require.Equal(t, 1, stale, "round %d: the other is stale", round)
		got, _ := env.content(t, "shared.txt")
		assert.Equal(t, fmt.Sprintf("round %d\n", round+1), got)
	}
}
