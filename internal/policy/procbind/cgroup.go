package procbind

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dshmount/dshmount/internal/mountinfo"
)

// Binding cgroups. A bind moves the process into a cgroup v2 directory of
// its own, at the top of the hierarchy the daemon sees:
//
//	/dshmount/<session>-<random>
//
// Cgroup membership is what makes a binding impossible to shed: every
// process forked from a member is a member, whatever happens to its parent
// (exit, reparenting to init or a subreaper) or its session (setsid). A pid
// reused by an unrelated process is in that process's own cgroup, so it
// inherits nothing. Leaving a cgroup takes write access to the cgroup.procs
// of the destination and of the common ancestor; at the top of the
// hierarchy the common ancestor is the root cgroup, which only root can
// write. (Below the process's own cgroup the ancestor would be that cgroup,
// which systemd delegates to its user: a non-root agent could move itself
// out.) The price: a bound process leaves the cgroup it came from, so that
// cgroup's resource limits no longer apply to it. An empty binding cgroup
// is removed.

// cgroupDirName is the directory binding cgroups are created in, at the
// top of the hierarchy.
const cgroupDirName = "dshmount"

// cgroupManager is what the registry needs of cgroup v2; tests fake it.
type cgroupManager interface {
	// Of returns the cgroup of process pid as a hierarchy path ("/a/b").
	Of(pid int) (string, error)
	// Enter creates the cgroup /dshmount/name, moves pid into it and
	// returns its path.
	Enter(pid int, name string) (string, error)
	// Populated reports whether the cgroup or one below it has a process;
	// a cgroup that no longer exists is not populated.
	Populated(cgroup string) (bool, error)
	// Remove removes the (empty) cgroup, the empty ones below it, and its
	// "dshmount" parent when that is empty too.
	Remove(cgroup string) error
}

// cgroupFS is the real cgroupManager over a mounted cgroup v2 hierarchy.
type cgroupFS struct {
	mount string // where the hierarchy is mounted
	root  string // the hierarchy path shown at the mount's top ("/")
	proc  string // the /proc tree
}

// findCgroup2 looks up the cgroup v2 hierarchy in a mountinfo table (the
// contents of /proc/self/mountinfo): its mount point and the hierarchy path
// mounted there.
func findCgroup2(table []byte) (mount, root string, ok bool) {
	entries, err := mountinfo.Parse(bytes.NewReader(table))
	if err != nil {
		return "", "", false
	}
	for _, e := range entries {
		if e.FSType == "cgroup2" {
			return e.MountPoint, e.Root, true
		}
	}
	return "", "", false
}

// detectCgroups returns the cgroup v2 hierarchy of this machine, and an
// error saying why binding cgroups cannot be created (no cgroup v2: nil
// hierarchy; not writable: the hierarchy, still good for reading
// memberships).
func detectCgroups(procRoot string) (*cgroupFS, error) {
	info, err := os.ReadFile(procRoot + "/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	mount, root, ok := findCgroup2(info)
	if !ok {
		return nil, errors.New("no cgroup v2 hierarchy is mounted")
	}
	c := &cgroupFS{mount: mount, root: root, proc: procRoot}
	if err := syscall.Access(mount, 2 /* W_OK */); err != nil {
		return c, fmt.Errorf("cgroup v2 hierarchy %s is not writable: %w", mount, err)
	}
	return c, nil
}

// cgroupLine extracts the cgroup v2 path ("0::/a/b") from the contents of
// /proc/PID/cgroup.
func cgroupLine(b []byte) (string, bool) {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(rest), len(rest) > 0 && rest[0] == '/'
		}
	}
	return "", false
}

// Of implements cgroupManager.
func (c *cgroupFS) Of(pid int) (string, error) {
	b, err := os.ReadFile(c.proc + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("pid %d: %w", pid, errNoProcess)
		}
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	cg, ok := cgroupLine(b)
	if !ok {
		return "", fmt.Errorf("pid %d: no cgroup v2 membership in /proc/%d/cgroup", pid, pid)
	}
	return cg, nil
}

// dir maps a hierarchy path to its directory, refusing one outside the
// mounted part of the hierarchy.
func (c *cgroupFS) dir(cgroup string) (string, error) {
	cgroup = path.Clean(cgroup)
	rel := cgroup
	if c.root != "/" {
		r, ok := strings.CutPrefix(cgroup, c.root)
		if !ok || (r != "" && r[0] != '/') {
			return "", fmt.Errorf("cgroup %s is outside the mounted hierarchy %s", cgroup, c.root)
		}
		rel = r
	}
	if strings.HasPrefix(rel, "/..") {
		return "", fmt.Errorf("cgroup %s is outside this cgroup namespace", cgroup)
	}
	return filepath.Join(c.mount, rel), nil
}

// Enter implements cgroupManager.
func (c *cgroupFS) Enter(pid int, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", fmt.Errorf("invalid cgroup name %q", name)
	}
	cg := path.Join(c.root, cgroupDirName, name)
	dir, err := c.dir(cg)
	if err != nil {
		return "", err
	}
	// Another daemon may remove the shared, empty "dshmount" directory
	// between the two mkdirs: try again then.
	for attempt := 0; ; attempt++ {
		err = os.MkdirAll(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) || attempt == 3 {
			return "", fmt.Errorf("create cgroup %s: %w", cg, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		_ = c.Remove(cg)
		return "", fmt.Errorf("move pid %d into cgroup %s: %w", pid, cg, err)
	}
	return cg, nil
}

// Populated implements cgroupManager.
func (c *cgroupFS) Populated(cgroup string) (bool, error) {
	dir, err := c.dir(cgroup)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read cgroup %s: %w", cgroup, err)
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(bytes.TrimSpace(rest)) != "0", nil
		}
	}
	return false, fmt.Errorf("cgroup %s: no populated field in cgroup.events", cgroup)
}

// Remove implements cgroupManager. A cgroup directory holds only the
// kernel's interface files, which rmdir takes with it; subdirectories are
// cgroups of their own and go first.
func (c *cgroupFS) Remove(cgroup string) error {
	dir, err := c.dir(cgroup)
	if err != nil {
		return err
	}
	if err := removeCgroupTree(dir); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", cgroup, err)
	}
	// The shared "dshmount" parent goes when it is empty; another binding
	// still in it keeps it (EBUSY, ENOTEMPTY), which is not an error.
	if parent := filepath.Dir(dir); filepath.Base(parent) == cgroupDirName {
		_ = syscall.Rmdir(parent)
	}
	return nil
}

// removeCgroupTree removes the cgroup directory dir and its child cgroups,
// deepest first.
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}
