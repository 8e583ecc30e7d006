package policy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// newClockedEngine is newTestEngine on a clock the test moves by hand.
func newClockedEngine(t testing.TB, opts Options) (*Engine, *fakeFS, *manualClock) {
	t.Helper()
	clock := &manualClock{now: time.Unix(1700000000, 0)}
	s := openStore(t, t.TempDir(), opts.WithNow(clock.Now))
	fs := newFakeFS()
	return NewEngine(s, fs), fs, clock
}

func refusals(t *testing.T, s *Store) []AuditEntry {
	t.Helper()
	entries, err := s.Audit(AuditQuery{Kind: AuditRefusals, Limit: 1000})
	require.NoError(t, err)
	return entries
}

func TestRefusal_GuardedMutationsAreAuditedWithCodeAndReason(t *testing.T) {
	hunks := []patch.Hunk{{OldLines: []string{"x"}, NewLines: []string{"y"}}}
	tests := []struct {
		name     string
		setup    func(e *Engine, ffs *fakeFS, a Actor, f, g provider.Target) // f exists, unseen by default
		run      func(ctx context.Context, e *Engine, a Actor, f, g provider.Target) error
		op       MutationOp
		wantCode provider.Code
		wantTo   string
	}{
		{name: "write over an unseen file", op: OpWrite, wantCode: provider.CodeNotObserved,
			run: func(ctx context.Context, e *Engine, a Actor, f, _ provider.Target) error {
				_, err := e.Write(ctx, a, f, "evil\n", Guard{})
				return err
			}},
		{name: "edit of an unseen file", op: OpEdit, wantCode: provider.CodeNotObserved,
			run: func(ctx context.Context, e *Engine, a Actor, f, _ provider.Target) error {
				_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "x", NewString: "y"}, Guard{})
				return err
			}},
		{name: "edit of a file changed since read", op: OpEdit, wantCode: provider.CodeStaleVersion,
			setup: func(e *Engine, ffs *fakeFS, a Actor, f, _ provider.Target) {
				_, _, err := e.Read(context.Background(), a, f)
				require.NoError(t, err)
				ffs.put(f, "x changed\n")
			},
			run: func(ctx context.Context, e *Engine, a Actor, f, _ provider.Target) error {
				_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "x", NewString: "y"}, Guard{})
				return err
			}},
		{name: "patch with a stale explicit guard", op: OpPatch, wantCode: provider.CodeStaleVersion,
			run: func(ctx context.Context, e *Engine, a Actor, f, _ provider.Target) error {
				_, err := e.Patch(ctx, a, f, hunks, Guard{Version: &provider.VersionGuard{Version: "v-old"}})
				return err
			}},
		{name: "delete of a file seen absent", op: OpDelete, wantCode: provider.CodeNotFound,
			setup: func(e *Engine, _ *fakeFS, a Actor, _, g provider.Target) {
				_, _, err := e.Read(context.Background(), a, g)
				require.Error(t, err)
			},
			run: func(ctx context.Context, e *Engine, a Actor, _, g provider.Target) error {
				_, err := e.Delete(ctx, a, g, Guard{})
				return err
			}},
		{name: "move of an unseen source", op: OpMove, wantCode: provider.CodeNotObserved, wantTo: "g.txt",
			run: func(ctx context.Context, e *Engine, a Actor, f, g provider.Target) error {
				_, err := e.Move(ctx, a, f, g, nil, Guard{}, Guard{})
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e, ffs := newTestEngine(t)
			var events []Event
			e.AddObserver(func(_ context.Context, ev Event) error { events = append(events, ev); return nil })
			a := openSession(t, e.Store())
			a.PID = 4242
			f, g := ffs.target("f.txt"), ffs.target("g.txt")
			v := ffs.put(f, "x\n")
			if tc.setup != nil {
				tc.setup(e, ffs, a, f, g)
			}

			err := tc.run(ctx, e, a, f, g)
			require.Equal(t, tc.wantCode, provider.CodeOf(err), "err: %v", err)

			got := refusals(t, e.Store())
			require.Len(t, got, 1)
			r := got[0]
			assert.Equal(t, tc.op, r.Op)
			assert.Equal(t, tc.wantCode, r.Refused)
			assert.Equal(t, provider.MessageOf(err), r.Reason)
			assert.NotEmpty(t, r.Reason)
			assert.Equal(t, a, r.Actor, "session, uid, pid and channel")
			assert.Equal(t, tc.wantTo, r.To)
			assert.Empty(t, r.Before)
			assert.Empty(t, r.After)
			assert.True(t, r.IsRefusal())
			assert.Empty(t, events, "a refusal reaches no observer (no change feed, no fs.watch)")
			if tc.op != OpDelete {
				content, _ := ffs.content(f)
				assert.True(t, content == "x\n" || content == "x changed\n", "the refused change left %s alone: %q", f.DisplayPath, content)
				assert.NotEqual(t, provider.Version(""), v)
			}
		})
	}
}

// TestRefusal_StaleChangeTheCallerMergesIsTheCallersToAudit: under
// Guard.Merge a stale write, edit or patch leaves no refusal entry (the
// caller merges it, or audits the refusal when it cannot); other refusals
// under Guard.Merge, and stale ones without it, are audited as always.
func TestRefusal_StaleChangeTheCallerMergesIsTheCallersToAudit(t *testing.T) {
	hunks := []patch.Hunk{{OldLines: []string{"x"}, NewLines: []string{"y"}}}
	change := map[MutationOp]func(ctx context.Context, e *Engine, a Actor, f provider.Target, g Guard) error{
		OpWrite: func(ctx context.Context, e *Engine, a Actor, f provider.Target, g Guard) error {
			_, err := e.Write(ctx, a, f, "y\n", g)
			return err
		},
		OpEdit: func(ctx context.Context, e *Engine, a Actor, f provider.Target, g Guard) error {
			_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "x", NewString: "y"}, g)
			return err
		},
		OpPatch: func(ctx context.Context, e *Engine, a Actor, f provider.Target, g Guard) error {
			_, err := e.Patch(ctx, a, f, hunks, g)
			return err
		},
	}
	tests := []struct {
		name        string
		read, merge bool
		wantCode    provider.Code
		wantEntries int
	}{
		{name: "stale, merging", read: true, merge: true, wantCode: provider.CodeStaleVersion, wantEntries: 0},
		{name: "stale, not merging", read: true, merge: false, wantCode: provider.CodeStaleVersion, wantEntries: 1},
		{name: "never read, merging", read: false, merge: true, wantCode: provider.CodeNotObserved, wantEntries: 1},
	}
	for _, op := range []MutationOp{OpWrite, OpEdit, OpPatch} {
		for _, tc := range tests {
			t.Run(string(op)+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				e, ffs := newTestEngine(t)
				a := openSession(t, e.Store())
				f := ffs.target("f.txt")
				ffs.put(f, "x\n")
				if tc.read {
					_, _, err := e.Read(ctx, a, f)
					require.NoError(t, err)
				}
				ffs.put(f, "x changed\n")
				err := change[op](ctx, e, a, f, Guard{Merge: tc.merge})
				require.Equal(t, tc.wantCode, provider.CodeOf(err), "err: %v", err)
				assert.Len(t, refusals(t, e.Store()), tc.wantEntries)
			})
		}
	}
}

// missingFS answers every edit FS_NOT_FOUND, as the local backend does for
// an unguarded edit of a file that is not there.
type missingFS struct{ *fakeFS }

func (missingFS) EditText(_ context.Context, t provider.Target, _ provider.EditRequest, _ *provider.VersionGuard) (provider.EditOutcome, error) {
	return provider.EditOutcome{}, provider.NewError(provider.CodeNotFound, "edit", t.DisplayPath, nil, "no such file")
}

func TestRefusal_FilesystemNotFoundIsNotARefusal(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), quietOptions())
	ffs := newFakeFS()
	e := NewEngine(s, missingFS{ffs})
	a := openSession(t, s)
	_, err := e.Edit(ctx, a, ffs.target("missing.txt"), provider.EditRequest{OldString: "a", NewString: "b"}, Guard{Unconditional: true})
	require.Equal(t, provider.CodeNotFound, provider.CodeOf(err))
	assert.Empty(t, refusals(t, s), "an unguarded edit of a missing file failed; nothing refused it")
}

func TestRefusal_RateLimitedPerSessionPathAndCode(t *testing.T) {
	ctx := context.Background()
	e, ffs, clock := newClockedEngine(t, quietOptions())
	// The limit is the mount's (the kernel's retries): actors on the mount.
	a := openSession(t, e.Store())
	b := openSession(t, e.Store())
	a.Channel, b.Channel = ChannelMount, ChannelMount
	f, g := ffs.target("f.txt"), ffs.target("g.txt")
	ffs.put(f, "x\n")
	ffs.put(g, "x\n")
	edit := func(a Actor, t provider.Target) error {
		_, err := e.Edit(ctx, a, t, provider.EditRequest{OldString: "x", NewString: "y"}, Guard{})
		return err
	}

	for range 100 {
		require.Equal(t, provider.CodeNotObserved, provider.CodeOf(edit(a, f)))
	}
	got := refusals(t, e.Store())
	require.Len(t, got, 1, "a burst of one key is one entry")
	assert.Zero(t, got[0].Suppressed)

	// Other keys in the same instant are not merged into it.
	require.Error(t, edit(b, f)) // other session
	require.Error(t, edit(a, g)) // other path
	_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "x", NewString: "y"},
		Guard{Version: &provider.VersionGuard{Version: "v-old"}}) // same session and path, other code
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err))
	got = refusals(t, e.Store())
	require.Len(t, got, 4)

	// Within the interval the key stays quiet; the next entry of the first
	// key carries what was left out.
	clock.Advance(999 * time.Millisecond)
	require.Error(t, edit(a, f))
	require.Len(t, refusals(t, e.Store()), 4)
	clock.Advance(time.Millisecond)
	require.Equal(t, provider.CodeNotObserved, provider.CodeOf(edit(a, f)))
	got = refusals(t, e.Store())
	require.Len(t, got, 5)
	assert.Equal(t, provider.CodeNotObserved, got[0].Refused)
	assert.Equal(t, a.Session, got[0].Actor.Session)
	assert.Equal(t, uint64(100), got[0].Suppressed)
}

// TestRefusal_EverySocketRefusalIsRecorded: the rate limit is for the
// kernel's retries on the mount; distinct socket requests refused within
// one second are each an entry an agent may look for.
func TestRefusal_EverySocketRefusalIsRecorded(t *testing.T) {
	ctx := context.Background()
	e, ffs, _ := newClockedEngine(t, quietOptions())
	a := openSession(t, e.Store())
	require.Equal(t, ChannelSocket, a.Channel)
	f := ffs.target("f.txt")
	ffs.put(f, "x\n")
	for range 5 {
		_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "x", NewString: "y"}, Guard{})
		require.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	}
	assert.Len(t, refusals(t, e.Store()), 5, "five refused requests in the same instant, five entries")
}

func TestRefusal_RateLimitOffRecordsEveryRefusal(t *testing.T) {
	ctx := context.Background()
	e, ffs, _ := newClockedEngine(t, quietOptions().WithRefusalInterval(-1))
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	ffs.put(f, "x\n")
	for range 3 {
		_, err := e.Delete(ctx, a, f, Guard{})
		require.Error(t, err)
	}
	assert.Len(t, refusals(t, e.Store()), 3)
}

func TestRefusalLimiter_ForgetsTheLeastRecentlyWrittenKey(t *testing.T) {
	l := newRefusalLimiter(time.Second, 2)
	t0 := time.Unix(1700000000, 0)
	key := func(p string) refusalKey { return refusalKey{session: "s", path: p, code: provider.CodeStaleVersion} }
	admit := func(p string, at time.Duration) bool {
		ok, _ := l.admit(key(p), t0.Add(at))
		return ok
	}

	require.True(t, admit("a", 0))
	require.True(t, admit("b", 100*time.Millisecond))
	require.False(t, admit("a", 200*time.Millisecond), "a is still limited")
	require.True(t, admit("a", 1100*time.Millisecond)) // a written again: b is now the oldest
	require.True(t, admit("c", 1200*time.Millisecond)) // full: b goes
	assert.Len(t, l.keys, 2)
	assert.NotContains(t, l.keys, key("b"))
	assert.False(t, admit("a", 1300*time.Millisecond), "a, written recently, is remembered")
	assert.True(t, admit("b", 1300*time.Millisecond), "b was forgotten: admitted again")
}

func TestRefusal_MountHooksAuditBoundRefusalsOnly(t *testing.T) {
	e, ffs := newTestEngine(t)
	a := openStrictSession(t, e.Store()) // read before write: unseen is refused
	a.PID = 321
	f, g := ffs.target("f.txt"), ffs.target("g.txt")
	v1 := provider.Version("v1")

	// Allowed, and unbound callers: nothing.
	require.NoError(t, e.CheckMount(Actor{PID: 5, Channel: ChannelMount}, OpWrite, f, &v1))
	require.NoError(t, e.CheckMountCreate(a, OpCreate, g, nil))
	assert.Empty(t, refusals(t, e.Store()))

	// Unseen: one entry, even through CheckMountCreate over an existing file.
	err := e.CheckMountCreate(a, OpWrite, f, &v1)
	require.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	require.NoError(t, e.ObserveMount(a, g, Present("v7")))
	err = e.CheckMountCreate(a, OpCreate, g, nil) // removed since read
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err))

	got := refusals(t, e.Store())
	require.Len(t, got, 2)
	assert.Equal(t, AuditEntry{Seq: got[0].Seq, Time: got[0].Time, Key: g.Key, Path: "g.txt", Op: OpCreate, Actor: a,
		Refused: provider.CodeStaleVersion, Reason: "the file changed since you read it; read it again"}, got[0])
	assert.Equal(t, OpWrite, got[1].Op)
	assert.Equal(t, provider.CodeNotObserved, got[1].Refused)
	assert.Equal(t, int32(321), got[1].Actor.PID)
	assert.Equal(t, ChannelMount, got[1].Actor.Channel)

	// A closed session's process is refused, and that is audited too.
	require.NoError(t, e.Store().CloseSession(a.Session))
	err = e.CheckMount(a, OpWrite, ffs.target("h.txt"), &v1)
	require.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	got = refusals(t, e.Store())
	require.Len(t, got, 3)
	assert.Contains(t, got[0].Reason, "closed")
}

func TestAudit_FiltersKindSessionSinceAndPath(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	x, y := Actor{Session: "s-x"}, Actor{Session: "s-y"}
	for i := range 6 {
		e := AuditEntry{Path: fmt.Sprintf("f%d.txt", i%2), Op: OpWrite, Actor: x, Detail: fmt.Sprint(i)}
		if i%3 == 0 {
			e.Actor = y
		}
		if i >= 3 {
			e.Refused, e.Reason = provider.CodeStaleVersion, "changed"
		}
		require.NoError(t, s.AppendAudit(e))
	}
	details := func(q AuditQuery) []string {
		entries, err := s.Audit(q)
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Detail)
		}
		return out
	}
	all, err := s.Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, all, 6)
	since := all[3].Seq // the entry with Detail "2"

	assert.Equal(t, []string{"5", "4", "3"}, details(AuditQuery{Kind: AuditRefusals}))
	assert.Equal(t, []string{"2", "1", "0"}, details(AuditQuery{Kind: AuditChanges}))
	assert.Equal(t, []string{"3", "0"}, details(AuditQuery{Session: "s-y"}))
	assert.Equal(t, []string{"5", "4", "3"}, details(AuditQuery{Since: since}))
	assert.Equal(t, []string{"5", "3"}, details(AuditQuery{Path: "f1.txt", Since: since}), "a path filter keeps refusals")
	assert.Equal(t, []string{"4"}, details(AuditQuery{Kind: AuditRefusals, Session: "s-x", Path: "f0.txt"}))
	assert.Empty(t, details(AuditQuery{Since: all[0].Seq}))
	assert.Empty(t, details(AuditQuery{Since: ^uint64(0)}))

	// With Since, a limit keeps the oldest entries after it: paging forward
	// from the highest seq returned misses nothing.
	first := all[5].Seq // Detail "0"
	page := details(AuditQuery{Since: first, Limit: 2})
	assert.Equal(t, []string{"2", "1"}, page, "newest first within the page")
	assert.Equal(t, []string{"4", "3"}, details(AuditQuery{Since: all[3].Seq, Limit: 2}))
	assert.Equal(t, []string{"5", "4"}, details(AuditQuery{Limit: 2}), "without Since, the newest")
}

// BenchmarkAuditRefusal measures a refusal that is written (a new key each
// time) and one the rate limit leaves out (the same key).
func BenchmarkAuditRefusal(b *testing.B) {
	err := provider.NewError(provider.CodeStaleVersion, "write", "f.txt", nil, "the file changed since you read it; read it again")
	a := Actor{Session: "s-bench", PID: 1, Channel: ChannelMount}
	b.Run("written", func(b *testing.B) {
		e, ffs := newTestEngine(b)
		targets := make([]provider.Target, 1024)
		for i := range targets {
			targets[i] = ffs.target(fmt.Sprintf("f%d.txt", i))
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			a.Session = SessionID(fmt.Sprintf("s-%d", i/len(targets)))
			e.AuditRefusal(a, OpWrite, targets[i%len(targets)], err)
		}
	})
	b.Run("suppressed", func(b *testing.B) {
		e, ffs := newTestEngine(b)
		t := ffs.target("f.txt")
		e.AuditRefusal(a, OpWrite, t, err)
		b.ReportAllocs()
		for b.Loop() {
			e.AuditRefusal(a, OpWrite, t, err)
		}
	})
}
