package branch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/patch"
	"github.com/dshmount/dshmount/provider"
	"github.com/dshmount/dshmount/provider/local"
)

// Lower is the workspace a branch lies over: the host-disk backend
// (local.FS implements it).
type Lower interface {
	provider.FileSystem
	// Root is the workspace's absolute root directory.
	Root() string
	// Lock takes the per-target mutation locks of keys (distinct, in the
	// order given).
	Lock(ctx context.Context, keys ...provider.Key) (func(), error)
	// TargetForRel is the target of a clean workspace-relative path.
	TargetForRel(rel string) provider.Target
}

// maxCopyUp bounds the size of a file a branch copies up.
const maxCopyUp = 1 << 30

// Branch is one named copy-on-write layer; a provider.FileSystem whose
// targets are namespaced by the branch. It is safe for concurrent use:
// mutations of one branch are serialised, reads run alongside.
type Branch struct {
	name    string
	dir     string
	created time.Time
	lower   Lower
	upper   *local.FS // rooted at dir/upper
	prefix  string    // key namespace, "branch/NAME/"

	mu      sync.RWMutex
	entries map[string]*entry
	log     *changeLog
	closed  bool

	versMu sync.Mutex
	vers   map[string]provider.Version // upper files' versions, once known
}

var (
	_ provider.FileSystem        = (*Branch)(nil)
	_ provider.TextVersionReader = (*Branch)(nil)
)

// Name returns the branch's name.
func (b *Branch) Name() string { return b.name }

// Created returns when the branch was made.
func (b *Branch) Created() time.Time { return b.created }

// Root returns the workspace root: absolute paths under it name the same
// relative paths in the branch.
func (b *Branch) Root() string { return b.lower.Root() }

// Changed returns how many paths the branch changed.
func (b *Branch) Changed() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for _, e := range b.entries {
		if e.Kind == kindDir && e.Base == BaseAbsent {
			continue // a parent made for a new file
		}
		n++
	}
	return n
}

// IsKey reports whether k is a target key of some branch (not of the
// workspace).
func IsKey(k provider.Key) bool { return strings.HasPrefix(string(k), keyNamespace) }

// NameOfKey returns the branch a target key belongs to ("" for a
// workspace key).
func NameOfKey(k provider.Key) string {
	rest, ok := strings.CutPrefix(string(k), keyNamespace)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// keyNamespace starts every branch key; workspace keys are absolute paths.
const keyNamespace = "branch/"

// target returns the branch target of rel.
func (b *Branch) target(rel string) provider.Target {
	return provider.Target{Key: provider.Key(b.prefix + rel), DisplayPath: rel}
}

// rel returns the workspace-relative path of one of this branch's targets.
func (b *Branch) rel(op string, t provider.Target) (string, error) {
	rel, ok := strings.CutPrefix(string(t.Key), b.prefix)
	if !ok || rel == "" || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", provider.NewError(provider.CodeSandboxDenied, op, t.DisplayPath, nil,
			"%s is not a path of branch %s; resolve it in this branch", t.DisplayPath, b.name)
	}
	return rel, nil
}

// usable fails once the branch was committed or discarded.
func (b *Branch) usable(op, p string) error {
	if b.closed {
		return provider.NewError(provider.CodeNotFound, op, p, nil,
			"branch %s no longer exists (committed or discarded); create it again", b.name)
	}
	return nil
}

// notFound is the error of a path the branch does not have.
func (b *Branch) notFound(op, rel string) error {
	return provider.NewError(provider.CodeNotFound, op, rel, nil,
		"no such file in branch %s; check the path, or write it to create it", b.name)
}

// lexicalRel maps a path argument to a workspace-relative path without I/O.
func (b *Branch) lexicalRel(p string, opts provider.ResolveOptions) (string, bool) {
	if strings.HasPrefix(p, "/") {
		root := filepath.Clean(b.lower.Root())
		c := path.Clean(p)
		if c == root {
			return ".", true
		}
		rest, ok := strings.CutPrefix(c, strings.TrimSuffix(root, "/")+"/")
		return rest, ok
	}
	cwd := opts.Cwd
	if strings.HasPrefix(cwd, "/") {
		r, ok := b.lexicalRel(cwd, provider.ResolveOptions{})
		if !ok {
			return "", false
		}
		cwd = r
	}
	c := path.Clean(path.Join(cwd, p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// Resolve implements provider.FileSystem. A path the branch changed (or a
// path below one) resolves lexically; others resolve in the workspace, so
// two paths to one workspace file give one target.
func (b *Branch) Resolve(ctx context.Context, p string, opts provider.ResolveOptions) (provider.Target, error) {
	if strings.ContainsRune(p, 0) {
		return provider.Target{}, provider.NewError(provider.CodeSandboxDenied, "resolve", p, nil, "a path cannot contain a NUL byte")
	}
	if rel, ok := b.lexicalRel(p, opts); ok {
		b.mu.RLock()
		e, _ := lookup(b.entries, rel)
		if e == nil {
			e = b.anyEntryAbove(rel)
		}
		b.mu.RUnlock()
		if e != nil {
			return b.target(rel), nil
		}
	}
	t, err := b.lower.Resolve(ctx, p, opts)
	if err != nil {
		return t, err
	}
	return b.target(t.DisplayPath), nil
}

// anyEntryAbove returns an entry of rel's ancestors (opaque or not); b.mu
// is held.
func (b *Branch) anyEntryAbove(rel string) *entry {
	for p := rel; p != "." && p != "" && p != "/"; {
		p = path.Dir(p)
		if e, ok := b.entries[p]; ok {
			return e
		}
	}
	return nil
}

// Lstat implements provider.FileSystem.
func (b *Branch) Lstat(ctx context.Context, p string, opts provider.ResolveOptions) (*provider.PathInfo, error) {
	if rel, ok := b.lexicalRel(p, opts); ok {
		b.mu.RLock()
		e, _ := lookup(b.entries, rel)
		b.mu.RUnlock()
		if e == nil {
			return b.lower.Lstat(ctx, p, opts)
		}
	}
	t, err := b.Resolve(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	info, err := b.Stat(ctx, t)
	if err != nil || info == nil {
		return nil, err
	}
	if info.Type == provider.TypeOther && strings.HasPrefix(string(info.Version), "link:") {
		return &provider.PathInfo{Version: info.Version, Type: provider.TypeSymlink}, nil
	}
	return &provider.PathInfo{Version: info.Version, Type: info.Type, Size: info.Size}, nil
}

// where tells where rel lives in the branch.
type where int

const (
	inLower   where = iota // the workspace decides
	inUpper                // the branch's own file
	inDir                  // a directory the branch made
	inLink                 // a symbolic link the branch made
	inNowhere              // deleted, or below a deleted or replaced path
)

// locate decides where rel lives; b.mu is held.
func (b *Branch) locate(rel string) where {
	e, own := lookup(b.entries, rel)
	switch {
	case e == nil:
		return inLower
	case !own:
		return inNowhere
	case e.Kind == kindFile:
		return inUpper
	case e.Kind == kindDir:
		return inDir
	case e.Kind == kindSymlink:
		return inLink
	}
	return inNowhere
}

// Stat implements provider.FileSystem.
func (b *Branch) Stat(ctx context.Context, t provider.Target) (*provider.Info, error) {
	rel, err := b.rel("stat", t)
	if err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable("stat", rel); err != nil {
		return nil, err
	}
	switch b.locate(rel) {
	case inUpper:
		return b.upper.Stat(ctx, b.upper.TargetForRel(rel))
	case inDir:
		return &provider.Info{Type: provider.TypeDirectory}, nil
	case inLink:
		return &provider.Info{Type: provider.TypeOther, Version: linkVersion(b.entries[rel].Link)}, nil
	case inNowhere:
		return nil, nil
	}
	return b.lower.Stat(ctx, b.lower.TargetForRel(rel))
}

// readFS returns the filesystem and its target that serve reads of t.
func (b *Branch) readFS(op string, t provider.Target) (provider.FileSystem, provider.Target, func(), error) {
	rel, err := b.rel(op, t)
	if err != nil {
		return nil, provider.Target{}, nil, err
	}
	b.mu.RLock()
	if err := b.usable(op, rel); err != nil {
		b.mu.RUnlock()
		return nil, provider.Target{}, nil, err
	}
	switch b.locate(rel) {
	case inUpper:
		return b.upper, b.upper.TargetForRel(rel), b.mu.RUnlock, nil
	case inLower:
		return b.lower, b.lower.TargetForRel(rel), b.mu.RUnlock, nil
	case inDir:
		b.mu.RUnlock()
		return nil, provider.Target{}, nil, provider.NewError(provider.CodeNotRegularFile, op, rel, nil,
			"%s is a directory, not a regular file", rel)
	case inLink:
		b.mu.RUnlock()
		return nil, provider.Target{}, nil, provider.NewError(provider.CodeNotRegularFile, op, rel, nil,
			"%s is a symbolic link this branch made (to %s); use its target's path", rel, b.entriesLink(rel))
	}
	b.mu.RUnlock()
	return nil, provider.Target{}, nil, b.notFound(op, rel)
}

// ReadText implements provider.FileSystem.
func (b *Branch) ReadText(ctx context.Context, t provider.Target) (string, error) {
	fsys, ft, done, err := b.readFS("read", t)
	if err != nil {
		return "", err
	}
	defer done()
	return fsys.ReadText(ctx, ft)
}

// ReadTextVersion implements provider.TextVersionReader.
func (b *Branch) ReadTextVersion(ctx context.Context, t provider.Target) (string, provider.Info, error) {
	fsys, ft, done, err := b.readFS("read", t)
	if err != nil {
		return "", provider.Info{}, err
	}
	defer done()
	if r, ok := fsys.(provider.TextVersionReader); ok {
		return r.ReadTextVersion(ctx, ft)
	}
	info, err := fsys.Stat(ctx, ft)
	if err != nil || info == nil {
		return "", provider.Info{}, errors.Join(err, b.notFound("read", t.DisplayPath))
	}
	text, err := fsys.ReadText(ctx, ft)
	return text, *info, err
}

// StreamText implements provider.FileSystem.
func (b *Branch) StreamText(ctx context.Context, t provider.Target) (iter.Seq2[string, error], error) {
	fsys, ft, done, err := b.readFS("read", t)
	if err != nil {
		return nil, err
	}
	defer done()
	return fsys.StreamText(ctx, ft)
}

// ReadBytes implements provider.FileSystem.
func (b *Branch) ReadBytes(ctx context.Context, t provider.Target, maxBytes int64) ([]byte, error) {
	fsys, ft, done, err := b.readFS("readBytes", t)
	if err != nil {
		return nil, err
	}
	defer done()
	return fsys.ReadBytes(ctx, ft, maxBytes)
}

// ReadByteRange implements provider.FileSystem.
func (b *Branch) ReadByteRange(ctx context.Context, t provider.Target, r provider.ByteRange) ([]byte, error) {
	fsys, ft, done, err := b.readFS("readBytes", t)
	if err != nil {
		return nil, err
	}
	defer done()
	return fsys.ReadByteRange(ctx, ft, r)
}

// ListDir implements provider.FileSystem: the workspace's children (unless
// the branch replaced the directory) merged with the branch's own.
func (b *Branch) ListDir(ctx context.Context, t provider.Target) ([]provider.DirEntry, error) {
	rel, err := b.rel("list", t)
	if err != nil {
		return nil, err
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable("list", rel); err != nil {
		return nil, err
	}
	var lower []provider.DirEntry
	switch b.locate(rel) {
	case inNowhere:
		return nil, b.notFound("list", rel)
	case inUpper, inLink:
		return nil, provider.NewError(provider.CodeNotDirectory, "list", rel, nil, "%s is not a directory", rel)
	case inLower:
		lower, err = b.lower.ListDir(ctx, b.lower.TargetForRel(rel))
		if err != nil {
			return nil, err
		}
	case inDir:
		if e := b.entries[rel]; e.Base == BaseAbsent {
			if l, lerr := b.lower.ListDir(ctx, b.lower.TargetForRel(rel)); lerr == nil {
				lower = l
			}
		}
	}
	byName := map[string]provider.DirEntry{}
	for _, de := range lower {
		child := joinRel(rel, de.Name)
		de.Target = b.target(child)
		byName[de.Name] = de
	}
	for p, e := range b.entries {
		if p == rel || path.Dir(p) != rel && !(rel == "." && !strings.Contains(p, "/")) {
			continue
		}
		name := path.Base(p)
		switch e.Kind {
		case kindDeleted:
			delete(byName, name)
		case kindDir:
			byName[name] = provider.DirEntry{Name: name, Type: provider.TypeDirectory, Target: b.target(p)}
		case kindSymlink:
			byName[name] = provider.DirEntry{Name: name, Type: provider.TypeOther, Target: b.target(p), Version: linkVersion(e.Link)}
		case kindFile:
			de := provider.DirEntry{Name: name, Type: provider.TypeFile, Target: b.target(p)}
			if info, ierr := b.upper.Stat(ctx, b.upper.TargetForRel(p)); ierr == nil && info != nil {
				de.Version, de.Size = info.Version, info.Size
			}
			byName[name] = de
		}
	}
	out := make([]provider.DirEntry, 0, len(byName))
	for _, de := range byName {
		out = append(out, de)
	}
	sortEntries(out)
	return out, nil
}

// joinRel joins a workspace-relative directory and a name.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// Watch implements provider.FileSystem; branches cannot be watched yet.
func (b *Branch) Watch(_ context.Context, t provider.Target, _ func(err error)) (io.Closer, error) {
	return nil, provider.NewError(provider.CodeInvalidArgument, "watch", t.DisplayPath, nil,
		"watching a path of a branch is not supported yet; watch the workspace, or poll branch.diff")
}

// ProcessPath implements provider.FileSystem: the branch's own file, else
// the workspace's.
func (b *Branch) ProcessPath(t provider.Target) string {
	rel, err := b.rel("path", t)
	if err != nil {
		return ""
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.locate(rel) == inUpper {
		return b.upper.ProcessPath(b.upper.TargetForRel(rel))
	}
	return b.lower.ProcessPath(b.lower.TargetForRel(rel))
}

// ProcessPathFromHostPath implements provider.FileSystem.
func (b *Branch) ProcessPathFromHostPath(hostPath string) (string, bool) {
	return b.lower.ProcessPathFromHostPath(hostPath)
}

// FileURL implements provider.FileSystem.
func (b *Branch) FileURL(t provider.Target) string {
	return "file://" + b.ProcessPath(t)
}

// Contains implements provider.FileSystem.
func (b *Branch) Contains(parent, child provider.Target) bool {
	pr, err1 := b.rel("contains", parent)
	cr, err2 := b.rel("contains", child)
	if err1 != nil || err2 != nil {
		return false
	}
	return pr == cr || pr == "." || strings.HasPrefix(cr, pr+"/")
}

// ---- mutations ----

// copyUp makes rel's upper file hold the workspace bytes when the branch
// has not changed rel yet, and returns the records a successful change of
// rel must append (its parents and itself, kind file) and an undo for a
// failed change. b.mu is held for writing.
func (b *Branch) copyUp(ctx context.Context, op, rel string) (pending []*entry, undo func(), err error) {
	undo = func() {}
	parents, err := b.parentRecords(ctx, op, rel)
	if err != nil {
		return nil, undo, err
	}
	e, own := lookup(b.entries, rel)
	switch {
	case own && e.Kind == kindFile:
		return parents, undo, nil
	case own && e.Kind == kindDir:
		return nil, undo, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a directory, not a regular file", rel)
	case own: // deleted: a new file over the whiteout keeps the base
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: e.Base}), undo, nil
	case e != nil: // below a deleted or replaced path
		base := BaseAbsent
		if v, ok := e.Manifest[rel]; ok {
			base = v
		}
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: base}), undo, nil
	}
	lt := b.lower.TargetForRel(rel)
	info, err := b.lower.Stat(ctx, lt)
	if err != nil {
		return nil, undo, err
	}
	if info == nil {
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: BaseAbsent}), undo, nil
	}
	if info.Type != provider.TypeFile {
		return nil, undo, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a %s, not a regular file", rel, info.Type)
	}
	data, err := b.lower.ReadBytes(ctx, lt, maxCopyUp)
	if err != nil {
		return nil, undo, err
	}
	mode := os.FileMode(0o644)
	if st, serr := os.Lstat(b.lower.ProcessPath(lt)); serr == nil {
		mode = st.Mode().Perm()
	}
	up := b.upperPath(rel)
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		return nil, undo, provider.NewError(provider.CodeIOError, op, rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	if err := writeFileAtomic(up, data, false); err != nil {
		return nil, undo, provider.NewError(provider.CodeIOError, op, rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	_ = os.Chmod(up, mode)
	undo = func() { _ = os.Remove(up) }
	return append(parents, &entry{Path: rel, Kind: kindFile, Base: local.VersionOfBytes(data)}), undo, nil
}

// parentRecords returns the directory records a new path rel needs: a
// deleted ancestor is made again (keeping its base), an ancestor the
// workspace lacks is made by the branch. b.mu is held for writing.
func (b *Branch) parentRecords(ctx context.Context, op, rel string) ([]*entry, error) {
	var out []*entry
	var chain []string
	for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
		chain = append(chain, p)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		e, own := lookup(b.entries, p)
		switch {
		case own && e.Kind == kindDir:
			continue
		case own && e.Kind == kindFile:
			return nil, provider.NewError(provider.CodeNotDirectory, op, rel, nil, "%s is a file in branch %s, not a directory", p, b.name)
		case own: // deleted
			out = append(out, &entry{Path: p, Kind: kindDir, Base: e.Base, Manifest: e.Manifest})
			continue
		case e != nil: // below a deleted one, made again above
			base := BaseAbsent
			out = append(out, &entry{Path: p, Kind: kindDir, Base: base})
			continue
		}
		info, err := b.lower.Stat(ctx, b.lower.TargetForRel(p))
		if err != nil {
			return nil, err
		}
		if info == nil {
			out = append(out, &entry{Path: p, Kind: kindDir, Base: BaseAbsent})
			continue
		}
		if info.Type != provider.TypeDirectory {
			return nil, provider.NewError(provider.CodeNotDirectory, op, rel, nil, "%s is a %s, not a directory", p, info.Type)
		}
	}
	return out, nil
}

// record appends records and applies them to the in-memory state; b.mu is
// held for writing.
func (b *Branch) record(es ...*entry) error {
	if len(es) == 0 {
		return nil
	}
	if err := b.log.append(es...); err != nil {
		return provider.NewError(provider.CodeIOError, "record", es[0].Path, err, "record the change in branch %s: %v", b.name, err)
	}
	for _, e := range es {
		if e.Kind == "" {
			delete(b.entries, e.Path)
			continue
		}
		if old, ok := b.entries[e.Path]; ok {
			e.Base = old.Base
		}
		b.entries[e.Path] = e
	}
	return nil
}

// upperPath is the host path of rel's upper file.
func (b *Branch) upperPath(rel string) string {
	return filepath.Join(b.dir, "upper", filepath.FromSlash(rel))
}

// mutate runs a change of rel against its upper file.
func (b *Branch) mutate(ctx context.Context, op string, t provider.Target, change func(ut provider.Target) (provider.Version, error)) error {
	rel, err := b.rel(op, t)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(op, rel); err != nil {
		return err
	}
	pending, undo, err := b.copyUp(ctx, op, rel)
	if err != nil {
		return err
	}
	v, err := change(b.upper.TargetForRel(rel))
	if err != nil {
		undo()
		return err
	}
	if err := b.record(pending...); err != nil {
		return err
	}
	b.setVersion(rel, v)
	return nil
}

// setVersion caches the version of rel's upper file ("" forgets it).
func (b *Branch) setVersion(rel string, v provider.Version) {
	b.versMu.Lock()
	defer b.versMu.Unlock()
	if b.vers == nil {
		b.vers = map[string]provider.Version{}
	}
	if v == "" {
		delete(b.vers, rel)
		return
	}
	b.vers[rel] = v
}

// upperVersion returns the version of rel's upper file, hashing it once
// after a restart; b.mu is held.
func (b *Branch) upperVersion(rel string) (provider.Version, error) {
	b.versMu.Lock()
	v, ok := b.vers[rel]
	b.versMu.Unlock()
	if ok {
		return v, nil
	}
	info, err := b.upper.Stat(context.Background(), b.upper.TargetForRel(rel))
	if err != nil || info == nil {
		return "", errors.Join(err, fmt.Errorf("branch %s lost its copy of %s", b.name, rel))
	}
	b.setVersion(rel, info.Version)
	return info.Version, nil
}

// WriteText implements provider.FileSystem: the guard is checked against
// the branch's view of the file.
func (b *Branch) WriteText(ctx context.Context, t provider.Target, content string, expected *provider.WriteIntent) (provider.WriteOutcome, error) {
	var out provider.WriteOutcome
	err := b.mutate(ctx, "write", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.WriteText(ctx, ut, content, expected)
		return out.Version, err
	})
	return out, err
}

// EditText implements provider.FileSystem.
func (b *Branch) EditText(ctx context.Context, t provider.Target, edit provider.EditRequest, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	var out provider.EditOutcome
	err := b.mutate(ctx, "edit", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.EditText(ctx, ut, edit, expected)
		return out.Version, err
	})
	return out, err
}

// PatchText implements provider.FileSystem.
func (b *Branch) PatchText(ctx context.Context, t provider.Target, hunks []patch.Hunk, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	var out provider.EditOutcome
	err := b.mutate(ctx, "patch", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.PatchText(ctx, ut, hunks, expected)
		return out.Version, err
	})
	return out, err
}

// DeleteFile implements provider.FileSystem: the branch records a whiteout.
func (b *Branch) DeleteFile(ctx context.Context, t provider.Target, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	rel, err := b.rel("delete", t)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("delete", rel); err != nil {
		return provider.DeleteOutcome{}, err
	}
	return b.deleteLocked(ctx, "delete", rel, expected)
}

// deleteLocked removes rel from the branch; b.mu is held for writing.
func (b *Branch) deleteLocked(ctx context.Context, op, rel string, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	switch b.locate(rel) {
	case inUpper:
		out, err := b.upper.DeleteFile(ctx, b.upper.TargetForRel(rel), expected)
		if err != nil {
			return out, err
		}
		b.setVersion(rel, "")
		return out, b.record(&entry{Path: rel, Kind: kindDeleted, Base: b.entries[rel].Base})
	case inLower:
		lt := b.lower.TargetForRel(rel)
		info, err := b.lower.Stat(ctx, lt)
		if err != nil {
			return provider.DeleteOutcome{}, err
		}
		if info == nil {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
				"%s does not exist; read the directory again", rel)
		}
		if info.Type != provider.TypeFile {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a %s, not a regular file", rel, info.Type)
		}
		if expected != nil && expected.Version != info.Version {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
				"%s changed since you read it; read it again", rel)
		}
		var out provider.DeleteOutcome
		if text, terr := b.lower.ReadText(ctx, lt); terr == nil && len(text) <= int(local.DefaultMaxBasisBytes) {
			lf := strings.ReplaceAll(text, "\r\n", "\n")
			out.Before = &lf
		}
		return out, b.record(&entry{Path: rel, Kind: kindDeleted, Base: info.Version})
	case inDir:
		return provider.DeleteOutcome{}, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a directory, not a regular file", rel)
	}
	return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
		"%s does not exist in branch %s; read the directory again", rel, b.name)
}

// MoveFile implements provider.FileSystem: the destination is written (from
// the source's text, patched by opts.Hunks) then the source deleted, both in
// the branch; the destination remembers its source for branch.diff.
func (b *Branch) MoveFile(ctx context.Context, src, dst provider.Target, opts provider.MoveOptions) (provider.MoveOutcome, error) {
	var out provider.MoveOutcome
	sr, err := b.rel("move", src)
	if err != nil {
		return out, err
	}
	dr, err := b.rel("move", dst)
	if err != nil {
		return out, err
	}
	if sr == dr {
		return out, provider.NewError(provider.CodeSameTarget, "move", sr, nil, "source and destination are the same file (%s)", sr)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("move", sr); err != nil {
		return out, err
	}
	var fsys provider.FileSystem = b.lower
	ft := b.lower.TargetForRel(sr)
	switch b.locate(sr) {
	case inUpper:
		fsys, ft = b.upper, b.upper.TargetForRel(sr)
	case inLower:
	case inDir:
		return out, provider.NewError(provider.CodeNotRegularFile, "move", sr, nil, "%s is a directory, not a regular file", sr)
	default:
		return out, provider.NewError(provider.CodeStaleVersion, "move", sr, nil, "%s does not exist in branch %s; read the directory again", sr, b.name)
	}
	text, info, err := readTextVersion(ctx, fsys, ft)
	if err != nil {
		return out, err
	}
	if opts.ExpectedSource != nil && opts.ExpectedSource.Version != info.Version {
		return out, provider.NewError(provider.CodeStaleVersion, "move", sr, nil, "%s changed since you read it; read it again", sr)
	}
	lf := strings.ReplaceAll(text, "\r\n", "\n")
	content := text
	if len(opts.Hunks) > 0 {
		after, fail := patch.ApplyHunks(lf, opts.Hunks)
		if fail != nil {
			return out, provider.NewError(provider.CodePatchMismatch, "move", sr, fail, "%s; read the file again and rebuild the hunk", fail.Error())
		}
		content = after
		if strings.Contains(text, "\r\n") {
			content = strings.ReplaceAll(after, "\n", "\r\n")
		}
	}
	pending, undo, err := b.copyUp(ctx, "move", dr)
	if err != nil {
		return out, err
	}
	w, err := b.upper.WriteText(ctx, b.upper.TargetForRel(dr), content, opts.ExpectedDestination)
	if err != nil {
		undo()
		return out, err
	}
	pending[len(pending)-1].From = sr
	if err := b.record(pending...); err != nil {
		return out, err
	}
	b.setVersion(dr, w.Version)
	out.Destination = w
	out.SourceBefore = &lf
	if _, err := b.deleteLocked(ctx, "move", sr, nil); err != nil {
		out.SourceFailure = &provider.SourceFailure{Code: provider.CodeOf(err), Message: provider.MessageOf(err)}
		return out, nil
	}
	out.SourceDeleted = true
	return out, nil
}

// readTextVersion reads text and the version of the same bytes.
func readTextVersion(ctx context.Context, fsys provider.FileSystem, t provider.Target) (string, provider.Info, error) {
	if r, ok := fsys.(provider.TextVersionReader); ok {
		return r.ReadTextVersion(ctx, t)
	}
	info, err := fsys.Stat(ctx, t)
	if err != nil {
		return "", provider.Info{}, err
	}
	if info == nil {
		return "", provider.Info{}, provider.NewError(provider.CodeNotFound, "read", t.DisplayPath, nil, "no such file")
	}
	text, err := fsys.ReadText(ctx, t)
	return text, *info, err
}

// RemoveDir deletes the directory rel and everything below it from the
// branch. The files the branch saw below it are remembered with their
// versions: the commit refuses when the workspace holds anything else
// there by then.
func (b *Branch) RemoveDir(ctx context.Context, rel string) error {
	rel = path.Clean(rel)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("rmdir", rel); err != nil {
		return err
	}
	if rel == "." {
		return provider.NewError(provider.CodeInvalidArgument, "rmdir", rel, nil, "the workspace root cannot be removed")
	}
	w := b.locate(rel)
	if w == inLower {
		info, err := b.lower.Stat(ctx, b.lower.TargetForRel(rel))
		if err != nil {
			return err
		}
		if info == nil {
			return b.notFound("rmdir", rel)
		}
		if info.Type != provider.TypeDirectory {
			return provider.NewError(provider.CodeNotDirectory, "rmdir", rel, nil, "%s is not a directory", rel)
		}
	} else if w != inDir {
		return provider.NewError(provider.CodeNotDirectory, "rmdir", rel, nil, "%s is not a directory in branch %s", rel, b.name)
	}
	manifest := map[string]provider.Version{}
	var records []*entry
	base := BaseDir
	if own, ok := b.entries[rel]; ok {
		base = own.Base
		for p, v := range own.Manifest {
			manifest[p] = v
		}
	}
	// What the branch changed below rel: each change's base joins the
	// manifest (the workspace must still hold it), its record goes.
	for p, e := range b.entries {
		if !isBelow(p, rel) {
			continue
		}
		if e.Kind != kindDir && e.Base != BaseAbsent && e.Base != BaseDir {
			manifest[p] = e.Base
		}
		for k, v := range e.Manifest {
			manifest[k] = v
		}
		records = append(records, &entry{Path: p})
	}
	if w == inLower || (b.entries[rel] != nil && b.entries[rel].Base == BaseAbsent) {
		if err := b.walkLower(ctx, rel, manifest); err != nil {
			return err
		}
	}
	records = append(records, &entry{Path: rel, Kind: kindDeleted, Base: base, Manifest: manifest})
	if err := b.record(records...); err != nil {
		return err
	}
	b.entries[rel].Manifest = manifest // record keeps the first base, not the manifest
	for _, r := range records {
		b.setVersion(r.Path, "")
	}
	_ = os.RemoveAll(b.upperPath(rel))
	return nil
}

// walkLower adds the workspace files below dir that the branch has not
// changed to manifest, with their versions; b.mu is held.
func (b *Branch) walkLower(ctx context.Context, dir string, manifest map[string]provider.Version) error {
	des, err := b.lower.ListDir(ctx, b.lower.TargetForRel(dir))
	if provider.CodeOf(err) == provider.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range des {
		p := joinRel(dir, de.Name)
		if _, own := b.entries[p]; own {
			continue
		}
		host := filepath.Join(b.lower.Root(), filepath.FromSlash(p))
		if st, err := os.Lstat(host); err == nil && st.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			manifest[p] = linkVersion(target)
			continue
		}
		switch de.Type {
		case provider.TypeDirectory:
			if err := b.walkLower(ctx, p, manifest); err != nil {
				return err
			}
		default:
			v := de.Version
			if v == "" {
				if info, serr := b.lower.Stat(ctx, b.lower.TargetForRel(p)); serr == nil && info != nil {
					v = info.Version
				}
			}
			manifest[p] = v
		}
	}
	return nil
}

// removeUpperTree empties the upper directory (after a commit with keep).
func removeUpperTree(dir string) error {
	up := filepath.Join(dir, "upper")
	if err := os.RemoveAll(up); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty %s: %w", up, err)
	}
	return os.MkdirAll(up, 0o755)
}

// entriesLink returns the target of the link entry rel; b.mu is held.
func (b *Branch) entriesLink(rel string) string {
	if e := b.entries[rel]; e != nil {
		return e.Link
	}
	return ""
}
