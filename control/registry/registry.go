// Package registry records the running dshmount daemons in a run
// directory, one small JSON file per mount, so that a client started inside
// a mount or its workspace finds the daemon's socket and its place in the
// workspace without being told (no --socket, no DSH_SOCKET).
//
// The run directory is $DSH_RUN_DIR when set, else $XDG_RUNTIME_DIR/dshmount,
// else /run/dshmount for root, else $TMPDIR/dshmount-UID. A daemon and the
// clients of the same user and environment agree on it.
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
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
func Register(dir string, e Entry) (remove func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
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

// readEntry reads one entry file.
func readEntry(path string) (Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("registry entry %s: %w", path, err)
	}
	return e, nil
}

// List returns the entries of dir whose daemon is still running (its
// process exists and its socket too).
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
// (the innermost one when several do).
func Find(runDir, dir string) (Place, bool, error) {
	entries, err := List(runDir)
	if err != nil {
		return Place{}, false, err
	}
	var best Place
	found, bestLen := false, -1
	for _, e := range entries {
		for _, root := range []string{e.Mount, e.Source} {
			if rel, ok := within(root, dir); ok && len(root) > bestLen {
				best, found, bestLen = Place{Entry: e, Rel: rel}, true, len(root)
			}
		}
	}
	return best, found, nil
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
