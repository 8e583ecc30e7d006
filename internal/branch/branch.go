package branch

import (
	"context"
	"errors"
	"iter"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
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
	// Beneath gives the commit journal its primitive changes on
	// workspace-relative paths: none leaves the root or follows a
	// symbolic link.
	Beneath() *beneath.Root
}

// Upper is the file system of one branch's own files, rooted at the
// branch's upper directory on the host disk (the mount and the commit use
// those files directly; the program gives a local.FS). Publications into
// it need not be fsynced: a file counts only once the branch's change log
// records it.
type Upper interface {
	provider.FileSystem
	// TargetForRel is the target of a clean upper-relative path.
	TargetForRel(rel string) provider.Target
	// Versioner computes the content versions of the upper's files.
	Versioner() *version.Versioner
	// Close releases the upper directory.
	Close() error
}

// OpenUpper opens the Upper rooted at the existing directory dir.
type OpenUpper func(dir string) (Upper, error)

// maxCopyUp bounds the size of a file a branch copies up.
const maxCopyUp = 1 << 30

// Branch is one named copy-on-write layer; a provider.FileSystem whose
// targets are namespaced by the branch. It is safe for concurrent use:
// mutations of one branch are serialised, reads run alongside.
type Branch struct {
	name    string
	dir     string
	created time.Time
	owner   uint32 // uid that created it
	lower   Lower
	upper   Upper  // rooted at dir/upper
	prefix  string // key namespace, "branch/NAME/"

	mu      sync.RWMutex
	entries map[string]*entry
	log     *changeLog
	closed  bool
	mount   string // recorded mount directory (SetMount)

	versMu sync.Mutex
	vers   map[string]provider.Version // upper files' versions, once known
}

var (
	_ provider.FileSystem        = (*Branch)(nil)
	_ provider.TextVersionReader = (*Branch)(nil)
	_ provider.TextWindowReader  = (*Branch)(nil)
)

// Name returns the branch's name.
func (b *Branch) Name() string { return b.name }

// Created returns when the branch was made.
func (b *Branch) Created() time.Time { return b.created }

// Owner returns the uid that created the branch (root for a branch
// recorded before owners were kept).
func (b *Branch) Owner() uint32 { return b.owner }

// Root returns the workspace root: absolute paths under it name the same
// relative paths in the branch.
func (b *Branch) Root() string { return b.lower.Root() }

// Changed returns how many files the branch changed: the files Files
// lists (branch list and branch diff count alike; a renamed file is one, a
// removed directory is each file in it).
func (b *Branch) Changed() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.fileChanges())
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
	return viewrules.LexicalRel(filepath.Clean(b.lower.Root()), p, opts)
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

// ReadTextWindow implements provider.TextWindowReader.
func (b *Branch) ReadTextWindow(ctx context.Context, t provider.Target, w provider.TextWindow) (provider.WindowedText, provider.Info, error) {
	fsys, ft, done, err := b.readFS("read", t)
	if err != nil {
		return provider.WindowedText{}, provider.Info{}, err
	}
	defer done()
	return provider.ReadWindow(ctx, fsys, ft, w)
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
