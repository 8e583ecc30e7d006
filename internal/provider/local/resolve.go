package local

import (
	"context"
	"errors"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
)

// maxSymlinks bounds link expansion during resolution, like the kernel's.
const maxSymlinks = 40

// Resolve turns path into a Target whose Key is the canonical real path. A
// relative path resolves against opts.Cwd (itself relative to the root, or
// absolute inside it); an absolute path must lie under the root or an alias.
// A missing file resolves through its deepest existing canonical parent.
// Anything that leads outside the root, and any path holding a NUL byte, is
// FS_SANDBOX_DENIED.
func (fs *FS) Resolve(ctx context.Context, p string, opts provider.ResolveOptions) (provider.Target, error) {
	rel, err := fs.resolveRel(ctx, "resolve", p, opts, true)
	if err != nil {
		return provider.Target{}, err
	}
	return fs.TargetForRel(rel), nil
}

// TargetForRel returns the target of rel, a clean slash-separated
// workspace-relative path without symbolic link components (what FUSE sees).
// It does no I/O.
func (fs *FS) TargetForRel(rel string) provider.Target {
	if rel == "" || rel == "." {
		return provider.Target{Key: provider.Key(fs.root), DisplayPath: "."}
	}
	return provider.Target{Key: provider.Key(joinAbs(fs.root, rel)), DisplayPath: rel}
}

// joinAbs joins an absolute directory and a clean relative path.
func joinAbs(dir, rel string) string {
	if rel == "." || rel == "" {
		return dir
	}
	if strings.HasSuffix(dir, "/") {
		return dir + rel
	}
	return dir + "/" + rel
}

// relOf returns the workspace-relative path of a target key ("." for the
// root). A key outside the root, or not clean, is FS_SANDBOX_DENIED.
func (fs *FS) relOf(op string, t provider.Target) (string, error) {
	key := string(t.Key)
	if strings.IndexByte(key, 0) >= 0 {
		return "", sandboxDenied(op, t.DisplayPath, nil)
	}
	rel, ok := underPrefix(key, fs.root)
	if !ok || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", sandboxDenied(op, t.DisplayPath, nil)
	}
	return rel, nil
}

// underPrefix reports whether the clean absolute path p is prefix or below it,
// and returns the remainder ("." for prefix itself).
func underPrefix(p, prefix string) (string, bool) {
	if p == prefix {
		return ".", true
	}
	if prefix == "/" {
		if strings.HasPrefix(p, "/") {
			return strings.TrimPrefix(p, "/"), true
		}
		return "", false
	}
	if strings.HasPrefix(p, prefix+"/") {
		return p[len(prefix)+1:], true
	}
	return "", false
}

// components splits a path into its non-empty, non-"." components.
func components(p string) []string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, c := range parts {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// mapAbsolute maps an absolute path onto root-relative components when it
// lies under the root or an alias. The match is made on the raw components
// first, so "dir/.." after the prefix keeps its symbolic-link meaning, then
// on the cleaned path.
func (fs *FS) mapAbsolute(p string) ([]string, bool) {
	raw := components(p)
	for _, prefix := range fs.prefixes {
		pc := components(prefix)
		if len(raw) < len(pc) {
			continue
		}
		match := true
		for i, c := range pc {
			if raw[i] != c {
				match = false
				break
			}
		}
		if match {
			return raw[len(pc):], true
		}
	}
	clean := filepath.Clean(p)
	for _, prefix := range fs.prefixes {
		if rel, ok := underPrefix(clean, prefix); ok {
			return components(rel), true
		}
	}
	return nil, false
}

// resolveRel resolves p into a clean root-relative path. followFinal=false
// keeps a final symbolic link itself (Lstat).
func (fs *FS) resolveRel(ctx context.Context, op, p string, opts provider.ResolveOptions, followFinal bool) (string, error) {
	if err := checkCtx(ctx, op, p); err != nil {
		return "", err
	}
	if strings.IndexByte(p, 0) >= 0 || strings.IndexByte(opts.Cwd, 0) >= 0 {
		return "", provider.NewError(provider.CodeSandboxDenied, op, strings.ReplaceAll(p, "\x00", `\0`), nil,
			"the path contains a NUL byte; use a plain path inside the workspace")
	}
	if p == "" {
		return "", provider.NewError(provider.CodeInvalidArgument, op, p, nil,
			"the path is empty; pass a file path inside the workspace")
	}
	var comps []string
	if strings.HasPrefix(p, "/") {
		c, ok := fs.mapAbsolute(p)
		if !ok {
			return "", provider.NewError(provider.CodeSandboxDenied, op, p, nil,
				"the absolute path is outside the workspace %s; use a path inside it", fs.root)
		}
		comps = c
	} else {
		if strings.HasPrefix(opts.Cwd, "/") {
			c, ok := fs.mapAbsolute(opts.Cwd)
			if !ok {
				return "", provider.NewError(provider.CodeSandboxDenied, op, p, nil,
					"the working directory %s is outside the workspace %s; use one inside it", opts.Cwd, fs.root)
			}
			comps = c
		} else {
			comps = components(opts.Cwd)
		}
		comps = append(comps, components(p)...)
	}
	return fs.walk(op, p, comps, followFinal)
}

// walk resolves comps from the root like realpath(3), component by
// component, refusing any step that leaves the root. Components after the
// first missing one are appended lexically.
//
// Each component is looked at relative to a descriptor of the directory
// reached so far (a walkDir), never as a path from the root: a directory
// swapped for a symbolic link after it was accepted cannot make a later
// component be looked up behind that link, outside the root or in a hidden
// directory. Relative to the root descriptor, too, because the workspace
// may sit so deep that root+path exceeds PATH_MAX while the path inside it
// does not.
func (fs *FS) walk(op, disp string, comps []string, followFinal bool) (string, error) {
	var cur []string // resolved components below the root
	missing := 0     // trailing components of cur that do not exist
	links := 0       // symbolic links expanded, and lookups retried after a swap
	dir := walkDir{fs: fs, fd: fs.rootFD}
	defer dir.close()
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case ".", "":
			continue
		case "..":
			if len(cur) == 0 {
				return "", provider.NewError(provider.CodeSandboxDenied, op, disp, nil,
					"the path climbs above the workspace root with '..'; use a path inside it")
			}
			cur = cur[:len(cur)-1]
			if missing > 0 {
				missing--
			} else {
				dir.invalidate()
			}
			continue
		}
		if missing > 0 {
			cur = append(cur, c)
			missing++
			continue
		}
		next := append(cur[:len(cur):len(cur)], c)
		abs := joinAbs(fs.root, strings.Join(next, "/"))
		dirFD, err := dir.open(cur)
		if err != nil {
			return "", ioFailure(op, disp, err)
		}
		var st unix.Stat_t
		err = retryEINTR0(func() error { return unix.Fstatat(dirFD, c, &st, unix.AT_SYMLINK_NOFOLLOW) })
		switch {
		case errors.Is(err, unix.ENOENT):
			cur = next
			missing = 1
			continue
		case err != nil:
			return "", ioFailure(op, disp, pathErr("lstat", abs, err))
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK || (len(comps) == 0 && !followFinal) {
			if len(comps) == 0 {
				cur = next
				continue
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return "", provider.NewError(provider.CodeNotDirectory, op, disp, unix.ENOTDIR,
					"%s is not a directory; check the path", strings.Join(next, "/"))
			}
			swapped, err := dir.descend(c)
			if err != nil {
				return "", ioFailure(op, disp, pathErr("openat", abs, err))
			}
			if swapped {
				// Replaced since the lstat: look at it again.
				if links++; links > maxSymlinks {
					return "", ioFailure(op, disp, pathErr("resolve", abs, unix.ELOOP))
				}
				comps = append([]string{c}, comps...)
				continue
			}
			cur = next
			if fs.hooks.walked != nil {
				fs.hooks.walked(strings.Join(cur, "/"))
			}
			continue
		}
		links++
		if links > maxSymlinks {
			return "", ioFailure(op, disp, pathErr("resolve", abs, unix.ELOOP))
		}
		target, err := beneath.ReadlinkAt(dirFD, c)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			// No longer a link: swapped since the lstat. Look at the
			// component again (the link count bounds the retries).
			comps = append([]string{c}, comps...)
			continue
		}
		if err != nil {
			return "", ioFailure(op, disp, pathErr("readlink", abs, err))
		}
		if strings.HasPrefix(target, "/") {
			mapped, ok := fs.mapAbsolute(target)
			if !ok {
				return "", provider.NewError(provider.CodeSandboxDenied, op, disp, nil,
					"the path goes through the symbolic link %s to %s, outside the workspace; use a path inside it",
					strings.Join(next, "/"), target)
			}
			cur = cur[:0]
			dir.invalidate()
			comps = append(mapped, comps...)
		} else {
			comps = append(components(target), comps...)
		}
	}
	if len(cur) == 0 {
		return ".", nil
	}
	return strings.Join(cur, "/"), nil
}

// walkDir is the descriptor of the directory a walk has reached: the root
// descriptor, or an O_PATH descriptor it owns. After ".." or a jump to the
// root it is invalid and reopened, through no link, from the root.
type walkDir struct {
	fs    *FS
	fd    int // -1 when invalid
	owned bool
}

// open returns the descriptor of cur, reopening it from the root when
// needed.
func (d *walkDir) open(cur []string) (int, error) {
	if d.fd >= 0 {
		return d.fd, nil
	}
	if len(cur) == 0 {
		d.fd, d.owned = d.fs.rootFD, false
		return d.fd, nil
	}
	fd, err := d.fs.fence.Open(strings.Join(cur, "/"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	d.fd, d.owned = fd, true
	return fd, nil
}

// descend moves to the child directory name of the current one, without
// following a link. swapped reports that name is no longer a directory
// (replaced since it was looked at); the walk then stays where it was.
func (d *walkDir) descend(name string) (swapped bool, err error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	d.close()
	d.fd, d.owned = fd, true
	return false, nil
}

// invalidate drops the current descriptor; open reopens it.
func (d *walkDir) invalidate() {
	d.close()
	d.fd = -1
}

// close releases an owned descriptor.
func (d *walkDir) close() {
	if d.owned && d.fd >= 0 {
		_ = unix.Close(d.fd)
	}
	d.owned = false
}
