// Package overlay owns the workspace view: which workspace paths exist for
// the people and agents using dshmount, and which of them may change. A View
// wraps a provider.FileSystem (the host-disk backend) and applies Rules:
// hidden paths do not exist (every call on them is FS_SANDBOX_DENIED, and
// ListDir leaves them out), read-only paths refuse every mutation. The FUSE
// layer asks View.Access for each path it serves, so the mount and the
// control socket show the same view.
//
// It must not know about FUSE, sockets or the observation policy.
//
// # Branches
//
// The copy-on-write layer lives in overlay/branch: a branch is itself a
// provider.FileSystem (its own target keys, the live workspace below its
// own changes) that a View wraps with the same rules, so the control socket
// serves it unchanged, and the FUSE layer mounts it through its branch
// backend (fuse/branchfs.go), which picks the branch's or the workspace's
// file per path.
package viewrules

import (
	"context"
	"fmt"
	"iter"
	"path"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// View is a provider.FileSystem that applies hide and read-only rules to
// another one. It is safe for concurrent use.
type View struct {
	fs    provider.FileSystem
	rules ruleSet
	orig  Rules
}

var (
	_ provider.FileSystem        = (*View)(nil)
	_ provider.TextVersionReader = (*View)(nil)
	_ provider.TextWindowReader  = (*View)(nil)
)

// rooted is implemented by backends with a host root directory (local.FS);
// View uses it to classify absolute paths.
type rooted interface{ Root() string }

// New wraps fs with rules. A malformed pattern is an error naming the flag
// and the pattern.
func New(fs provider.FileSystem, rules Rules) (*View, error) {
	if fs == nil {
		return nil, fmt.Errorf("overlay: nil FileSystem")
	}
	rs, err := compileRules(rules)
	if err != nil {
		return nil, fmt.Errorf("overlay: %w", err)
	}
	orig := Rules{
		Hide:     append([]string(nil), rules.Hide...),
		ReadOnly: append([]string(nil), rules.ReadOnly...),
	}
	return &View{fs: fs, rules: rs, orig: orig}, nil
}

// Rules returns a copy of the rules the view was built with.
func (v *View) Rules() Rules {
	return Rules{
		Hide:     append([]string(nil), v.orig.Hide...),
		ReadOnly: append([]string(nil), v.orig.ReadOnly...),
	}
}

// Backend returns the wrapped FileSystem.
func (v *View) Backend() provider.FileSystem { return v.fs }

// Access classifies a workspace-relative slash path ("." or "" for the root,
// which is always Visible).
func (v *View) Access(rel string) Access {
	a, _ := v.rules.classify(rel)
	return a
}

// AccessBelow reports the strongest rule that could apply to a path
// strictly below the directory rel (Visible when none): moving or renaming
// that directory would carry such paths out of their rule, so the mount
// refuses it.
func (v *View) AccessBelow(rel string) Access {
	a, _ := v.rules.guardsBelow(rel)
	return a
}

// denyHidden returns FS_SANDBOX_DENIED when rel is hidden.
func (v *View) denyHidden(op, rel string) error {
	a, pat := v.rules.classify(rel)
	if a == Hidden {
		return provider.NewError(provider.CodeSandboxDenied, op, rel, nil,
			"%s is hidden by --hide %s; it is not part of this workspace view", rel, pat)
	}
	return nil
}

// denyMutation returns FS_SANDBOX_DENIED when rel is hidden or read-only.
func (v *View) denyMutation(op, rel string) error {
	a, pat := v.rules.classify(rel)
	switch a {
	case Hidden:
		return provider.NewError(provider.CodeSandboxDenied, op, rel, nil,
			"%s is hidden by --hide %s; it is not part of this workspace view", rel, pat)
	case ReadOnly:
		return provider.NewError(provider.CodeSandboxDenied, op, rel, nil,
			"%s is read-only (--read-only %s); change it outside dshmount or restart without that rule", rel, pat)
	}
	return nil
}

// relOfTarget is the workspace-relative path of a target: its display path,
// which the local backend makes canonical and relative.
func relOfTarget(t provider.Target) string { return t.DisplayPath }

// lexicalRel maps a path argument to a workspace-relative path without
// touching the disk, when that is possible.
func (v *View) lexicalRel(p string, opts provider.ResolveOptions) (string, bool) {
	root := ""
	if r, ok := v.fs.(rooted); ok {
		root = r.Root()
	}
	return LexicalRel(root, p, opts)
}

// LexicalRel maps a path argument to a path relative to the workspace root
// without I/O: an absolute path must lie below root ("" when the root is not
// known: then only relative paths map), a relative one is taken from
// opts.Cwd (itself absolute below root, or relative). ok is false for a path
// leading outside the root.
func LexicalRel(root, p string, opts provider.ResolveOptions) (string, bool) {
	if strings.HasPrefix(p, "/") {
		if root == "" {
			return "", false
		}
		root = path.Clean(root)
		c := path.Clean(p)
		if c == root {
			return ".", true
		}
		if rest, found := strings.CutPrefix(c, strings.TrimSuffix(root, "/")+"/"); found {
			return rest, true
		}
		return "", false
	}
	cwd := opts.Cwd
	if strings.HasPrefix(cwd, "/") {
		rel, ok := LexicalRel(root, cwd, provider.ResolveOptions{})
		if !ok {
			return "", false
		}
		cwd = rel
	}
	c := path.Clean(path.Join(cwd, p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// Resolve implements provider.FileSystem; a hidden result is
// FS_SANDBOX_DENIED.
func (v *View) Resolve(ctx context.Context, p string, opts provider.ResolveOptions) (provider.Target, error) {
	if rel, ok := v.lexicalRel(p, opts); ok {
		if err := v.denyHidden("resolve", rel); err != nil {
			return provider.Target{}, err
		}
	}
	t, err := v.fs.Resolve(ctx, p, opts)
	if err != nil {
		return t, err
	}
	if err := v.denyHidden("resolve", relOfTarget(t)); err != nil {
		return provider.Target{}, err
	}
	return t, nil
}

// Lstat implements provider.FileSystem. Both the path as written and the
// file it resolves to must be visible.
func (v *View) Lstat(ctx context.Context, p string, opts provider.ResolveOptions) (*provider.PathInfo, error) {
	if rel, ok := v.lexicalRel(p, opts); ok {
		if err := v.denyHidden("lstat", rel); err != nil {
			return nil, err
		}
	}
	if t, err := v.fs.Resolve(ctx, p, opts); err == nil {
		if err := v.denyHidden("lstat", relOfTarget(t)); err != nil {
			return nil, err
		}
	}
	return v.fs.Lstat(ctx, p, opts)
}

// Stat implements provider.FileSystem.
func (v *View) Stat(ctx context.Context, t provider.Target) (*provider.Info, error) {
	if err := v.denyHidden("stat", relOfTarget(t)); err != nil {
		return nil, err
	}
	return v.fs.Stat(ctx, t)
}

// ReadText implements provider.FileSystem.
func (v *View) ReadText(ctx context.Context, t provider.Target) (string, error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return "", err
	}
	return v.fs.ReadText(ctx, t)
}

// ReadTextVersion implements provider.TextVersionReader when the backend
// does (the text and the version of the same bytes); otherwise it stats
// then reads, as a backend without it would.
func (v *View) ReadTextVersion(ctx context.Context, t provider.Target) (string, provider.Info, error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return "", provider.Info{}, err
	}
	if r, ok := v.fs.(provider.TextVersionReader); ok {
		return r.ReadTextVersion(ctx, t)
	}
	info, err := v.fs.Stat(ctx, t)
	if err != nil {
		return "", provider.Info{}, err
	}
	if info == nil {
		return "", provider.Info{}, provider.NewError(provider.CodeNotFound, "read", t.DisplayPath, nil,
			"no such file; check the path, or write it to create it")
	}
	text, err := v.fs.ReadText(ctx, t)
	return text, *info, err
}

// ReadTextWindow implements provider.TextWindowReader (streamed when the
// backend is one).
func (v *View) ReadTextWindow(ctx context.Context, t provider.Target, w provider.TextWindow) (provider.WindowedText, provider.Info, error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return provider.WindowedText{}, provider.Info{}, err
	}
	return provider.ReadWindow(ctx, v.fs, t, w)
}

// StreamText implements provider.FileSystem.
func (v *View) StreamText(ctx context.Context, t provider.Target) (iter.Seq2[string, error], error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return nil, err
	}
	return v.fs.StreamText(ctx, t)
}

// ReadBytes implements provider.FileSystem.
func (v *View) ReadBytes(ctx context.Context, t provider.Target, maxBytes int64) ([]byte, error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return nil, err
	}
	return v.fs.ReadBytes(ctx, t, maxBytes)
}

// ReadByteRange implements provider.FileSystem.
func (v *View) ReadByteRange(ctx context.Context, t provider.Target, r provider.ByteRange) ([]byte, error) {
	if err := v.denyHidden("read", relOfTarget(t)); err != nil {
		return nil, err
	}
	return v.fs.ReadByteRange(ctx, t, r)
}

// ListDir implements provider.FileSystem; hidden children are left out.
func (v *View) ListDir(ctx context.Context, t provider.Target) ([]provider.DirEntry, error) {
	dir := relOfTarget(t)
	if err := v.denyHidden("list", dir); err != nil {
		return nil, err
	}
	entries, err := v.fs.ListDir(ctx, t)
	if err != nil {
		return nil, err
	}
	out := entries[:0:0]
	for _, e := range entries {
		rel := relOfTarget(e.Target)
		if rel == "" {
			rel = path.Join(dir, e.Name)
		}
		if v.Access(rel) == Hidden || v.Access(path.Join(dir, e.Name)) == Hidden {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// WriteText implements provider.FileSystem.
func (v *View) WriteText(ctx context.Context, t provider.Target, content string, expected *provider.WriteIntent) (provider.WriteOutcome, error) {
	if err := v.denyMutation("write", relOfTarget(t)); err != nil {
		return provider.WriteOutcome{}, err
	}
	return v.fs.WriteText(ctx, t, content, expected)
}

// EditText implements provider.FileSystem.
func (v *View) EditText(ctx context.Context, t provider.Target, edit provider.EditRequest, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	if err := v.denyMutation("edit", relOfTarget(t)); err != nil {
		return provider.EditOutcome{}, err
	}
	return v.fs.EditText(ctx, t, edit, expected)
}

// PatchText implements provider.FileSystem.
func (v *View) PatchText(ctx context.Context, t provider.Target, hunks []patch.Hunk, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	if err := v.denyMutation("patch", relOfTarget(t)); err != nil {
		return provider.EditOutcome{}, err
	}
	return v.fs.PatchText(ctx, t, hunks, expected)
}

// DeleteFile implements provider.FileSystem.
func (v *View) DeleteFile(ctx context.Context, t provider.Target, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	if err := v.denyMutation("delete", relOfTarget(t)); err != nil {
		return provider.DeleteOutcome{}, err
	}
	return v.fs.DeleteFile(ctx, t, expected)
}

// MoveFile implements provider.FileSystem; both ends must be writable.
func (v *View) MoveFile(ctx context.Context, src, dst provider.Target, opts provider.MoveOptions) (provider.MoveOutcome, error) {
	if err := v.denyMutation("move", relOfTarget(src)); err != nil {
		return provider.MoveOutcome{}, err
	}
	if err := v.denyMutation("move", relOfTarget(dst)); err != nil {
		return provider.MoveOutcome{}, err
	}
	return v.fs.MoveFile(ctx, src, dst, opts)
}

// ProcessPath implements provider.FileSystem.
func (v *View) ProcessPath(t provider.Target) string { return v.fs.ProcessPath(t) }

// ProcessPathFromHostPath implements provider.FileSystem; hidden paths are
// not part of the view.
func (v *View) ProcessPathFromHostPath(hostPath string) (string, bool) {
	if rel, ok := v.lexicalRel(hostPath, provider.ResolveOptions{}); ok && v.Access(rel) == Hidden {
		return "", false
	}
	return v.fs.ProcessPathFromHostPath(hostPath)
}

// FileURL implements provider.FileSystem.
func (v *View) FileURL(t provider.Target) string { return v.fs.FileURL(t) }

// Contains implements provider.FileSystem.
func (v *View) Contains(parent, child provider.Target) bool { return v.fs.Contains(parent, child) }
