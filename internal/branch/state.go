package branch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/dshmount/dshmount/internal/journal"
	"github.com/dshmount/dshmount/internal/provider"
)

// Base versions with a meaning of their own (the journal's).
const (
	// BaseAbsent is the base of a path the workspace did not have when the
	// branch first changed it.
	BaseAbsent = journal.BaseAbsent
	// BaseDir is the base of a path that was a directory in the workspace.
	BaseDir = journal.BaseDir
)

// kind is what a branch holds at a path it changed.
type kind string

const (
	kindFile    kind = "file"    // a regular file in upper/
	kindDeleted kind = "deleted" // a whiteout: the path does not exist
	kindDir     kind = "dir"     // a directory the branch made (over nothing, or over a deleted one)
	kindSymlink kind = "symlink" // a symbolic link the branch made (Link)
)

// linkVersion is the base or state of a path that is a symbolic link: its
// target, which is what a link's content is.
func linkVersion(target string) provider.Version { return journal.LinkVersion(target) }

// entry is the branch's state of one changed path. The nearest ancestor
// with an entry hides the workspace below it: a path under a deleted or
// branch-made directory exists only through its own entry.
type entry struct {
	Path string           `json:"p"`
	Kind kind             `json:"k"`
	Base provider.Version `json:"b"`           // copy-up base: a version, BaseAbsent or BaseDir
	From string           `json:"f,omitempty"` // a rename's source path
	Link string           `json:"l,omitempty"` // a symbolic link's target
	Mode uint32           `json:"o,omitempty"` // a directory's permission bits (0: 0755)
	// Manifest is, for a deleted directory, every file the branch saw
	// under it with its version: the workspace must still hold exactly
	// these at commit.
	Manifest map[string]provider.Version `json:"m,omitempty"`
	// Markers flags a file a rebase left with conflict markers: a commit
	// is refused while it still holds them.
	Markers bool `json:"x,omitempty"`
}

// changeLog is a branch's append-only log of entries: replayed on open
// (the last record of a path wins, its base the first one's), appended
// after each change. A torn last line (a kill during a write) is ignored.
type changeLog struct {
	path string
	f    *os.File
}

// openLog opens (creating) the log at p and replays it.
func openLog(p string) (*changeLog, map[string]*entry, error) {
	entries := map[string]*entry{}
	data, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read change log %s: %w", p, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Path == "" {
			continue // a torn last record
		}
		if e.Kind == "" {
			delete(entries, e.Path)
			continue
		}
		if old, ok := entries[e.Path]; ok {
			e.Base = old.Base
		}
		entries[e.Path] = &e
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open change log %s: %w", p, err)
	}
	return &changeLog{path: p, f: f}, entries, nil
}

// append writes records in one write (a kill cannot tear a single record
// apart from the ones before it).
func (l *changeLog) append(es ...*entry) error {
	var buf []byte
	for _, e := range es {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode change record: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	if _, err := l.f.Write(buf); err != nil {
		return fmt.Errorf("append to change log %s: %w", l.path, err)
	}
	return nil
}

// close closes the log file.
func (l *changeLog) close() error { return l.f.Close() }

// lookup returns the entry deciding rel: its own, or the nearest ancestor's
// (own reports which). Nil when the workspace decides.
func lookup(entries map[string]*entry, rel string) (e *entry, own bool) {
	if e, ok := entries[rel]; ok {
		return e, true
	}
	for p := rel; p != "." && p != ""; {
		p = path.Dir(p)
		if p == "." {
			break
		}
		if e, ok := entries[p]; ok {
			return e, false
		}
	}
	return nil, false
}

// sortedPaths returns the paths of entries in order.
func sortedPaths(entries map[string]*entry) []string {
	ps := make([]string, 0, len(entries))
	for p := range entries {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// isBelow reports whether p is strictly below dir.
func isBelow(p, dir string) bool {
	return dir == "." || strings.HasPrefix(p, dir+"/")
}
