// Package registry records the running dshmount daemons in a run
// directory, one small JSON file per mount, so that a client started inside
// a mount or its workspace finds the daemon's socket and its place in the
// workspace without being told (no --socket, no DSH_SOCKET).
//
// The run directory is $DSH_RUN_DIR when set, else $XDG_RUNTIME_DIR/dshmount,
// else /run/dshmount for root, else $TMPDIR/dshmount-UID. A daemon and the
// clients of the same user and environment agree on it.
//
// What a client trusts: a run directory only when it is owned by the
// caller or root and writable by no one else (CheckDir; an explicit
// $DSH_RUN_DIR is the user's choice); in it, an entry only when its file is
// owned by the caller or root (List); and the socket an entry names only
// when the process listening on it is the entry's daemon: SO_PEERCRED gives
// the entry's pid and its file's owner (Verify, done by Find). Another local
// user can then neither plant a daemon nor answer in its name.
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EnvRunDir overrides the run directory.
const EnvRunDir = "DSH_RUN_DIR"

// Entry is one running daemon.
type Entry struct {
	// PID is the daemon's process id; an entry whose process is gone is
	// ignored.
	PID int `json:"pid"`
	// Mount is the absolute mountpoint ("" for a daemon without a mount).
	Mount string `json:"mount,omitempty"`
	// Source is the absolute workspace (backing) directory.
	Source string `json:"source"`
	// Socket is the absolute path of the control socket.
	Socket string `json:"socket"`
	// UID owns the entry's file: the daemon's uid (List fills it).
	UID uint32 `json:"-"`
}

// Dir returns the run directory for the environment getenv reads and the
// user uid.
func Dir(getenv func(string) string, uid int) string {
	if d := getenv(EnvRunDir); d != "" {
		return d
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "dshmount")
	}
	if uid == 0 {
		return "/run/dshmount"
	}
	tmp := getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, fmt.Sprintf("dshmount-%d", uid))
}

// DefaultDir is Dir for this process.
func DefaultDir() string { return Dir(os.Getenv, os.Getuid()) }

// fileName names the entry of a mount (or, without one, of a socket).
func fileName(e Entry) string {
	key := e.Mount
	if key == "" {
		key = e.Socket
	}
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8]) + ".json"
}

// Register writes e into dir and returns the function that removes it
// again (call it when the daemon stops).
// The directory is made 0700 (0755 for root, whose registry other allowed
// uids read); an existing one that CheckDir refuses is refused, unless it
// is the user's explicit $DSH_RUN_DIR.
func Register(dir string, e Entry) (remove func() error, err error) {
	mode := os.FileMode(0o700)
	if os.Getuid() == 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(dir, mode); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if os.Getenv(EnvRunDir) != dir {
		if err := CheckDir(dir, os.Getuid()); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	path := filepath.Join(dir, fileName(e))
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("registry: %w", err)
	}
	return func() error {
		// Another daemon may have taken the mount over since: remove only
		// our own entry.
		if cur, err := readEntry(path); err == nil && cur.PID != e.PID {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("registry: %w", err)
		}
		return nil
	}, nil
}

// readEntry reads one entry file; UID is the file's owner.
func readEntry(path string) (Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return Entry{}, fmt.Errorf("registry entry %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<16))
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("registry entry %s: %w", path, err)
	}
	e.UID = st.Uid
	return e, nil
}

// CheckDir says why uid may not trust dir as a run directory: it must be a
// directory (not a symbolic link) owned by uid or root that neither its
// group nor others may write. A missing dir is fine (nothing to trust).
func CheckDir(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir() || !ok:
		return fmt.Errorf("registry: the run directory %s is not a directory (a symbolic link or a file another user may have planted); remove it, or set $%s", dir, EnvRunDir)
	case st.Uid != uint32(uid) && st.Uid != 0:
		return fmt.Errorf("registry: the run directory %s belongs to uid %d, not to you (uid %d) or root: another user may have planted it to answer in a daemon's name; remove it, or set $%s", dir, st.Uid, uid, EnvRunDir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("registry: the run directory %s is writable by others (mode %04o): anyone could plant an entry; chmod go-w it, or set $%s", dir, fi.Mode().Perm(), EnvRunDir)
	}
	return nil
}

// List returns the entries of dir owned by this process's uid or root
// whose daemon is still running (its process exists and its socket too).
func List(dir string) ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	sort.Strings(names)
	var out []Entry
	for _, n := range names {
		e, err := readEntry(n)
		if err != nil || e.PID <= 0 || e.Socket == "" || !alive(e.PID) {
			continue
		}
		if e.UID != uint32(os.Getuid()) && e.UID != 0 {
			continue // planted by another user
		}
		if _, err := os.Stat(e.Socket); err != nil {
			continue // a reused pid: the daemon's socket is gone
		}
		out = append(out, e)
	}
	return out, nil
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Place is where a directory lies in a daemon's workspace.
type Place struct {
	Entry
	// Rel is the directory relative to the workspace root, slash-separated
	// ("" for the root).
	Rel string
}

// Locate returns the place of dir (absolute) in e: inside its mount or its
// workspace directory.
func Locate(e Entry, dir string) (Place, bool) {
	for _, root := range []string{e.Mount, e.Source} {
		if rel, ok := within(root, dir); ok {
			return Place{Entry: e, Rel: rel}, true
		}
	}
	return Place{}, false
}

// Find returns the running daemon whose mount or workspace contains dir
// (the innermost one when several do) and whose socket Verify accepts.
func Find(runDir, dir string) (Place, bool, error) {
	entries, err := List(runDir)
	if err != nil {
		return Place{}, false, err
	}
	type candidate struct {
		p       Place
		rootLen int
	}
	var cs []candidate
	for _, e := range entries {
		for _, root := range []string{e.Mount, e.Source} {
			if rel, ok := within(root, dir); ok {
				cs = append(cs, candidate{Place{Entry: e, Rel: rel}, len(root)})
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].rootLen > cs[j].rootLen })
	var errs []error
	for _, c := range cs {
		if err := Verify(c.p.Entry); err != nil {
			errs = append(errs, err)
			continue
		}
		return c.p, true, nil
	}
	return Place{}, false, errors.Join(errs...)
}

// Verify checks that the process listening on e's socket is e's daemon:
// its SO_PEERCRED pid is e.PID and its uid e.UID (the entry file's owner).
func Verify(e Entry) error {
	nc, err := net.DialTimeout("unix", e.Socket, 3*time.Second)
	if err != nil {
		return fmt.Errorf("registry: daemon %d's socket %s: %w", e.PID, e.Socket, err)
	}
	defer nc.Close()
	raw, err := nc.(*net.UnixConn).SyscallConn()
	if err != nil {
		return fmt.Errorf("registry: socket %s: %w", e.Socket, err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("registry: socket %s: %w", e.Socket, err)
	}
	if cerr != nil {
		return fmt.Errorf("registry: socket %s: SO_PEERCRED: %w", e.Socket, cerr)
	}
	if int(cred.Pid) != e.PID || cred.Uid != e.UID {
		return fmt.Errorf("registry: the socket %s is served by pid %d uid %d, not by the daemon the entry names (pid %d uid %d): ignored", e.Socket, cred.Pid, cred.Uid, e.PID, e.UID)
	}
	return nil
}

// within returns dir relative to root when dir is root or below it.
func within(root, dir string) (string, bool) {
	if root == "" || !filepath.IsAbs(dir) {
		return "", false
	}
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	if dir == root {
		return "", true
	}
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if !strings.HasPrefix(dir, prefix) {
		return "", false
	}
	return filepath.ToSlash(strings.TrimPrefix(dir, prefix)), true
}
