package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// fs.changes answers "what changed since this token" in one response, for
// callers that ask now and then instead of holding a watch: git's
// core.fsmonitor hook (dshmount fsmonitor) is the first. A token names the
// daemon run and a feed seq; a token of another run, from before changes
// were lost, or older than what the daemon retains gets everything: true
// (the caller must rescan), never a partial list.

// MethodChanges is the request/response form of the change feed.
const MethodChanges = "fs.changes"

// Bounds of fs.changes.
const (
	// DefaultChangesMax is the most changed paths one answer lists; past
	// it the answer is everything: true.
	DefaultChangesMax = 100_000
	// changesSyncTimeout bounds how long sync waits for the watcher to
	// report the cookie file; past it the answer is everything: true.
	changesSyncTimeout = 3 * time.Second
)

// ChangesCookiePrefix starts the name of the cookie files fs.changes
// creates (in the .git directory of the requested path) to learn that the
// watcher has reported everything that happened before the request. They
// are removed at once and never listed.
const ChangesCookiePrefix = ".dshmount-cookie-"

// ChangesTokenPrefix starts every fs.changes token: "dsh:RUN:SEQ".
const ChangesTokenPrefix = "dsh:"

// ChangesCursor is fs.changes' since: a token "dsh:RUN:SEQ" from an
// earlier answer, or a bare feed seq of this daemon run. In JSON it is a
// string or a number.
type ChangesCursor string

// UnmarshalJSON accepts a string or a non-negative integer.
func (c *ChangesCursor) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = ChangesCursor(s)
		return nil
	}
	var n uint64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("since must be a token string or a non-negative integer seq: %w", err)
	}
	*c = ChangesCursor(strconv.FormatUint(n, 10))
	return nil
}

// ChangesParams are the parameters of fs.changes.
type ChangesParams struct {
	// Since is where the caller's knowledge ends; empty: it knows nothing
	// (the answer is everything: true with a fresh token).
	Since ChangesCursor `json:"since,omitempty"`
	// Path limits the answer to changes at or below this directory (and
	// names where the sync cookie goes). Default: the workspace root.
	Path string `json:"path,omitempty"`
	// Cwd is the workspace-relative directory Path resolves against.
	Cwd string `json:"cwd,omitempty"`
	// Sync waits until the backing-tree watcher has reported every change
	// made before the request (a cookie file in Path/.git), so a change
	// made in the workspace directory just before is in the answer.
	Sync bool `json:"sync,omitempty"`
	// Max bounds the paths listed (default DefaultChangesMax); past it
	// the answer is everything: true.
	Max int `json:"max,omitempty"`
	// Workspace says the caller works on the workspace directory itself,
	// not on the mount: paths the view hides (--hide) exist there, but the
	// watcher records no change to them, so a daemon that hides paths
	// answers everything: true.
	Workspace bool `json:"workspace,omitempty"`
}

// ChangedPath is one changed path of a fs.changes answer: the latest
// change of that path after since.
type ChangedPath struct {
	// Seq is the feed seq of the change (0 for a change in progress).
	Seq uint64 `json:"seq"`
	// Path is workspace-relative.
	Path string `json:"path"`
	// Kind is created, modified, attrib, deleted or renamed.
	Kind string `json:"kind"`
	// To is the new name of a renamed path; From the old name of a path
	// that got its name by a rename. Both names are listed.
	To   string `json:"to,omitempty"`
	From string `json:"from,omitempty"`
	// Dir is set when the path is a directory now.
	Dir bool `json:"dir,omitempty"`
	// InProgress is set for a path being changed right now (open for
	// writing through the mount, or a socket mutation not yet committed):
	// its change has no seq yet and is listed again once it has.
	InProgress bool `json:"inProgress,omitempty"`
}

// ChangesResult is the result of fs.changes.
type ChangesResult struct {
	// Run identifies this daemon run (random, new at every start).
	Run string `json:"run"`
	// Seq is the feed seq the answer covers; Token is "dsh:RUN:SEQ", the
	// since of the next request.
	Seq   uint64 `json:"seq"`
	Token string `json:"token"`
	// Everything is set when the daemon cannot list what changed since
	// the caller's since (Reason says why): the caller must treat every
	// path as changed. Changes is then empty.
	Everything bool   `json:"everything"`
	Reason     string `json:"reason,omitempty"`
	// Synced reports that the request's sync took place.
	Synced  bool          `json:"synced,omitempty"`
	Changes []ChangedPath `json:"changes"`
}

// FormatChangesToken is the token of seq in run.
func FormatChangesToken(run string, seq uint64) string {
	return ChangesTokenPrefix + run + ":" + strconv.FormatUint(seq, 10)
}

// ParseChangesToken splits a token "dsh:RUN:SEQ"; ok is false for anything
// else.
func ParseChangesToken(tok string) (run string, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(tok, ChangesTokenPrefix)
	if !found {
		return "", 0, false
	}
	run, num, found := strings.Cut(rest, ":")
	if !found || run == "" || strings.IndexFunc(run, func(r rune) bool { return !isHexDigit(r) }) >= 0 {
		return "", 0, false
	}
	if num == "" || strings.IndexFunc(num, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return run, seq, true
}

// isHexDigit reports whether r is a lower-case hexadecimal digit.
func isHexDigit(r rune) bool { return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') }

// changesState is the per-server state of fs.changes.
type changesState struct {
	run     string        // this daemon run's id
	cookies atomic.Uint64 // cookie files made
}

// newRunID returns a random run id (16 hex digits).
func newRunID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; a clock-based id still
		// differs between runs.
		return strconv.FormatInt(time.Now().UnixNano(), 16)
	}
	return hex.EncodeToString(b[:])
}

// Changes serves fs.changes to the caller (listed with its own
// credentials when it has them).
func (s *Service) Changes(ctx context.Context, c *Caller, p ChangesParams) (ChangesResult, error) {
	st := s.changeRun
	if p.Max < 0 {
		return ChangesResult{}, invalidParams("max must be positive, not %d", p.Max)
	}
	if p.Max == 0 {
		p.Max = DefaultChangesMax
	}
	scope := "."
	if p.Path != "" {
		t, err := s.workspace().resolve(ctx, "path", p.Path, p.Cwd)
		if err != nil {
			return ChangesResult{}, err
		}
		scope = t.DisplayPath
	}
	root, err := s.backingRoot(ctx)
	if err != nil {
		return ChangesResult{}, err
	}
	res := &ChangesResult{Run: st.run, Changes: []ChangedPath{}}
	watched := s.cfg.ExternalWatched != nil && s.cfg.ExternalWatched()
	if p.Sync && watched {
		synced, err := s.syncWatcher(ctx, st, root, scope)
		if err != nil {
			s.log.Debug("fs.changes sync", "path", scope, "err", err)
			return s.everything(res, st, "the watcher did not confirm it is up to date: "+err.Error())
		}
		res.Synced = synced
	}
	// Paths being changed now first, then the log: a change that commits
	// in between is then in one of the two.
	inProgress := s.engine.ChangesInProgress()
	since, reason := st.since(p.Since)
	if reason != "" {
		return s.everything(res, st, reason)
	}
	cs, err := s.store.ChangesSince(since, p.Max)
	if err != nil {
		return ChangesResult{}, fmt.Errorf("fs.changes: %w", err)
	}
	res.Seq, res.Token = cs.Upto, FormatChangesToken(st.run, cs.Upto)
	switch {
	case !watched:
		return s.markEverything(res, "the daemon does not watch the workspace directory (serve --watch): changes made there directly are unknown")
	case p.Workspace && s.hidesBelow(scope):
		return s.markEverything(res, "the daemon hides paths (--hide) whose changes in the workspace directory it does not record")
	case !cs.Vouched:
		return s.markEverything(res, fmt.Sprintf("changes after seq %d are not all known (from before this daemon run, before lost changes, or not retained)", since))
	case cs.Truncated:
		return s.markEverything(res, fmt.Sprintf("more than %d changes", p.Max))
	}
	res.Changes = visibleChanges(ctx, s.peerFilter(c, s.fs, false), changedPaths(cs.Entries, inProgress, scope))
	if len(res.Changes) > p.Max {
		return s.markEverything(res, fmt.Sprintf("more than %d changed paths", p.Max))
	}
	for i := range res.Changes {
		res.Changes[i].Dir = isDir(root, res.Changes[i].Path)
	}
	return *res, nil
}

// since turns a cursor into a seq of this run, or says why it cannot.
func (st *changesState) since(c ChangesCursor) (uint64, string) {
	if c == "" {
		return 0, "no since: nothing is known yet"
	}
	if n, err := strconv.ParseUint(string(c), 10, 64); err == nil {
		return n, ""
	}
	run, seq, ok := ParseChangesToken(string(c))
	switch {
	case !ok:
		return 0, fmt.Sprintf("since %q is not a token of this daemon (%sRUN:SEQ)", string(c), ChangesTokenPrefix)
	case run != st.run:
		return 0, "since is a token of another daemon run"
	}
	return seq, ""
}

// everything answers everything: true with the current token.
func (s *Service) everything(res *ChangesResult, st *changesState, reason string) (ChangesResult, error) {
	res.Seq = s.store.LastSeq()
	res.Token = FormatChangesToken(st.run, res.Seq)
	return s.markEverything(res, reason)
}

// markEverything turns res into an everything: true answer.
func (s *Service) markEverything(res *ChangesResult, reason string) (ChangesResult, error) {
	res.Everything, res.Reason, res.Changes = true, reason, []ChangedPath{}
	return *res, nil
}

// changeKind maps an audit operation onto a fs.changes kind.
func changeKind(op policy.MutationOp) string {
	switch op {
	case policy.OpCreate, policy.OpLink:
		return "created"
	case policy.OpDelete, policy.OpUnlink:
		return "deleted"
	case policy.OpMove, policy.OpRename:
		return "renamed"
	case policy.OpSetattr:
		return "attrib"
	default:
		return "modified"
	}
}

// changedPaths turns entries (oldest first) and paths in progress into one
// ChangedPath per path at or below scope, the latest change of each, in
// path order. Both names of a rename are listed; cookie files are not.
func changedPaths(entries []policy.AuditEntry, inProgress []string, scope string) []ChangedPath {
	byPath := map[string]ChangedPath{}
	note := func(c ChangedPath) {
		if inScope(scope, c.Path) && !IsChangesCookie(c.Path) {
			byPath[c.Path] = c
		}
	}
	for _, e := range entries {
		kind := changeKind(e.Op)
		if e.To == "" {
			note(ChangedPath{Seq: e.Seq, Path: e.Path, Kind: kind})
			continue
		}
		note(ChangedPath{Seq: e.Seq, Path: e.Path, Kind: kind, To: e.To})
		note(ChangedPath{Seq: e.Seq, Path: e.To, Kind: kind, From: e.Path})
	}
	for _, p := range inProgress {
		note(ChangedPath{Path: p, Kind: "modified", InProgress: true})
	}
	out := make([]ChangedPath, 0, len(byPath))
	for _, c := range byPath {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// visibleChanges drops the changed names f's peer may not list: a path in
// a directory it may not list is left out, and a rename's other name there
// is not given (the path was then created or deleted, as far as the peer
// can tell).
func visibleChanges(ctx context.Context, f *listFilter, cs []ChangedPath) []ChangedPath {
	if f.everyone() {
		return cs
	}
	out := cs[:0]
	for _, c := range cs {
		if !f.mayName(ctx, c.Path) {
			continue
		}
		if c.To != "" && !f.mayName(ctx, c.To) {
			c.To, c.Kind = "", "deleted"
		}
		if c.From != "" && !f.mayName(ctx, c.From) {
			c.From, c.Kind = "", "created"
		}
		out = append(out, c)
	}
	return out
}

// inScope reports whether the workspace-relative p is scope or below it.
func inScope(scope, p string) bool {
	return scope == "." || p == scope || strings.HasPrefix(p, scope+"/")
}

// IsChangesCookie reports whether the workspace-relative p is a sync
// cookie file of fs.changes (the backing-tree watcher flushes at once when
// one appears: fs.changes is waiting for it).
func IsChangesCookie(p string) bool { return strings.HasPrefix(path.Base(p), ChangesCookiePrefix) }

// hidingView is the part of viewrules.View hidesBelow asks.
type hidingView interface {
	Rules() viewrules.Rules
	Access(rel string) viewrules.Access
	AccessBelow(rel string) viewrules.Access
}

// hidesBelow reports whether a --hide rule can hide scope or a path below
// it. The daemon's own staging directory of branches is left out: like its
// state directory, it is the daemon's, not the worktree's.
func (s *Service) hidesBelow(scope string) bool {
	v, ok := s.fs.(hidingView)
	if !ok {
		return false
	}
	anchored := false
	for _, h := range v.Rules().Hide {
		h = strings.TrimSpace(h)
		if strings.Trim(h, "/") == branch.StagingDir {
			continue
		}
		if !strings.Contains(strings.TrimSuffix(h, "/"), "/") {
			return true // a name hidden at any depth
		}
		anchored = true
	}
	return anchored && (v.Access(scope) == viewrules.Hidden || v.AccessBelow(scope) == viewrules.Hidden)
}

// backingRoot is the absolute path of the workspace directory.
func (s *Service) backingRoot(ctx context.Context) (string, error) {
	t, err := s.fs.Resolve(ctx, ".", provider.ResolveOptions{})
	if err != nil {
		return "", fmt.Errorf("fs.changes: resolve the workspace root: %w", err)
	}
	return s.fs.ProcessPath(t), nil
}

// isDir reports whether the workspace-relative p is a directory now.
func isDir(root, p string) bool {
	fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
	return err == nil && fi.IsDir()
}

// syncWatcher creates a cookie file in scope/.git in the workspace
// directory and waits until the watcher reports it: every change made in
// the workspace directory before then has been recorded too (the watcher
// delivers in order). It reports false, without error, when there is no
// .git directory it may create the cookie in: the answer is then given
// without sync.
func (s *Service) syncWatcher(ctx context.Context, st *changesState, root, scope string) (bool, error) {
	gitDir := filepath.Join(root, filepath.FromSlash(scope), ".git")
	if fi, err := os.Lstat(gitDir); err != nil || !fi.IsDir() {
		return false, nil
	}
	name := fmt.Sprintf("%s%s-%d", ChangesCookiePrefix, st.run, st.cookies.Add(1))
	rel := path.Join(scope, ".git", name)
	sub, err := s.store.Subscribe(s.store.LastSeq(), 0)
	if err != nil {
		return false, fmt.Errorf("follow the change feed: %w", err)
	}
	defer sub.Close()
	cookie := filepath.Join(gitDir, name)
	f, err := os.OpenFile(cookie, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return false, nil
		}
		return false, fmt.Errorf("create the cookie file: %w", err)
	}
	_ = f.Close()
	defer func() { _ = os.Remove(cookie) }()
	timer := time.NewTimer(changesSyncTimeout)
	defer timer.Stop()
	for {
		select {
		case it, ok := <-sub.C:
			if !ok || it.Lost {
				return false, errors.New("the change feed lost changes meanwhile")
			}
			if it.Entry.Path == rel || it.Entry.To == rel {
				return true, nil
			}
		case <-timer.C:
			return false, fmt.Errorf("no event for the cookie file within %s", changesSyncTimeout)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}
