package policy

import (
	"context"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// TestGuard_MountBaselineRule pins the mount's column "change an existing
// file" of the guard table for a file the session never read: a session
// that was open before may change it iff nobody else changed it since the
// session opened (records; the ctime where nothing is recorded); a strict
// session, a strict binding (exec --strict) in a session that is not
// strict, a socket request and a file with two names need a read.
func TestGuard_MountBaselineRule(t *testing.T) {
	ctx := context.Background()
	old, later := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	person := Actor{PID: 44, Channel: ChannelMount}
	tests := []struct {
		name     string
		path     string
		before   *Actor // records a change of path before the session opens
		after    *Actor // records a change of path after the session opened (nil: none)
		ctime    time.Time
		links    uint64
		strict   bool
		binding  bool // the actor's binding is strict (Actor.Strict)
		channel  Channel
		zones    Zones
		op       MutationOp // OpWrite when empty
		wantCode provider.Code
		wantMsg  string
	}{
		{name: "nobody changed it", path: "f.txt", ctime: old},
		{name: "changed before the session opened", path: "f.txt", before: &person, ctime: old},
		{name: "a person changed it after", path: "f.txt", after: &person, ctime: old,
			wantCode: provider.CodeNotObserved, wantMsg: "(write through the mount by an unbound process (pid 44"},
		{name: "changed outside the daemon after (ctime, no record)", path: "f.txt", ctime: later,
			wantCode: provider.CodeNotObserved, wantMsg: "not through the daemon"},
		{name: "changed outside the daemon after an old record", path: "f.txt", before: &person, ctime: later,
			wantCode: provider.CodeNotObserved, wantMsg: "not through the daemon"},
		{name: "two names", path: "f.txt", ctime: old, links: 2, wantCode: provider.CodeNotObserved, wantMsg: "2 names"},
		{name: "strict session", path: "f.txt", ctime: old, strict: true, wantCode: provider.CodeNotObserved},
		{name: "strict binding in a session that is not strict", path: "f.txt", ctime: old, binding: true,
			wantCode: provider.CodeNotObserved, wantMsg: "read it first"},
		{name: "strict binding, git dir: still outside", path: ".git/index", after: &person, ctime: later, binding: true},
		{name: "socket request", path: "f.txt", ctime: old, channel: ChannelSocket, wantCode: provider.CodeNotObserved},
		{name: "git dir: outside the guard", path: "r/.git/index", after: &person, ctime: later},
		{name: "git dir of a submodule", path: ".git/modules/sub/refs/heads/main", after: &person, ctime: later},
		{name: "git dir, strict session: still outside", path: ".git/COMMIT_EDITMSG", after: &person, ctime: later, strict: true},
		{name: "git hooks follow the worktree rule", path: ".git/hooks/pre-commit", after: &person, ctime: old,
			wantCode: provider.CodeNotObserved},
		{name: "git config follows the worktree rule", path: ".git/config", after: &person, ctime: old,
			wantCode: provider.CodeNotObserved},
		{name: "git info follows the worktree rule", path: ".git/info/exclude", ctime: later,
			wantCode: provider.CodeNotObserved},
		{name: "submodule hooks follow the worktree rule", path: ".git/modules/sub/hooks/x", after: &person, ctime: old,
			wantCode: provider.CodeNotObserved},
		{name: "git dir, hard link: guarded", path: ".git/x", ctime: old, links: 2, wantCode: provider.CodeNotObserved},
		{name: "git dir, hard link: removing a name is outside", path: ".git/objects/ab/tmp_obj", op: OpUnlink, ctime: later, links: 2},
		{name: "removing one of two names", path: "f.txt", op: OpUnlink, ctime: old, links: 2},
		{name: "git dir with --guard-git", path: ".git/index", after: &person, ctime: old, zones: Zones{GuardGit: true},
			wantCode: provider.CodeNotObserved},
		{name: "a .git file is the worktree's", path: "wt/.git", after: &person, ctime: old, wantCode: provider.CodeNotObserved},
		{name: "unguarded glob", path: "web/node_modules/a.js", after: &person, ctime: later, strict: true,
			zones: Zones{Unguarded: func(rel string) bool { ok, _ := path.Match("web/node_modules/*", rel); return ok }}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ffs := newTestEngine(t)
			e.SetZones(tc.zones)
			f := ffs.target(tc.path)
			if tc.before != nil {
				require.NoError(t, e.RecordMount(ctx, *tc.before, OpWrite, f, "", "v0", nil))
			}
			sess, err := e.Store().OpenSessionWith(SessionSpec{Name: "agent", Strict: tc.strict})
			require.NoError(t, err)
			a := Actor{Session: sess.ID, Channel: ChannelMount, PID: 9, Strict: tc.binding}
			if tc.channel != "" {
				a.Channel = tc.channel
			}
			if tc.after != nil {
				require.NoError(t, e.RecordMount(ctx, *tc.after, OpWrite, f, "", "v1", nil))
			}
			links := tc.links
			if links == 0 {
				links = 1
			}
			op := tc.op
			if op == "" {
				op = OpWrite
			}
			hashed := false
			err = e.CheckMountFile(a, op, f, FileNow{Ctime: tc.ctime, Links: links,
				Version: func() (provider.Version, error) { hashed = true; return "v1", nil }})
			assert.False(t, hashed, "an unseen file's rule needs no hash")
			if tc.wantCode == "" {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, tc.wantCode, provider.CodeOf(err), "err: %v", err)
			assert.Contains(t, provider.MessageOf(err), tc.wantMsg)
		})
	}
}

// TestGuard_MountBaselineOwnChange: the session's own recorded change
// (a chmod: it grants no observation) explains the ctime it moved, and
// another session's change after the start refuses, naming it.
func TestGuard_MountBaselineOwnChange(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	f := ffs.target("f.txt")
	sess, err := e.Store().OpenSessionWith(SessionSpec{Name: "agent"})
	require.NoError(t, err)
	a := Actor{Session: sess.ID, Channel: ChannelMount, PID: 9}
	ctime := time.Now()
	require.NoError(t, e.RecordMount(ctx, a, OpSetattr, f, "", "", nil))
	version := func() (provider.Version, error) { return "v1", nil }
	require.NoError(t, e.CheckMountFile(a, OpWrite, f, FileNow{Ctime: ctime, Links: 1, Version: version}))
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(
		e.CheckMountFile(a, OpWrite, f, FileNow{Ctime: time.Now().Add(time.Hour), Links: 1, Version: version})),
		"a ctime later than the session's own record is someone else's")

	other := openSession(t, e.Store())
	require.NoError(t, e.RecordMount(ctx, other, OpWrite, f, "", "v2", nil))
	err = e.CheckMountFile(a, OpWrite, f, FileNow{Ctime: ctime, Links: 1, Version: version})
	require.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	assert.Contains(t, provider.MessageOf(err), "by session "+string(other.Session))
}

// TestGuard_ObservedFilesKeepTheirRow: what a session read decides, for a
// baseline session too (stale is stale; observed absent is not found).
func TestGuard_ObservedFilesKeepTheirRow(t *testing.T) {
	e, ffs := newTestEngine(t)
	f, g := ffs.target("f.txt"), ffs.target("g.txt")
	sess, err := e.Store().OpenSessionWith(SessionSpec{Name: "agent"})
	require.NoError(t, err)
	a := Actor{Session: sess.ID, Channel: ChannelMount}
	require.NoError(t, e.ObserveMount(a, f, Present("v1")))
	require.NoError(t, e.ObserveMount(a, g, Absent()))
	at := func(v provider.Version) FileNow {
		return FileNow{Links: 1, Version: func() (provider.Version, error) { return v, nil }}
	}
	assert.NoError(t, e.CheckMountFile(a, OpWrite, f, at("v1")))
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(e.CheckMountFile(a, OpWrite, f, at("v2"))))
	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(e.CheckMountFile(a, OpWrite, g, at("v1"))))
}

func TestGuard_InGitDir(t *testing.T) {
	for rel, want := range map[string]bool{
		".git/HEAD": true, "a/b/.git/objects/ab/cd": true, ".git/worktrees/wt/HEAD": true,
		".git/hooks/pre-commit": false, ".git/config": false, ".git/info/exclude": false,
		".git/modules/s/config": false, ".git/modules/s/index": true, ".git": false, "a/.git": false,
		"src/git/x": false, "x.git/HEAD": false,
	} {
		assert.Equal(t, want, inGitDir(rel), rel)
	}
}

// TestGuard_SessionStartAndStrictSurviveARestart: a restarted daemon
// judges a session's blind writes from the same start (a lost start would
// let changes made before the restart through) and keeps it strict.
func TestGuard_SessionStartAndStrictSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	e := NewEngine(s, newFakeFS())
	require.NoError(t, e.RecordMount(context.Background(), Actor{Channel: ChannelMount}, OpWrite, provider.Target{Key: "k", DisplayPath: "f"}, "", "v", nil))
	sess, err := s.OpenSessionWith(SessionSpec{Name: "agent", Strict: true})
	require.NoError(t, err)
	require.NotZero(t, sess.StartSeq)
	require.NoError(t, s.Close())

	s2 := openStore(t, dir, quietOptions())
	got, ok := s2.Session(sess.ID)
	require.True(t, ok)
	assert.Equal(t, sess.StartSeq, got.StartSeq)
	assert.True(t, got.Strict)
	rec, ok := s2.LastWrite("k")
	require.True(t, ok)
	assert.LessOrEqual(t, rec.Seq, got.StartSeq, "the change before the session is recorded before its start")
	assert.NotZero(t, rec.Seq)
}
