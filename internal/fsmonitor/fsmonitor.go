// Package fsmonitor speaks git's core.fsmonitor hook protocol, version 2,
// for a dshmount daemon: it turns an fs.changes answer into the bytes the
// hook prints. It owns the protocol's shape (the token line, NUL-terminated
// worktree-relative paths, a trailing slash for directories, "/" for "assume
// everything changed"), not how the daemon is found nor the socket.
//
// git runs the hook as `HOOK 2 TOKEN` in the root of the worktree, with
// TOKEN the one the previous answer printed (empty the first time), and
// reads: the new token, a NUL, then either "/" NUL (it rescans everything)
// or every path changed since TOKEN, each NUL-terminated. Any path git is
// not told about it trusts to be unchanged, so every doubt is answered "/".
package fsmonitor

import (
	"bytes"
	"sort"
	"strings"

	"github.com/dshmount/dshmount/control"
)

// HookVersion is the hook protocol version this package speaks.
const HookVersion = "2"

// Everything is the answer that makes git rescan the whole worktree.
const Everything = "/"

// NoDaemonToken is the token of an answer given without a daemon (none
// serves the worktree): no daemon vouches for it, so the next answer of
// one is "/" too.
const NoDaemonToken = control.ChangesTokenPrefix + "none"

// Relative maps the workspace-relative path p to a path relative to the
// worktree, itself workspace-relative ("." or "" for the workspace root).
// It reports false for paths outside the worktree and for the worktree
// itself.
func Relative(worktree, p string) (string, bool) {
	if worktree == "" || worktree == "." {
		if p == "" || p == "." {
			return "", false
		}
		return p, true
	}
	rest, ok := strings.CutPrefix(p, worktree+"/")
	if !ok || rest == "" {
		return "", false
	}
	return rest, true
}

// inGitDir reports whether the worktree-relative p is git's own directory
// or below it: git never asks about those, and the daemon's sync cookies
// live there.
func inGitDir(p string) bool { return p == ".git" || strings.HasPrefix(p, ".git/") }

// Paths returns the worktree-relative paths to report for res, or
// everything=true when git must rescan: the daemon could not vouch for the
// token, or the worktree or a directory above it came or went. Each path
// appears once; a directory appears both without and with a trailing slash
// (git invalidates a tracked file of that name with the first, everything
// below it with the second: a renamed directory's files are not listed one
// by one).
func Paths(res *control.ChangesResult, worktree string) (paths []string, everything bool) {
	if res.Everything {
		return nil, true
	}
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	for _, c := range res.Changes {
		rel, ok := Relative(worktree, c.Path)
		if !ok {
			if c.Kind != "modified" && c.Kind != "attrib" && inWorktree(worktree, c.Path) {
				return nil, true // the worktree or a directory above it came or went
			}
			continue
		}
		if inGitDir(rel) {
			continue
		}
		add(rel)
		if c.Dir {
			add(rel + "/")
		}
	}
	sort.Strings(paths)
	return paths, false
}

// inWorktree reports whether the workspace-relative p is the worktree or a
// directory above it.
func inWorktree(worktree, p string) bool {
	if worktree == "" || worktree == "." {
		return p == "" || p == "."
	}
	return p == worktree || strings.HasPrefix(worktree, p+"/") || p == "."
}

// Response is the hook's output for res: its token, a NUL, then every
// changed path of the worktree NUL-terminated, or "/" NUL.
func Response(res *control.ChangesResult, worktree string) []byte {
	var b bytes.Buffer
	b.WriteString(res.Token)
	b.WriteByte(0)
	paths, everything := Paths(res, worktree)
	if everything {
		b.WriteString(Everything)
		b.WriteByte(0)
		return b.Bytes()
	}
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// EverythingResponse is the hook's output when it has a token but nothing
// it can vouch for.
func EverythingResponse(token string) []byte {
	return []byte(token + "\x00" + Everything + "\x00")
}
