package policy

import (
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// GitDirs is the set of git directories inside the workspace that a ".git"
// FILE points to ("gitdir: DIR", written by 'git init --separate-git-dir',
// 'git clone --separate-git-dir', worktrees and submodules): they are
// repositories' git directories as much as a ".git" directory is. The mount
// learns them when a ".git" file is looked up or written (Learn); the
// guard asks Under on every bound change, which costs one atomic load
// while the set is empty. It is safe for concurrent use.
type GitDirs struct {
	roots []string // absolute directories the workspace is seen at (mounts, the source)
	n     atomic.Int32
	mu    sync.RWMutex
	dirs  map[string]bool // workspace-relative, cleaned
}

// NewGitDirs returns an empty set; roots are the absolute directories the
// workspace is seen at (its mounts and its source directory), against
// which an absolute "gitdir:" is made workspace-relative.
func NewGitDirs(roots ...string) *GitDirs {
	g := &GitDirs{dirs: make(map[string]bool)}
	for _, r := range roots {
		if r == "" {
			continue
		}
		if abs, err := filepath.Abs(r); err == nil {
			g.roots = append(g.roots, abs)
		}
	}
	return g
}

// Learn reads the content of the ".git" file at the workspace-relative
// path dotGit and adds the git directory it points to, when that is inside
// the workspace; it reports whether it added one. Content that is not a
// "gitdir:" line and git directories outside the workspace are ignored.
func (g *GitDirs) Learn(dotGit string, content []byte) bool {
	if g == nil || path.Base(dotGit) != ".git" {
		return false
	}
	line, _, _ := strings.Cut(string(content), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
	if !ok {
		return false
	}
	rel, ok := g.relative(path.Dir(dotGit), strings.TrimSpace(target))
	if !ok {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dirs[rel] {
		return false
	}
	g.dirs[rel] = true
	g.n.Store(int32(len(g.dirs)))
	return true
}

// relative makes target, as written in a ".git" file of the
// workspace-relative directory dir, workspace-relative (false: outside the
// workspace, or the workspace's root itself).
func (g *GitDirs) relative(dir, target string) (string, bool) {
	if target == "" {
		return "", false
	}
	var rel string
	if filepath.IsAbs(target) {
		target = filepath.Clean(target)
		found := false
		for _, root := range g.roots {
			if r, err := filepath.Rel(root, target); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				rel, found = r, true
				break
			}
		}
		if !found {
			return "", false
		}
	} else {
		rel = path.Join(dir, filepath.ToSlash(target))
	}
	rel = path.Clean(rel)
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// Under reports whether the workspace-relative rel is inside a learned git
// directory, and rel's path inside it.
func (g *GitDirs) Under(rel string) (string, bool) {
	if g == nil || g.n.Load() == 0 {
		return "", false
	}
	rel = strings.Trim(rel, "/")
	g.mu.RLock()
	defer g.mu.RUnlock()
	for i := len(rel) - 1; i > 0; i-- {
		if rel[i] == '/' && g.dirs[rel[:i]] {
			return rel[i+1:], true
		}
	}
	return "", false
}

// List returns the learned git directories, workspace-relative.
func (g *GitDirs) List() []string {
	if g == nil {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.dirs))
	for d := range g.dirs {
		out = append(out, d)
	}
	return out
}
