package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// The guard table: the one decision of every channel (socket, MCP, the
// mount) on a session's change of one file. Rows are what the session
// knows of the file, columns the request:
//
//	knows \ request  socket write        socket edit, patch,    mount: change an existing    mount: create an
//	                 (move destination)  delete, move source    file (open for writing,      absent name
//	                                                            truncate, unlink, rename)
//	(outside)        —                   —                      allowed                      allowed
//	unseen           create only         FS_NOT_OBSERVED        baseline: unchanged since    allowed
//	                                                            the session opened; else
//	                                                            FS_NOT_OBSERVED
//	absent           create only         FS_NOT_FOUND           FS_NOT_FOUND                 allowed
//	present(v)       only at v           only at v              only at v (FS_STALE_VERSION) FS_STALE_VERSION
//
// "(outside)" is a change by a process bound to a session, through the
// mount, of a path outside the guard (Zones): no observation is looked up,
// nothing is hashed; the change is still recorded and audited.
//
// "baseline" is a session that saw the workspace as it was when it opened:
// any session but a strict one (Session.Strict: exec's own sessions, and
// sessions opened with strict), for processes bound to it on the mount,
// unless their binding is strict (Actor.Strict: exec --strict).
// Socket and MCP requests can read first, so they always need an
// observation. "Unchanged since the session opened" means: no other
// actor's change of the path is recorded after the session's StartSeq, and
// the backing file's ctime is before the session opened unless the
// session's own recorded change explains it (a change while the daemon was
// down, a watcher overflow, --watch=false leave no record). A file with
// more than one name has no baseline: a change under another name is not
// recorded under this one (removing or renaming one of its names is fine).

// request is a column of the guard table.
type request int

// Requests.
const (
	reqWrite       request = iota // socket write, move destination
	reqChange                     // socket edit, patch, delete, move source
	reqMountChange                // mount: change or remove an existing file
	reqMountCreate                // mount: create an absent name
)

// ruleKind is what a cell of the table demands.
type ruleKind int

// Rule kinds.
const (
	ruleAllow     ruleKind = iota // no condition
	ruleAbsent                    // create only: the file must be absent
	ruleAt                        // the file must be at rule.version
	ruleUnchanged                 // nobody else changed it since the session opened
	ruleRefuse                    // rule.err
)

// rule is a cell of the guard table.
type rule struct {
	kind    ruleKind
	version provider.Version
	err     error
}

// Zones say which paths a process bound to a session changes through the
// mount outside the guard (recorded and audited, no observation, no hash).
type Zones struct {
	// GuardGit puts repositories' git directories under the guard (serve
	// --guard-git). Without it, changes inside a git directory are outside
	// the guard, except its hooks/, config and info/ and changes of the
	// bytes of files with more than one name.
	GuardGit bool
	// Unguarded reports whether a workspace-relative path is outside the
	// guard (serve --unguarded); nil: none is.
	Unguarded func(rel string) bool
	// GitDirs are the git directories ".git" files point to inside the
	// workspace (git init --separate-git-dir): git directories as much as
	// ".git" directories are; nil: none is known.
	GitDirs *GitDirs
}

// FileNow is what the mount knows of an existing file at a guarded change.
type FileNow struct {
	// Version hashes the file's bytes now; called only when the decision
	// needs it.
	Version func() (provider.Version, error)
	Ctime   time.Time // the backing file's status change time (zero: unknown)
	Links   uint64    // its number of names
}

// linked reports whether a change op of f would reach bytes other names
// show too: a change of the bytes of a file with more than one name
// (removing or renaming one name leaves the others' bytes alone).
func (f *FileNow) linked(op string) bool {
	return f != nil && f.Links > 1 && op != string(OpUnlink) && op != string(OpRename)
}

// guardTable decides with the store's observations and the Zones.
type guardTable struct {
	store *Store
	zones Zones
}

// rule is the table's cell for a's request on t. sess is a's open session
// (the zero Session when a has none); f is the file on the mount (nil
// elsewhere). A store failure is a refusal with FS_IO_ERROR.
func (g guardTable) rule(a Actor, sess Session, req request, op string, t provider.Target, f *FileNow) rule {
	if a.Channel == ChannelMount && a.Session != "" && g.outside(t.DisplayPath, f.linked(op)) {
		return rule{kind: ruleAllow}
	}
	obs, seen, err := g.store.observation(a.Session, t.Key)
	if err != nil {
		return rule{kind: ruleRefuse, err: storeError(op, t.DisplayPath, err)}
	}
	switch {
	case !seen:
		switch req {
		case reqWrite:
			return rule{kind: ruleAbsent}
		case reqMountCreate:
			return rule{kind: ruleAllow}
		case reqMountChange:
			if a.Channel == ChannelMount && a.Session != "" && !sess.Strict && !a.Strict {
				return rule{kind: ruleUnchanged}
			}
		}
		return rule{kind: ruleRefuse, err: notObserved(op, t.DisplayPath)}
	case obs.Kind == ObservedAbsent:
		if req == reqWrite {
			return rule{kind: ruleAbsent}
		}
		if req == reqMountCreate {
			return rule{kind: ruleAllow}
		}
		return rule{kind: ruleRefuse, err: observedAbsent(op, t.DisplayPath)}
	case req == reqMountCreate:
		// It saw the file present; someone removed what it read.
		return rule{kind: ruleRefuse, err: staleVersion(op, t.DisplayPath)}
	}
	return rule{kind: ruleAt, version: obs.Version}
}

// outside reports whether rel is outside the guard for a bound process
// on the mount (see Zones); linked: the change reaches bytes other names
// show too (FileNow.linked).
func (g guardTable) outside(rel string, linked bool) bool {
	if g.zones.Unguarded != nil && g.zones.Unguarded(rel) {
		return true
	}
	if g.zones.GuardGit || linked {
		return false
	}
	if inGitDir(rel) {
		return true
	}
	rest, ok := g.zones.GitDirs.Under(rel)
	return ok && gitOwn(strings.Split(rest, "/"))
}

// inGitDir reports whether rel is inside a repository's git directory (a
// ".git" directory at any depth) and not in the parts of it that follow
// the worktree's rule: hooks/, config and info/ (of the repository, or of
// a submodule's repository under modules/).
func inGitDir(rel string) bool {
	segs := strings.Split(strings.Trim(rel, "/"), "/")
	i := 0
	for i < len(segs)-1 && segs[i] != ".git" {
		i++
	}
	if i >= len(segs)-1 {
		return false // no .git directory above the last name
	}
	return gitOwn(segs[i+1:])
}

// gitOwn reports whether the path rest (its segments) inside a git
// directory is git's own: not hooks/, config or info/ (of the repository,
// or of a submodule's repository under modules/).
func gitOwn(rest []string) bool {
	for len(rest) > 2 && rest[0] == "modules" {
		rest = rest[2:]
	}
	switch rest[0] {
	case "hooks", "config", "info":
		return false
	}
	return true
}

// unchangedSince refuses a's blind change of t (an existing file its
// session sess never read) when someone else changed t after sess opened.
func (g guardTable) unchangedSince(a Actor, sess Session, op string, t provider.Target, f *FileNow) error {
	if f.linked(op) {
		return provider.NewError(provider.CodeNotObserved, op, t.DisplayPath, nil,
			"this file has %d names and you have not read it in this session; read it first", f.Links)
	}
	rec, ok := g.store.LastWrite(t.Key)
	recent := ok && recordedAfter(rec, sess)
	if recent && rec.Actor.Session != a.Session {
		return provider.NewError(provider.CodeNotObserved, op, t.DisplayPath, nil,
			"changed after this session opened %s, and you have not read it since; read it first", describeWriter(rec))
	}
	if f.Ctime.IsZero() || f.Ctime.Before(sess.Opened) {
		return nil
	}
	if recent && !f.Ctime.After(rec.Time) {
		return nil // the session's own recorded change
	}
	return provider.NewError(provider.CodeNotObserved, op, t.DisplayPath, nil,
		"changed after this session opened (at %s, not through the daemon), and you have not read it since; read it first",
		f.Ctime.Format("15:04:05.000"))
}

// recordedAfter reports whether rec was recorded after sess opened.
func recordedAfter(rec WriteRecord, sess Session) bool {
	if rec.Seq != 0 {
		return rec.Seq > sess.StartSeq
	}
	return !rec.Time.Before(sess.Opened)
}

// describeWriter names who made the change rec records, and when.
func describeWriter(rec WriteRecord) string {
	who := "outside the daemon"
	switch rec.Actor.Channel {
	case ChannelMount:
		who = "through the mount"
	case ChannelSocket:
		who = "over the socket"
	case ChannelMCP:
		who = "over MCP"
	}
	if rec.Actor.Session != "" {
		who += " by session " + string(rec.Actor.Session)
	} else if rec.Actor.Channel == ChannelMount {
		who += " by an unbound process"
	}
	if rec.Actor.PID != 0 {
		who += fmt.Sprintf(" (pid %d)", rec.Actor.PID)
	}
	return fmt.Sprintf("(%s %s, at %s)", rec.Op, who, rec.Time.Format("15:04:05.000"))
}
