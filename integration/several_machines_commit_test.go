package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// updatePatch is an atomic patch turning "old" into new in each file.
func updatePatch(files []string, old, new string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for _, f := range files {
		fmt.Fprintf(&b, "*** Update File: %s\n@@\n-%s\n+%s\n", f, old, new)
	}
	b.WriteString("*** End Patch")
	return b.String()
}

// A 200-file atomic patch on a default etcd (128 operations per
// transaction) applies through daemon A; B then edits one of its files
// (the claims were released, every version recorded).
func TestSeveralMachines_AtomicPatch200Files(t *testing.T) {
	files := map[string]string{}
	var names []string
	for i := range 200 {
		n := fmt.Sprintf("d/f%03d.txt", i)
		files[n], names = "old\n", append(names, n)
	}
	a, b, _ := twoDaemons(t, files)
	ctx := context.Background()
	sess, err := a.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	for _, n := range names {
		_, err := a.Client.Read(ctx, control.ReadParams{Path: n, Session: sess})
		require.NoError(t, err)
	}
	began := time.Now()
	res, err := a.Client.Patch(ctx, control.PatchParams{Patch: updatePatch(names, "old", "new"), Session: sess, Atomic: true})
	require.NoError(t, err)
	t.Logf("a 200-file atomic patch on etcd took %s", time.Since(began))
	require.Len(t, res.Operations, 200)
	for _, n := range []string{names[0], names[199]} {
		got, err := os.ReadFile(filepath.Join(b.Mnt, n))
		require.NoError(t, err)
		assert.Equal(t, "new\n", string(got))
	}
	_, err = b.Client.Edit(ctx, control.EditParams{Path: names[199], OldString: "new", NewString: "newer", Session: sess})
	require.NoError(t, err, "the commit's claims are released")
}

// Two daemons race atomic patches over overlapping files (A: f1 f2 f3, B:
// f2 f3 f4), each session having read the old bytes: one wins, the other
// is refused FS_STALE_VERSION naming overlapping files, and nothing is half
// applied (the loser's own file keeps its old bytes).
func TestSeveralMachines_OverlappingAtomicPatchesOneWins(t *testing.T) {
	a, b, _ := twoDaemons(t, map[string]string{})
	ctx := context.Background()
	setA := []string{"f1.txt", "f2.txt", "f3.txt"}
	setB := []string{"f2.txt", "f3.txt", "f4.txt"}
	for round := range 6 {
		old := fmt.Sprint("r", round)
		for _, f := range []string{"f1.txt", "f2.txt", "f3.txt", "f4.txt"} {
			require.NoError(t, os.WriteFile(filepath.Join(a.Mnt, f), []byte(old+"\n"), 0o644))
		}
		sa, err := a.Client.OpenSession(ctx, "a")
		require.NoError(t, err)
		sb, err := b.Client.OpenSession(ctx, "b")
		require.NoError(t, err)
		for _, f := range setA {
			_, err := a.Client.Read(ctx, control.ReadParams{Path: f, Session: sa})
			require.NoError(t, err)
		}
		for _, f := range setB {
			_, err := b.Client.Read(ctx, control.ReadParams{Path: f, Session: sb})
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errA = a.Client.Patch(ctx, control.PatchParams{Patch: updatePatch(setA, old, "A"), Session: sa, Atomic: true})
		}()
		go func() {
			defer wg.Done()
			_, errB = b.Client.Patch(ctx, control.PatchParams{Patch: updatePatch(setB, old, "B"), Session: sb, Atomic: true})
		}()
		wg.Wait()
		require.True(t, (errA == nil) != (errB == nil), "round %d: exactly one wins: A %v, B %v", round, errA, errB)
		winner, loserErr, loserOnly, winSet := "A", errB, "f4.txt", setA
		if errA != nil {
			winner, loserErr, loserOnly, winSet = "B", errA, "f1.txt", setB
		}
		require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(loserErr), "round %d: %v", round, loserErr)
		var re *control.RPCError
		if errors.As(loserErr, &re) && len(re.Conflicts) > 0 {
			for _, c := range re.Conflicts {
				assert.Contains(t, []string{"f2.txt", "f3.txt"}, c, "round %d: the conflict names overlapping files", round)
			}
		} else {
			assert.Regexp(t, `f[23]\.txt`, loserErr.Error(), "round %d: the refusal names an overlapping file", round)
		}
		for _, f := range winSet {
			got, err := os.ReadFile(filepath.Join(b.Mnt, f))
			require.NoError(t, err)
			assert.Equal(t, winner+"\n", string(got), "round %d: the winner applied all of %s", round, f)
		}
		got, err := os.ReadFile(filepath.Join(a.Mnt, loserOnly))
		require.NoError(t, err)
		assert.Equal(t, old+"\n", string(got), "round %d: the loser applied nothing", round)
	}
}

// A process bound on A reads f.txt through mount A; an agent on B then
// edits it; the process's write through mount A is refused (the version it
// read is stale on every host), and the file keeps B's bytes.
func TestSeveralMachines_BoundProcessOnAStaleAfterAgentOnB(t *testing.T) {
	a, b, _ := twoDaemons(t, map[string]string{"f.txt": "one\n"})
	ctx := context.Background()
	dir := t.TempDir()
	script := fmt.Sprintf(`cd %q && cat f.txt >/dev/null && echo > %q/read &&
while [ ! -e %q/go ]; do sleep 0.05; done
printf 'bound\n' > f.txt`, a.Mnt, dir, dir)
	type outcome struct {
		stderr string
		code   int
	}
	done := make(chan outcome, 1)
	go func() {
		_, stderr, code := boundShell(t, a, script)
		done <- outcome{stderr, code}
	}()
	waitForFile(t, filepath.Join(dir, "read"))
	sess, err := b.Client.OpenSession(ctx, "agent on B")
	require.NoError(t, err)
	_, err = b.Client.Read(ctx, control.ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)
	_, err = b.Client.Edit(ctx, control.EditParams{Path: "f.txt", OldString: "one", NewString: "agent", Session: sess})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go"), nil, 0o644))
	out := <-done
	assert.NotEqual(t, 0, out.code, "the bound write is refused")
	assert.Regexp(t, `(?i)stale|permission`, out.stderr)
	got, err := os.ReadFile(filepath.Join(b.Mnt, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "agent\n", string(got))
}
