package local

import (
	"context"
	"net/url"
	"path"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
)

// Lstat returns metadata of the path entry itself, without following a final
// symbolic link; nil with a nil error when the path is absent.
func (fs *FS) Lstat(ctx context.Context, p string, opts provider.ResolveOptions) (*provider.PathInfo, error) {
	rel, err := fs.resolveRel(ctx, "lstat", p, opts, false)
	if err != nil {
		return nil, err
	}
	st, ok, err := fs.fence.StatEntry(rel)
	if err != nil {
		return nil, ioFailure("lstat", p, err)
	}
	if !ok {
		return nil, nil
	}
	ver, err := fs.versionAtRel(rel, &st, false)
	if err != nil {
		return nil, ioFailure("lstat", p, err)
	}
	return &provider.PathInfo{
		Version: ver,
		Type:    pathTypeOf(st.Mode),
		Size:    sizeOf(&st),
	}, nil
}

// ProcessPath returns the canonical absolute path a subprocess can open.
func (fs *FS) ProcessPath(t provider.Target) string { return string(t.Key) }

// ProcessPathFromHostPath maps an absolute host path under the root or an
// alias to the process path of the same file. It reports false for relative
// paths and paths outside the workspace.
func (fs *FS) ProcessPathFromHostPath(hostPath string) (string, bool) {
	if !strings.HasPrefix(hostPath, "/") {
		return "", false
	}
	rel, err := fs.resolveRel(context.Background(), "map", hostPath, provider.ResolveOptions{}, true)
	if err != nil {
		return "", false
	}
	return string(fs.TargetForRel(rel).Key), true
}

// FileURL returns the percent-encoded file:// URI of t.
func (fs *FS) FileURL(t provider.Target) string {
	return (&url.URL{Scheme: "file", Path: string(t.Key)}).String()
}

// Contains reports whether child is parent or a descendant of it.
func (fs *FS) Contains(parent, child provider.Target) bool {
	p, c := string(parent.Key), string(child.Key)
	if p == "" || c == "" {
		return false
	}
	_, ok := underPrefix(path.Clean(c), path.Clean(p))
	return ok
}
