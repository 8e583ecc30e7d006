package policy

import (
	"context"
	"iter"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// fakeFS is a small in-memory provider.FileSystem with a mutex and a
// version counter, honouring the guard contract of the provider seam. The
// engine tests use it to control failures (a source that cannot be
// removed); the race test runs over provider/local.
type fakeFS struct {
	mu                sync.Mutex
	next              int
	files             map[provider.Key]*fakeFile
	failSourceRemoval bool
}

type fakeFile struct {
	content string
	version provider.Version
}

var _ provider.FileSystem = (*fakeFS)(nil)

func newFakeFS() *fakeFS { return &fakeFS{files: make(map[provider.Key]*fakeFile)} }

func (f *fakeFS) target(p string) provider.Target {
	p = path.Clean(p)
	return provider.Target{Key: provider.Key("/ws/" + p), DisplayPath: p}
}

// put sets content out of band (as another program would), with a new version.
func (f *fakeFS) put(t provider.Target, content string) provider.Version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.publish(t, content)
}

func (f *fakeFS) content(t provider.Target) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[t.Key]
	if !ok {
		return "", false
	}
	return file.content, true
}

func (f *fakeFS) publish(t provider.Target, content string) provider.Version {
	f.next++
	v := provider.Version("v" + strconv.Itoa(f.next))
	f.files[t.Key] = &fakeFile{content: content, version: v}
	return v
}

func (f *fakeFS) Resolve(_ context.Context, p string, _ provider.ResolveOptions) (provider.Target, error) {
	return f.target(p), nil
}

func (f *fakeFS) Lstat(ctx context.Context, p string, opts provider.ResolveOptions) (*provider.PathInfo, error) {
	info, err := f.Stat(ctx, f.target(p))
	if info == nil || err != nil {
		return nil, err
	}
	return &provider.PathInfo{Version: info.Version, Type: info.Type, Size: info.Size}, nil
}

func (f *fakeFS) Stat(_ context.Context, t provider.Target) (*provider.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[t.Key]
	if !ok {
		return nil, nil
	}
	return &provider.Info{Version: file.version, Type: provider.TypeFile, Size: int64(len(file.content))}, nil
}

func (f *fakeFS) ReadText(_ context.Context, t provider.Target) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[t.Key]
	if !ok {
		return "", provider.NewError(provider.CodeNotFound, "read", t.DisplayPath, nil, "no such file")
	}
	return file.content, nil
}

func (f *fakeFS) StreamText(ctx context.Context, t provider.Target) (iter.Seq2[string, error], error) {
	text, err := f.ReadText(ctx, t)
	if err != nil {
		return nil, err
	}
	return func(yield func(string, error) bool) { yield(text, nil) }, nil
}

func (f *fakeFS) ReadBytes(ctx context.Context, t provider.Target, _ int64) ([]byte, error) {
	text, err := f.ReadText(ctx, t)
	return []byte(text), err
}

func (f *fakeFS) ReadByteRange(ctx context.Context, t provider.Target, _ provider.ByteRange) ([]byte, error) {
	return f.ReadBytes(ctx, t, 0)
}

func (f *fakeFS) ListDir(context.Context, provider.Target) ([]provider.DirEntry, error) {
	return nil, provider.NewError(provider.CodeNotDirectory, "list", "", nil, "the fake has no directories")
}

// checkWrite applies the write-intent contract; the caller holds f.mu.
func (f *fakeFS) checkWrite(op string, t provider.Target, expected *provider.WriteIntent) error {
	file, exists := f.files[t.Key]
	switch {
	case expected == nil:
		return nil
	case expected.Kind == provider.CreateIfAbsent && exists:
		return provider.NewError(provider.CodeNotObserved, op, t.DisplayPath, nil, "exists")
	case expected.Kind == provider.ReplaceIfVersion && (!exists || file.version != expected.Version):
		return provider.NewError(provider.CodeStaleVersion, op, t.DisplayPath, nil, "stale")
	}
	return nil
}

// checkVersion applies the version-guard contract; the caller holds f.mu.
func (f *fakeFS) checkVersion(op string, t provider.Target, expected *provider.VersionGuard) (*fakeFile, error) {
	file, exists := f.files[t.Key]
	if !exists || (expected != nil && file.version != expected.Version) {
		return nil, provider.NewError(provider.CodeStaleVersion, op, t.DisplayPath, nil, "stale")
	}
	return file, nil
}

func (f *fakeFS) WriteText(_ context.Context, t provider.Target, content string, expected *provider.WriteIntent) (provider.WriteOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkWrite("write", t, expected); err != nil {
		return provider.WriteOutcome{}, err
	}
	out := provider.WriteOutcome{Operation: provider.OpCreate, After: content}
	if old, ok := f.files[t.Key]; ok {
		before := old.content
		out.Operation, out.Before = provider.OpUpdate, &before
	}
	out.Version = f.publish(t, content)
	return out, nil
}

func (f *fakeFS) EditText(_ context.Context, t provider.Target, edit provider.EditRequest, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := f.checkVersion("edit", t, expected)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	switch n := strings.Count(file.content, edit.OldString); {
	case n == 0:
		return provider.EditOutcome{}, provider.NewError(provider.CodeEditNotFound, "edit", t.DisplayPath, nil, "not found")
	case n > 1 && !edit.ReplaceAll:
		return provider.EditOutcome{}, provider.NewError(provider.CodeAmbiguousEdit, "edit", t.DisplayPath, nil, "ambiguous")
	}
	before := file.content
	after := strings.ReplaceAll(before, edit.OldString, edit.NewString)
	return provider.EditOutcome{Version: f.publish(t, after), Before: before, After: after}, nil
}

// PatchText replaces each hunk's old lines by its new lines (enough for the
// engine tests; the real applier is patch.ApplyHunks).
func (f *fakeFS) PatchText(_ context.Context, t provider.Target, hunks []patch.Hunk, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := f.checkVersion("patch", t, expected)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	after := file.content
	for _, h := range hunks {
		old := strings.Join(h.OldLines, "\n") + "\n"
		if !strings.Contains(after, old) {
			return provider.EditOutcome{}, provider.NewError(provider.CodePatchMismatch, "patch", t.DisplayPath, nil, "mismatch")
		}
		after = strings.Replace(after, old, strings.Join(h.NewLines, "\n")+"\n", 1)
	}
	before := file.content
	return provider.EditOutcome{Version: f.publish(t, after), Before: before, After: after}, nil
}

func (f *fakeFS) DeleteFile(_ context.Context, t provider.Target, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := f.checkVersion("delete", t, expected)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	delete(f.files, t.Key)
	before := file.content
	return provider.DeleteOutcome{Before: &before}, nil
}

func (f *fakeFS) MoveFile(_ context.Context, src, dst provider.Target, opts provider.MoveOptions) (provider.MoveOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if src.Key == dst.Key {
		return provider.MoveOutcome{}, provider.NewError(provider.CodeSameTarget, "move", src.DisplayPath, nil, "same")
	}
	file, err := f.checkVersion("move", src, opts.ExpectedSource)
	if err != nil {
		return provider.MoveOutcome{}, err
	}
	if err := f.checkWrite("move", dst, opts.ExpectedDestination); err != nil {
		return provider.MoveOutcome{}, err
	}
	before := file.content
	out := provider.MoveOutcome{SourceBefore: &before}
	out.Destination = provider.WriteOutcome{Operation: provider.OpCreate, After: before}
	out.Destination.Version = f.publish(dst, before)
	if f.failSourceRemoval {
		out.SourceFailure = &provider.SourceFailure{Code: provider.CodePermissionDenied, Message: "source directory is read-only"}
		return out, nil
	}
	delete(f.files, src.Key)
	out.SourceDeleted = true
	return out, nil
}

func (f *fakeFS) ProcessPath(t provider.Target) string { return string(t.Key) }

func (f *fakeFS) ProcessPathFromHostPath(string) (string, bool) { return "", false }

func (f *fakeFS) FileURL(t provider.Target) string { return "file://" + string(t.Key) }

func (f *fakeFS) Contains(parent, child provider.Target) bool {
	return strings.HasPrefix(string(child.Key), string(parent.Key))
}
