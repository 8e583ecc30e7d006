package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/mountinfo"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// BranchMounter serves a branch as a FUSE mount at an absolute directory
// (the daemon's implementation mounts with the fuse package). engine and
// view are the branch's own: its hide and read-only rules, guarded by the
// daemon's observation store. unmount ends the mount; when the mount is
// still busy as ctx ends it detaches it lazily and returns an error
// wrapping ErrDetachedLazily.
type BranchMounter interface {
	Mount(ctx context.Context, b *branch.Branch, engine *policy.Engine, view *viewrules.View, dir string) (unmount func(context.Context) error, err error)
}

// ErrDetachedLazily is wrapped by an unmount that found the mount busy
// (open files, working directories) and detached it lazily: its name is
// gone, and the processes still in it keep the old mount until they leave
// (mountinfo.ErrDetachedLazily, which the mount's package wraps).
var ErrDetachedLazily = mountinfo.ErrDetachedLazily

// BranchUnmountGrace is how long unmounting a busy branch mount (before a
// commit, a discard or on branch.unmount) retries before detaching it
// lazily.
const BranchUnmountGrace = 2 * time.Second

// branchMounts tracks the branch mounts the daemon serves.
type branchMounts struct {
	mounter BranchMounter

	// ops serialises mounting, unmounting, and the commits and discards
	// that unmount first, so two requests never race on one branch's
	// mount or one directory.
	ops sync.Mutex

	mu   sync.Mutex
	live map[string]*branchMount // by branch name
}

// branchMount is one live branch mount.
type branchMount struct {
	dir     string
	unmount func(context.Context) error
}

// errNoBranchMounts answers a mount request to a daemon without a mounter.
var errNoBranchMounts = &callError{obj: ErrorObject{Code: CodeUnavailable,
	Message: "this daemon cannot serve branch mounts; work in the branch with the branch parameter of the fs methods"}}

// mountedAt returns where branch name is mounted ("" when it is not).
func (bm *branchMounts) mountedAt(name string) string {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	if m, ok := bm.live[name]; ok {
		return m.dir
	}
	return ""
}

// byDir returns the live mount directories and their branches.
func (bm *branchMounts) byDir() map[string]string {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	out := make(map[string]string, len(bm.live))
	for name, m := range bm.live {
		out[m.dir] = name
	}
	return out
}

// BranchMount serves branch.mount.
func (s *Service) BranchMount(ctx context.Context, c *Caller, p BranchMountParams) (BranchMountResult, error) {
	if s.br.mgr == nil {
		return BranchMountResult{}, errNoBranches
	}
	if s.br.mounts.mounter == nil {
		return BranchMountResult{}, errNoBranchMounts
	}
	if p.Mount == "" {
		return BranchMountResult{}, invalidParams("branch.mount needs mount: the directory to serve the branch at")
	}
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	b, err := s.ownedBranch(c, p.Name)
	if err != nil {
		return BranchMountResult{}, err
	}
	if at := bm.mountedAt(p.Name); at != "" {
		return BranchMountResult{}, provider.NewError(provider.CodeInvalidArgument, "mount", at, nil,
			"branch %s is already mounted at %s; unmount it first (dshmount branch unmount %s)", p.Name, at, p.Name)
	}
	dir, err := s.checkMountDir(c.peer().UID, p.Mount, p.Cwd)
	if err != nil {
		return BranchMountResult{}, err
	}
	if err := s.mountRecorded(ctx, b, dir); err != nil {
		return BranchMountResult{}, err
	}
	return BranchMountResult{Mount: dir}, nil
}

// BranchUnmount serves branch.unmount: the mount goes, and so does its
// record (the daemon no longer mounts it when it starts).
func (s *Service) BranchUnmount(ctx context.Context, c *Caller, p BranchNameParams) (Empty, error) {
	if s.br.mgr == nil {
		return Empty{}, errNoBranches
	}
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	b, err := s.ownedBranch(c, p.Name)
	if err != nil {
		return Empty{}, err
	}
	dir, err := s.unmountBranch(ctx, p.Name)
	if err != nil {
		return Empty{}, err
	}
	if dir == "" && b.Mount() == "" {
		return Empty{}, provider.NewError(provider.CodeInvalidArgument, "unmount", "", nil,
			"branch %s is not mounted; mount it with dshmount branch mount %s DIR", p.Name, p.Name)
	}
	if err := b.SetMount(""); err != nil {
		return Empty{}, err
	}
	return Empty{}, nil
}

// mountRecorded mounts b at dir (checked) and records dir with the branch;
// bm.ops is held.
func (s *Service) mountRecorded(ctx context.Context, b *branch.Branch, dir string) error {
	if err := s.startMount(ctx, b, dir); err != nil {
		return err
	}
	if err := b.SetMount(dir); err != nil {
		_, _ = s.unmountBranch(ctx, b.Name())
		return fmt.Errorf("branch %s: %w", b.Name(), err)
	}
	return nil
}

// startMount mounts b at dir through the mounter; bm.ops is held.
func (s *Service) startMount(ctx context.Context, b *branch.Branch, dir string) error {
	eng, err := s.BranchEngine(b.Name())
	if err != nil {
		return err
	}
	s.br.mu.Lock()
	view := s.br.views[b]
	s.br.mu.Unlock()
	unmount, err := s.br.mounts.mounter.Mount(ctx, b, eng, view, dir)
	if err != nil {
		return provider.NewError(provider.CodeIOError, "mount", dir, err,
			"could not mount branch %s at %s: %v", b.Name(), dir, err)
	}
	bm := s.br.mounts
	bm.mu.Lock()
	bm.live[b.Name()] = &branchMount{dir: dir, unmount: unmount}
	bm.mu.Unlock()
	s.log.Info("branch mounted", "branch", b.Name(), "mount", dir)
	return nil
}

// unmountBranch ends the live mount of branch name, if any, and returns
// its directory; the record stays. A busy mount is detached lazily (and
// logged). bm.ops is held.
func (s *Service) unmountBranch(ctx context.Context, name string) (string, error) {
	bm := s.br.mounts
	bm.mu.Lock()
	m, ok := bm.live[name]
	bm.mu.Unlock()
	if !ok {
		return "", nil
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), BranchUnmountGrace)
	defer cancel()
	err := m.unmount(uctx)
	switch {
	case errors.Is(err, ErrDetachedLazily):
		s.log.Warn("branch mount busy (open files or working directories in it): detached lazily; the processes still in it keep the old mount until they leave",
			"branch", name, "mount", m.dir)
	case err != nil:
		return "", provider.NewError(provider.CodeIOError, "unmount", m.dir, err,
			"could not unmount branch %s from %s: %v; nothing else was done", name, m.dir, err)
	default:
		s.log.Info("branch unmounted", "branch", name, "mount", m.dir)
	}
	bm.mu.Lock()
	delete(bm.live, name)
	bm.mu.Unlock()
	return m.dir, nil
}

// remount mounts branch name at dir again after a commit or discard that
// unmounted it failed; bm.ops is held. A failure is logged: the record
// stays, so the next daemon start tries again.
func (s *Service) remount(ctx context.Context, name, dir string) {
	b, err := s.br.mgr.Get(name)
	if err == nil {
		err = s.startMount(ctx, b, dir)
	}
	if err != nil {
		s.log.Error("branch mount not restored after a failed commit or discard, or a rebase; mount it again with dshmount branch mount",
			"branch", name, "mount", dir, "err", err)
	}
}

// MountBranches mounts every branch whose mount directory is recorded, as
// the daemon does when it starts. A branch that cannot be mounted is
// logged and skipped (its record stays); the errors are returned joined.
func (s *Service) MountBranches(ctx context.Context) error {
	if s.br.mgr == nil || s.br.mounts.mounter == nil {
		return nil
	}
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	var errs []error
	for _, info := range s.br.mgr.List() {
		b, err := s.br.mgr.Get(info.Name)
		if err != nil || b.Mount() == "" || bm.mountedAt(info.Name) != "" {
			continue
		}
		if err := s.startMount(ctx, b, b.Mount()); err != nil {
			s.log.Error("branch mount not restored; mount it again with dshmount branch mount",
				"branch", info.Name, "mount", b.Mount(), "err", err)
			errs = append(errs, fmt.Errorf("branch %s at %s: %w", info.Name, b.Mount(), err))
		}
	}
	return errors.Join(errs...)
}

// UnmountBranches ends every branch mount, keeping their records (the next
// start mounts them again), as the daemon does before it unmounts the
// workspace. Busy mounts are detached lazily once ctx ends.
func (s *Service) UnmountBranches(ctx context.Context) {
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	bm.mu.Lock()
	names := make([]string, 0, len(bm.live))
	for name := range bm.live {
		names = append(names, name)
	}
	bm.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		bm.mu.Lock()
		m := bm.live[name]
		bm.mu.Unlock()
		err := m.unmount(ctx)
		switch {
		case errors.Is(err, ErrDetachedLazily):
			s.log.Warn("branch mount busy at shutdown: detached lazily", "branch", name, "mount", m.dir)
		case err != nil:
			s.log.Error("branch unmount at shutdown", "branch", name, "mount", m.dir, "err", err)
		}
		bm.mu.Lock()
		delete(bm.live, name)
		bm.mu.Unlock()
	}
}

// checkMountDir turns a mount parameter into an absolute directory a
// branch may be mounted at, for a caller of uid: see BranchMountParams.
func (s *Service) checkMountDir(uid uint32, dir, cwd string) (string, error) {
	bad := func(code provider.Code, p, format string, args ...any) error {
		return provider.NewError(code, "mount", p, nil, format, args...)
	}
	if strings.ContainsRune(dir, 0) || strings.ContainsRune(cwd, 0) {
		return "", bad(provider.CodeInvalidArgument, "", "the mount directory and cwd cannot contain a NUL byte")
	}
	if !filepath.IsAbs(dir) {
		if !filepath.IsAbs(cwd) {
			return "", bad(provider.CodeInvalidArgument, dir,
				"mount directory %s is relative: pass an absolute directory, or cwd (your absolute working directory)", dir)
		}
		dir = filepath.Join(cwd, dir)
	}
	dir = filepath.Clean(dir)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", bad(provider.CodeNotFound, dir, "mount directory %s does not exist; create it (mkdir) first", dir)
	case errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED):
		return "", bad(provider.CodeInvalidArgument, dir,
			"%s holds a dead mount (transport endpoint is not connected); detach it (dshmount unmount --lazy %s) or choose another directory", dir, dir)
	case errors.Is(err, fs.ErrPermission):
		return "", bad(provider.CodePermissionDenied, dir, "cannot look at mount directory %s: permission denied", dir)
	case err != nil:
		return "", provider.NewError(provider.CodeIOError, "mount", dir, err, "cannot look at mount directory %s: %v", dir, err)
	case !st.IsDir():
		return "", bad(provider.CodeNotDirectory, dir, "mount directory %s is not a directory", dir)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && uid != 0 && sys.Uid != uid {
		return "", bad(provider.CodePermissionDenied, dir,
			"mount directory %s belongs to uid %d, not to you (uid %d); mount a branch on a directory of your own", dir, sys.Uid, uid)
	}
	if other, ok := s.br.mounts.byDir()[dir]; ok {
		return "", bad(provider.CodeInvalidArgument, dir, "%s is already the mount of branch %s", dir, other)
	}
	for _, area := range s.forbiddenMountAreas() {
		if inTree(area.dir, dir) || inTree(dir, area.dir) {
			return "", bad(provider.CodeSandboxDenied, dir,
				"mount directory %s is inside %s (%s) or holds it; choose a directory outside it", dir, area.what, area.dir)
		}
	}
	mounted, err := isMountPoint(dir)
	if err != nil {
		return "", provider.NewError(provider.CodeIOError, "mount", dir, err, "cannot tell whether %s is a mount point: %v", dir, err)
	}
	if mounted {
		return "", bad(provider.CodeInvalidArgument, dir, "%s is already a mount point; unmount it or choose another directory", dir)
	}
	empty, err := isEmptyDir(dir)
	if errors.Is(err, fs.ErrPermission) {
		return "", bad(provider.CodePermissionDenied, dir, "cannot list mount directory %s: permission denied", dir)
	}
	if err != nil {
		return "", provider.NewError(provider.CodeIOError, "mount", dir, err, "cannot list mount directory %s: %v", dir, err)
	}
	if !empty {
		return "", bad(provider.CodeInvalidArgument, dir, "mount directory %s is not empty; a branch mounts on an empty directory", dir)
	}
	return dir, nil
}

// mountArea is a tree a branch mount may not lie in.
type mountArea struct{ dir, what string }

// forbiddenMountAreas lists the workspace, its mount, the state directory
// and the live branch mounts, symlinks resolved.
func (s *Service) forbiddenMountAreas() []mountArea {
	var out []mountArea
	add := func(dir, what string) {
		if dir == "" {
			return
		}
		dir = filepath.Clean(dir)
		out = append(out, mountArea{dir, what})
		if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
			out = append(out, mountArea{real, what})
		}
	}
	add(s.cfg.Source, "the workspace")
	add(s.cfg.Mount, "the workspace mount")
	if s.br.mgr != nil {
		add(s.br.mgr.StateDir(), "the daemon's state directory")
	}
	if lr, ok := s.fs.(interface{ Root() string }); ok {
		add(lr.Root(), "the workspace")
	}
	for dir, name := range s.br.mounts.byDir() {
		out = append(out, mountArea{dir, "the mount of branch " + name})
	}
	return out
}

// inTree reports whether p is dir or below it.
func inTree(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// isEmptyDir reports whether dir has no entries.
func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// isMountPoint reports whether dir is a mount point.
func isMountPoint(dir string) (bool, error) {
	_, ok, err := mountinfo.Find(dir)
	return ok, err
}

// BranchMountGone tells the server that the mount of branch name at dir
// went away without branch.unmount (umount or fusermount -u from outside,
// or its FUSE connection aborted): it is no longer listed, and
// branch.mount may mount the branch again. The record stays, so the next
// daemon start mounts it again; branch.unmount forgets it.
func (s *Service) BranchMountGone(name, dir string) {
	bm := s.br.mounts
	bm.mu.Lock()
	m, ok := bm.live[name]
	if ok && m.dir == dir {
		delete(bm.live, name)
	}
	bm.mu.Unlock()
	if ok && m.dir == dir {
		s.log.Warn("branch mount went away from outside; mount it again with dshmount branch mount, or forget it with dshmount branch unmount",
			"branch", name, "mount", dir)
	}
}
