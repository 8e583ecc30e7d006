package journal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/provider/version"
)

var errStopped = errors.New("stopped by the test")

// workspace is a temporary workspace with five files.
func workspace(t *testing.T) (*local.FS, string) {
	t.Helper()
	root := t.TempDir()
	for i := range 5 {
		require.NoError(t, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d", i)), []byte(fmt.Sprintf("old %d\n", i)), 0o644))
	}
	fs, err := local.New(root, local.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	return fs, root
}

// changeSet rewrites f0..f3, deletes f4 and creates d/new.
func changeSet() ChangeSet {
	cs := ChangeSet{Label: "the test change"}
	for i := range 4 {
		cs.Changes = append(cs.Changes, Change{Path: fmt.Sprintf("f%d", i),
			Base: version.OfBytes([]byte(fmt.Sprintf("old %d\n", i))), Data: []byte(fmt.Sprintf("new %d\n", i))})
	}
	cs.Changes = append(cs.Changes,
		Change{Path: "f4", Base: version.OfBytes([]byte("old 4\n")), Delete: true},
		Change{Path: "d/new", Base: BaseAbsent, Data: []byte("created\n")})
	return cs
}

// snapshot reads the workspace's files ("" for a missing one).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{"f0", "f1", "f2", "f3", "f4", "d/new"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err == nil {
			out[p] = string(b)
		}
	}
	_, err := os.Stat(filepath.Join(root, StagingDir))
	require.True(t, os.IsNotExist(err), "the staging directory is gone")
	return out
}

// TestApply_StoppedAtAnyStepRecoversAllOrNothing stops a commit at every
// step (as a kill -9 would leave the disk), opens the journal again and
// recovers: the workspace is entirely before or entirely after, and a
// commit stopped before its applying mark is undone.
func TestApply_StoppedAtAnyStepRecoversAllOrNothing(t *testing.T) {
	before := map[string]string{"f0": "old 0\n", "f1": "old 1\n", "f2": "old 2\n", "f3": "old 3\n", "f4": "old 4\n"}
	after := map[string]string{"f0": "new 0\n", "f1": "new 1\n", "f2": "new 2\n", "f3": "new 3\n", "d/new": "created\n"}
	// Hook steps: 0 the intent, 1-6 staged, 7 the applying mark, 8-14
	// one mkdir and six applied, 15 the applied mark, 16 after, 17 the
	// journal gone.
	const steps = 18
	for at := range steps {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			fs, root := workspace(t)
			dir := t.TempDir()
			jr, err := Open(fs, Options{Dir: dir, Logger: slog.New(slog.DiscardHandler),
				StepHook: func(n int) error {
					if n == at {
						return errStopped
					}
					return nil
				}})
			require.NoError(t, err)
			require.NoError(t, jr.Recover())
			_, err = jr.Apply(context.Background(), changeSet(), Hooks{})
			require.ErrorIs(t, err, errStopped)

			again, err := Open(fs, Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			require.NoError(t, again.Recover())
			got := snapshot(t, root)
			rec := again.TakeRecovered()
			switch {
			case at < 7: // before the applying mark was on disk
				require.Equal(t, before, got)
				require.Len(t, rec, 1, "recovery reports the commit it undid")
				require.False(t, rec[0].Forward)
			case at < 17:
				require.Equal(t, after, got)
				require.Len(t, rec, 1, "recovery reports the commit it finished")
				require.True(t, rec[0].Forward)
			default: // the journal was gone: nothing to settle
				require.Equal(t, after, got)
				require.Empty(t, rec)
			}
			names, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, names, "no journal is left")
		})
	}
}

// TestApply_ConflictChangesNothing pins the all-or-nothing refusal: one
// stale base refuses the whole set with a ConflictError naming it.
func TestApply_ConflictChangesNothing(t *testing.T) {
	fs, root := workspace(t)
	jr, err := Open(fs, Options{Dir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "f2"), []byte("someone else\n"), 0o644))
	_, err = jr.Apply(context.Background(), changeSet(), Hooks{})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{"f2"}, ce.Paths)
	got := snapshot(t, root)
	require.Equal(t, "old 0\n", got["f0"])
	require.Equal(t, "someone else\n", got["f2"])
	require.NotContains(t, got, "d/new")
}

// TestApply_HooksReceiveEachCommitsOrigin pins that one Hooks value serves
// every commit: each function receives the Origin of the change set being
// applied, unchanged, and nothing else tells the hooks whose commit it is.
func TestApply_HooksReceiveEachCommitsOrigin(t *testing.T) {
	type origin struct{ who string }
	fs, root := workspace(t)
	jr, err := Open(fs, Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, jr.Recover())
	seen := map[string][]any{}
	hooks := Hooks{
		Allow:    func(o any, _ string) error { seen["allow"] = append(seen["allow"], o); return nil },
		Announce: func(_ context.Context, o any, _ []provider.Target) { seen["announce"] = append(seen["announce"], o) },
		Claim: func(_ context.Context, o any, _ []ClaimFile) (func([]AppliedFile), error) {
			seen["claim"] = append(seen["claim"], o)
			return func([]AppliedFile) { seen["release"] = append(seen["release"], o) }, nil
		},
		Applied: func(_ context.Context, o any, _ []AppliedFile) { seen["applied"] = append(seen["applied"], o) },
	}
	first := changeSet()
	first.Origin = origin{"first"}
	_, err = jr.Apply(context.Background(), first, hooks)
	require.NoError(t, err)
	second := ChangeSet{Label: "the second change", Origin: origin{"second"},
		Changes: []Change{{Path: "f0", Base: version.OfBytes([]byte("new 0\n")), Data: []byte("newer 0\n")}}}
	_, err = jr.Apply(context.Background(), second, hooks)
	require.NoError(t, err)
	require.Equal(t, "newer 0\n", snapshot(t, root)["f0"])

	allows := len(first.Changes) + len(second.Changes) // one per planned step
	for _, hook := range []string{"allow", "announce", "claim", "release", "applied"} {
		t.Run(hook, func(t *testing.T) {
			got := seen[hook]
			if hook == "allow" {
				require.Len(t, got, allows)
				require.Equal(t, origin{"second"}, got[len(got)-1])
				require.Equal(t, origin{"first"}, got[0])
				return
			}
			require.Equal(t, []any{origin{"first"}, origin{"second"}}, got)
		})
	}
}
