package service

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"github.com/dshmount/dshmount/internal/merge"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/seen"
	"github.com/dshmount/dshmount/patch"
)

// keepSeen keeps the bytes of a file a session just read (fs.read over the
// socket or MCP) in the merge cache, so that a later stale change of the
// session can be merged (merge: true). Only text up to the cache's size
// limit is kept, and only when the bytes read now are still the version
// the read observed; anything else is skipped: the merge then answers
// FS_STALE_VERSION, as without the cache.
func (s *Service) keepSeen(ctx context.Context, t provider.Target, v provider.Version) {
	if s.cfg.SeenBytes == nil || !strings.HasPrefix(string(v), "c1-") {
		return
	}
	if s.cfg.SeenBytes.Touch(v) {
		return // kept already (content-addressed): no second read
	}
	text, info, err := readCurrent(ctx, s.fs, t)
	if err != nil || info.Version != v || info.Size > int64(seen.MaxFileBytes) {
		return
	}
	if _, err := s.cfg.SeenBytes.Put(v, []byte(text)); err != nil {
		s.log.Warn("keep seen bytes", "path", t.DisplayPath, "err", err)
	}
}

// readCurrent reads the bytes of t in fsys and the version of exactly
// those bytes.
func readCurrent(ctx context.Context, fsys provider.FileSystem, t provider.Target) (string, provider.Info, error) {
	if r, ok := fsys.(provider.TextVersionReader); ok {
		return r.ReadTextVersion(ctx, t)
	}
	info, err := fsys.Stat(ctx, t)
	if err != nil || info == nil {
		return "", provider.Info{}, fmt.Errorf("merge: stat %s: %w", t.DisplayPath, err)
	}
	text, err := fsys.ReadText(ctx, t)
	return text, *info, err
}

// mergeRequest is a stale change to re-apply by a three-way merge.
type mergeRequest struct {
	op     policy.MutationOp
	actor  policy.Actor
	target provider.Target
	// expected is the version the caller passed, "" to use the session's
	// observation.
	expected provider.Version
	// change applies the caller's change to the LF text it saw.
	change func(baseLF string) (string, error)
}

// mergeOutcome is a merged change's write and the version it merged over.
type mergeOutcome struct {
	write      provider.WriteOutcome
	mergedOver provider.Version
}

// canMerge reports whether a merge: true change made in sc can be merged
// when stale: the workspace (not a branch) with the merge cache on. Such a
// change is made under policy.Guard.Merge, so its stale refusal is audited
// by mergeStale, once, only when no merge follows.
func (s *Service) canMerge(sc Scope) bool {
	return sc.Workspace() && s.cfg.SeenBytes != nil
}

// mergeStale re-applies a change refused as stale (staleErr) by a
// three-way merge: base = the bytes the caller saw (kept by keepSeen),
// ours = base with the change, theirs = the file now. A clean merge is
// written under the guard at the current version and audited as one entry,
// a merge naming the author of the current bytes; a conflict is
// FS_MERGE_CONFLICT with the conflicted regions and changes nothing, and
// the stale refusal is audited. Without kept bytes (or in a branch)
// staleErr is returned unchanged.
func (s *Service) mergeStale(ctx context.Context, sc Scope, r mergeRequest, staleErr error) (_ mergeOutcome, err error) {
	if !s.canMerge(sc) {
		return mergeOutcome{}, staleErr
	}
	written := false // from the write on, the engine audits what happens
	defer func() {
		if err != nil && !written {
			s.engine.AuditRefusal(r.actor, r.op, r.target, staleErr)
		}
	}()
	baseV := r.expected
	if baseV == "" {
		obs, ok := s.store.Observation(r.actor.Session, r.target.Key)
		if !ok || obs.Kind != policy.ObservedPresent {
			return mergeOutcome{}, staleErr
		}
		baseV = obs.Version
	}
	base, ok := s.cfg.SeenBytes.Get(baseV)
	if !ok {
		return mergeOutcome{}, staleErr
	}
	theirs, info, err := readCurrent(ctx, sc.fs, r.target)
	if err != nil {
		return mergeOutcome{}, staleErr
	}
	if info.Version == baseV {
		return mergeOutcome{}, staleErr // not stale: the refusal had another cause
	}
	baseLF := toLF(string(base))
	oursLF, err := r.change(baseLF)
	if err != nil {
		return mergeOutcome{}, err
	}
	merged, conflicts := mergeTrimmed(baseLF, toLF(oursLF), toLF(theirs))
	if len(conflicts) > 0 {
		return mergeOutcome{}, s.mergeConflict(r.target, conflicts)
	}
	if strings.Contains(theirs, "\r\n") {
		merged = strings.ReplaceAll(merged, "\n", "\r\n")
	}
	g := policy.Guard{
		Version: &provider.VersionGuard{Version: info.Version},
		Detail:  fmt.Sprintf("merge of a stale %s over %s by %s", r.op, info.Version, s.authorOf(r.target)),
	}
	written = true
	out, err := sc.engine.Write(ctx, r.actor, r.target, merged, g)
	if err := s.mutationDone(string(r.op)+" (merge)", r.target, err); err != nil {
		return mergeOutcome{}, err
	}
	return mergeOutcome{write: out, mergedOver: info.Version}, nil
}

// authorOf names the last writer of t as recorded, or "an unrecorded
// writer".
func (s *Service) authorOf(t provider.Target) string {
	rec, ok := s.store.LastWrite(t.Key)
	if !ok {
		return "an unrecorded writer"
	}
	if rec.Actor.Session != "" {
		return "session " + string(rec.Actor.Session)
	}
	return fmt.Sprintf("uid %d (%s)", rec.Actor.UID, rec.Actor.Channel)
}

// mergeConflict is the FS_MERGE_CONFLICT refusal of a merged change, in
// the shape branch.rebase gives.
func (s *Service) mergeConflict(t provider.Target, cs []merge.Conflict) error {
	hunks := make([]ConflictHunk, len(cs))
	for i, c := range cs {
		hunks[i] = ConflictHunk{Path: t.DisplayPath, BaseStart: c.BaseStart, Base: c.Base, Ours: c.Ours, Theirs: c.Theirs}
	}
	msg := fmt.Sprintf("your change to %s conflicts with the change made since you read it (%d region(s)); nothing was changed: read the file again and redo the change", t.DisplayPath, len(cs))
	return &callError{obj: ErrorObject{Code: CodeFilesystem, Message: string(provider.CodeMergeConflict) + ": " + msg,
		Data: &ErrorData{Code: provider.CodeMergeConflict, Message: msg, Conflicts: []string{t.DisplayPath}, ConflictHunks: hunks}}}
}

// toLF turns CRLF line ends into LF, as edits see a file.
func toLF(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// applyEdit applies a literal edit to LF text as the backend does: the old
// string must occur once (or ReplaceAll).
func applyEdit(t provider.Target, lf string, req provider.EditRequest) (string, error) {
	oldLF, newLF := toLF(req.OldString), toLF(req.NewString)
	i := strings.Index(lf, oldLF)
	switch {
	case i < 0:
		return "", provider.NewError(provider.CodeEditNotFound, "edit", t.DisplayPath, nil,
			"the text to replace was not found in the version you read; read the file again and copy the exact text")
	case req.ReplaceAll:
		return strings.ReplaceAll(lf, oldLF, newLF), nil
	}
	rest := lf[i+len(oldLF):] // one pass over the text when the edit is unique
	if strings.Contains(rest, oldLF) {
		return "", provider.NewError(provider.CodeAmbiguousEdit, "edit", t.DisplayPath, nil,
			"the text to replace occurs %d times in the version you read; add surrounding lines to make it unique, or replace all", 1+strings.Count(rest, oldLF))
	}
	return lf[:i] + newLF + rest, nil
}

// mergeTrimmed merges the three LF texts after setting aside the whole
// lines at the start and at the end that all three share, as git's xdiff
// trims a pair's common ends before diffing: a small change in a large
// file then costs the size of the changed middle, not of the file.
// Conflicts' BaseStart count from the whole base.
func mergeTrimmed(base, ours, theirs string) (string, []merge.Conflict) {
	head := commonHead(base, ours, theirs)
	b, o, t := base[head:], ours[head:], theirs[head:]
	tail := commonTail(b, o, t)
	res := merge.Merge(readOnlyBytes(b[:len(b)-tail]), readOnlyBytes(o[:len(o)-tail]), readOnlyBytes(t[:len(t)-tail]),
		merge.Options{OursLabel: "ours", TheirsLabel: "theirs"})
	if !res.Clean() {
		skipped := strings.Count(base[:head], "\n")
		for i := range res.Conflicts {
			res.Conflicts[i].BaseStart += skipped
		}
		return "", res.Conflicts
	}
	var out strings.Builder // one copy of the merged file
	out.Grow(head + len(res.Text) + tail)
	out.WriteString(base[:head])
	out.Write(res.Text)
	out.WriteString(b[len(b)-tail:])
	return out.String(), nil
}

// readOnlyBytes is s's bytes without a copy, for merge.Merge, which only
// reads its inputs (TestMerge_LeavesItsInputsAlone): nothing may write
// to them.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// commonHead is the length of the longest run of whole lines (each ending
// in a newline) that starts all three texts.
func commonHead(a, b, c string) int {
	n := min(len(a), len(b), len(c))
	end := 0
	for i := 0; i < n && a[i] == b[i] && a[i] == c[i]; i++ {
		if a[i] == '\n' {
			end = i + 1
		}
	}
	return end
}

// commonTail is the length of the longest run of whole lines that ends
// all three texts and starts just after a newline in each (so never a
// whole text, and never a partial line).
func commonTail(a, b, c string) int {
	n := min(len(a), len(b), len(c))
	best := 0
	for k := 1; k <= n; k++ {
		x := a[len(a)-k]
		if x != b[len(b)-k] || x != c[len(c)-k] {
			break
		}
		if k < n || (k < len(a) && k < len(b) && k < len(c)) {
			if a[len(a)-k-1] == '\n' && b[len(b)-k-1] == '\n' && c[len(c)-k-1] == '\n' {
				best = k
			}
		}
	}
	return best
}

// mergePatch merges a stale fs.patch of one update (no move) over the
// current bytes; any other stale patch keeps its FS_STALE_VERSION
// (staleErr).
func (s *Service) mergePatch(ctx context.Context, sc Scope, a policy.Actor, p PatchParams, ops []patch.Operation, staleErr error) (PatchResult, error) {
	u, ok := mergeableUpdate(ops, p)
	if !ok {
		return PatchResult{}, staleErr
	}
	t, err := sc.resolve(ctx, "path", u.Path, p.Cwd)
	if err != nil {
		_ = s.refusedEarly(a, policy.OpPatch, u.Path, err)
		s.auditPreflightRefusal(a, u, staleErr)
		return PatchResult{}, staleErr
	}
	m, err := s.mergeStale(ctx, sc, mergeRequest{op: policy.OpPatch, actor: a, target: t,
		change: func(base string) (string, error) { return applyHunks("patch", t.DisplayPath, base, u.Hunks) }}, staleErr)
	if err != nil {
		return PatchResult{}, err
	}
	return PatchResult{Complete: true, Operations: []PatchOpResult{{Kind: u.OpKind(), Path: t.DisplayPath,
		Status: PatchApplied, Version: m.write.Version, MergedOver: m.mergedOver}}}, nil
}

// mergeableUpdate returns the one update (no move) of a patch that is not
// atomic: the only stale patch merge: true merges.
func mergeableUpdate(ops []patch.Operation, p PatchParams) (*patch.Update, bool) {
	if len(ops) != 1 || p.Atomic {
		return nil, false
	}
	u, ok := ops[0].(*patch.Update)
	return u, ok && u.MoveTo == ""
}

// applyHunks applies patch hunks to LF text; a mismatch is FS_PATCH_MISMATCH.
func applyHunks(op, disp, lf string, hunks []patch.Hunk) (string, error) {
	after, failure := patch.ApplyHunks(lf, hunks)
	if failure != nil {
		return "", provider.NewError(provider.CodePatchMismatch, op, disp, failure,
			"the patch does not match the version you read: %s; read the file again and regenerate the patch", failure.Error())
	}
	return after, nil
}
