package viewrules

import (
	"context"
	"iter"
	"path"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// fakeFS is an in-memory provider.FileSystem of text files keyed by their
// workspace-relative path; it counts calls that reached it.
type fakeFS struct {
	files map[string]string
	calls int
}

var _ provider.FileSystem = (*fakeFS)(nil)

func newFake(files ...string) *fakeFS {
	f := &fakeFS{files: map[string]string{}}
	for _, p := range files {
		f.files[p] = "content of " + p
	}
	return f
}

func (f *fakeFS) Root() string { return "/ws" }

func (f *fakeFS) target(rel string) provider.Target {
	return provider.Target{Key: provider.Key(path.Join("/ws", rel)), DisplayPath: rel}
}

func (f *fakeFS) Resolve(_ context.Context, p string, opts provider.ResolveOptions) (provider.Target, error) {
	f.calls++
	if path.IsAbs(p) {
		rel := p[len("/ws"):]
		if rel == "" {
			return f.target("."), nil
		}
		return f.target(rel[1:]), nil
	}
	return f.target(path.Join(opts.Cwd, p)), nil
}

func (f *fakeFS) Lstat(ctx context.Context, p string, opts provider.ResolveOptions) (*provider.PathInfo, error) {
	t, _ := f.Resolve(ctx, p, opts)
	if _, ok := f.files[t.DisplayPath]; !ok {
		return nil, nil
	}
	return &provider.PathInfo{Version: "v", Type: provider.TypeFile}, nil
}

func (f *fakeFS) Stat(_ context.Context, t provider.Target) (*provider.Info, error) {
	f.calls++
	if _, ok := f.files[t.DisplayPath]; !ok {
		return nil, nil
	}
	return &provider.Info{Version: "v", Type: provider.TypeFile}, nil
}

func (f *fakeFS) ReadText(_ context.Context, t provider.Target) (string, error) {
	f.calls++
	return f.files[t.DisplayPath], nil
}

func (f *fakeFS) StreamText(_ context.Context, t provider.Target) (iter.Seq2[string, error], error) {
	f.calls++
	s := f.files[t.DisplayPath]
	return func(yield func(string, error) bool) { yield(s, nil) }, nil
}

func (f *fakeFS) ReadBytes(_ context.Context, t provider.Target, _ int64) ([]byte, error) {
	f.calls++
	return []byte(f.files[t.DisplayPath]), nil
}

func (f *fakeFS) ReadByteRange(_ context.Context, t provider.Target, _ provider.ByteRange) ([]byte, error) {
	f.calls++
	return []byte(f.files[t.DisplayPath]), nil
}

func (f *fakeFS) ListDir(_ context.Context, t provider.Target) ([]provider.DirEntry, error) {
	f.calls++
	var out []provider.DirEntry
	for p := range f.files {
		if path.Dir(p) == t.DisplayPath {
			out = append(out, provider.DirEntry{Name: path.Base(p), Type: provider.TypeFile, Target: f.target(p)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeFS) WriteText(_ context.Context, t provider.Target, content string, _ *provider.WriteIntent) (provider.WriteOutcome, error) {
	f.calls++
	f.files[t.DisplayPath] = content
	return provider.WriteOutcome{Operation: provider.OpUpdate, Version: "v2", After: content}, nil
}

func (f *fakeFS) EditText(_ context.Context, t provider.Target, e provider.EditRequest, _ *provider.VersionGuard) (provider.EditOutcome, error) {
	f.calls++
	f.files[t.DisplayPath] = e.NewString
	return provider.EditOutcome{Version: "v2", After: e.NewString}, nil
}

func (f *fakeFS) PatchText(_ context.Context, t provider.Target, _ []patch.Hunk, _ *provider.VersionGuard) (provider.EditOutcome, error) {
	f.calls++
	return provider.EditOutcome{Version: "v2"}, nil
}

func (f *fakeFS) DeleteFile(_ context.Context, t provider.Target, _ *provider.VersionGuard) (provider.DeleteOutcome, error) {
	f.calls++
	delete(f.files, t.DisplayPath)
	return provider.DeleteOutcome{}, nil
}

func (f *fakeFS) MoveFile(_ context.Context, src, dst provider.Target, _ provider.MoveOptions) (provider.MoveOutcome, error) {
	f.calls++
	f.files[dst.DisplayPath] = f.files[src.DisplayPath]
	delete(f.files, src.DisplayPath)
	return provider.MoveOutcome{SourceDeleted: true}, nil
}

func (f *fakeFS) ProcessPath(t provider.Target) string { return string(t.Key) }

func (f *fakeFS) ProcessPathFromHostPath(h string) (string, bool) { return h, true }

func (f *fakeFS) FileURL(t provider.Target) string { return "file://" + string(t.Key) }

func (f *fakeFS) Contains(p, c provider.Target) bool { return true }

func newView(t *testing.T, fake *fakeFS) *View {
	t.Helper()
	v, err := New(fake, Rules{Hide: []string{".git", "*.key"}, ReadOnly: []string{"docs"}})
	require.NoError(t, err)
	return v
}

func TestView_HiddenTargetIsSandboxDeniedOnEveryCall(t *testing.T) {
	ctx := context.Background()
	fake := newFake(".git/config", "a.key", "main.go")
	v := newView(t, fake)
	hidden := fake.target(".git/config")
	calls := map[string]func() error{
		"resolve": func() error { _, err := v.Resolve(ctx, ".git/config", provider.ResolveOptions{}); return err },
		"resolve absolute": func() error {
			_, err := v.Resolve(ctx, "/ws/sub/a.key", provider.ResolveOptions{})
			return err
		},
		"lstat":        func() error { _, err := v.Lstat(ctx, "a.key", provider.ResolveOptions{}); return err },
		"stat":         func() error { _, err := v.Stat(ctx, hidden); return err },
		"read":         func() error { _, err := v.ReadText(ctx, hidden); return err },
		"read+version": func() error { _, _, err := v.ReadTextVersion(ctx, hidden); return err },
		"stream":       func() error { _, err := v.StreamText(ctx, hidden); return err },
		"read bytes":   func() error { _, err := v.ReadBytes(ctx, hidden, 10); return err },
		"read range":   func() error { _, err := v.ReadByteRange(ctx, hidden, provider.ByteRange{Length: 1}); return err },
		"list":         func() error { _, err := v.ListDir(ctx, fake.target(".git")); return err },
		"write":        func() error { _, err := v.WriteText(ctx, hidden, "x", nil); return err },
		"edit": func() error {
			_, err := v.EditText(ctx, hidden, provider.EditRequest{OldString: "a"}, nil)
			return err
		},
		"patch":  func() error { _, err := v.PatchText(ctx, hidden, nil, nil); return err },
		"delete": func() error { _, err := v.DeleteFile(ctx, hidden, nil); return err },
		"move to hidden": func() error {
			_, err := v.MoveFile(ctx, fake.target("main.go"), hidden, provider.MoveOptions{})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			before := len(fake.files)
			err := call()
			require.Error(t, err)
			assert.ErrorIs(t, err, provider.ErrSandboxDenied)
			assert.Contains(t, provider.MessageOf(err), "is hidden by --hide")
			assert.Equal(t, before, len(fake.files), "the backend must not change")
		})
	}
	_, ok := v.ProcessPathFromHostPath("/ws/.git/HEAD")
	assert.False(t, ok)
}

func TestView_ReadOnlyRefusesMutationsOnly(t *testing.T) {
	ctx := context.Background()
	fake := newFake("docs/guide.md", "main.go")
	v := newView(t, fake)
	ro := fake.target("docs/guide.md")

	text, err := v.ReadText(ctx, ro)
	require.NoError(t, err)
	assert.Equal(t, "content of docs/guide.md", text)
	info, err := v.Stat(ctx, ro)
	require.NoError(t, err)
	require.NotNil(t, info)

	mutations := map[string]func() error{
		"write": func() error { _, err := v.WriteText(ctx, ro, "x", nil); return err },
		"edit": func() error {
			_, err := v.EditText(ctx, ro, provider.EditRequest{OldString: "c", NewString: "d"}, nil)
			return err
		},
		"patch":  func() error { _, err := v.PatchText(ctx, ro, nil, nil); return err },
		"delete": func() error { _, err := v.DeleteFile(ctx, ro, nil); return err },
		"move from": func() error {
			_, err := v.MoveFile(ctx, ro, fake.target("x.md"), provider.MoveOptions{})
			return err
		},
		"move into": func() error {
			_, err := v.MoveFile(ctx, fake.target("main.go"), fake.target("docs/main.go"), provider.MoveOptions{})
			return err
		},
	}
	for name, call := range mutations {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Error(t, err)
			assert.ErrorIs(t, err, provider.ErrSandboxDenied)
			assert.Contains(t, provider.MessageOf(err), "is read-only (--read-only docs)")
		})
	}
	assert.Equal(t, "content of docs/guide.md", fake.files["docs/guide.md"])
	assert.Equal(t, "content of main.go", fake.files["main.go"])
}

func TestView_VisiblePathsDelegate(t *testing.T) {
	ctx := context.Background()
	fake := newFake("main.go")
	v := newView(t, fake)
	tg, err := v.Resolve(ctx, "main.go", provider.ResolveOptions{})
	require.NoError(t, err)
	out, err := v.WriteText(ctx, tg, "package main\n", nil)
	require.NoError(t, err)
	assert.Equal(t, provider.Version("v2"), out.Version)
	assert.Equal(t, "package main\n", fake.files["main.go"])
	_, err = v.MoveFile(ctx, tg, fake.target("cmd.go"), provider.MoveOptions{})
	require.NoError(t, err)
	assert.Contains(t, fake.files, "cmd.go")
}

func TestView_ListDirOmitsHiddenChildren(t *testing.T) {
	ctx := context.Background()
	fake := newFake(".git/HEAD", "id.key", "main.go", "docs/guide.md", "sub/x.key", "sub/y.go")
	v := newView(t, fake)
	fake.files[".git"] = "dir"
	fake.files["docs"] = "dir"
	fake.files["sub"] = "dir"

	names := func(dir string) []string {
		entries, err := v.ListDir(ctx, fake.target(dir))
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name)
		}
		return out
	}
	assert.Equal(t, []string{"docs", "main.go", "sub"}, names("."))
	assert.Equal(t, []string{"y.go"}, names("sub"))
}

func TestView_AccessOfRootIsVisible(t *testing.T) {
	v, err := New(newFake(), Rules{Hide: []string{"**"}})
	require.NoError(t, err)
	assert.Equal(t, Visible, v.Access("."))
	assert.Equal(t, Hidden, v.Access("anything"))
}

func TestNew_RejectsBadGlobAndNilFS(t *testing.T) {
	_, err := New(newFake(), Rules{Hide: []string{"[x"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--hide")
	_, err = New(nil, Rules{})
	require.Error(t, err)
}

// versionedFake is a backend that reads text and its version in one step.
type versionedFake struct{ *fakeFS }

func (f versionedFake) ReadTextVersion(_ context.Context, t provider.Target) (string, provider.Info, error) {
	return "one step", provider.Info{Version: "v-of-the-bytes-read", Type: provider.TypeFile}, nil
}

// TestView_ReadTextVersionForwardsToTheBackend: the engine's read observes
// the version of the bytes it returned only if the view passes the
// one-step read through (else it stats, then reads).
func TestView_ReadTextVersionForwardsToTheBackend(t *testing.T) {
	ctx := context.Background()
	fake := newFake("main.go")
	v, err := New(versionedFake{fake}, Rules{})
	require.NoError(t, err)
	text, info, err := v.ReadTextVersion(ctx, fake.target("main.go"))
	require.NoError(t, err)
	assert.Equal(t, "one step", text)
	assert.Equal(t, provider.Version("v-of-the-bytes-read"), info.Version)

	plain := newView(t, fake) // a backend without it: stat, then read
	text, info, err = plain.ReadTextVersion(ctx, fake.target("main.go"))
	require.NoError(t, err)
	assert.Equal(t, "content of main.go", text)
	stat, err := fake.Stat(ctx, fake.target("main.go"))
	require.NoError(t, err)
	assert.Equal(t, stat.Version, info.Version)
	_, _, err = plain.ReadTextVersion(ctx, fake.target("missing.go"))
	assert.ErrorIs(t, err, provider.ErrNotFound)
}
