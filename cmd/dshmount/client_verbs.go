package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// clientVerbs lists the client verbs.
func clientVerbs() []clientVerb {
	return []clientVerb{
		{name: "status", summary: "show the daemon's workspace, mount, sessions and counters",
			synopsis: "", maxArgs: 0, do: doStatus,
			help: "Shows what the daemon serves (source and mount), its open sessions, its uptime and\nper-method request and error counters."},
		{name: "session", summary: "open or close a session (the owner of observations)",
			synopsis: "open [--name N] [--strict] | close ID", minArgs: 1, maxArgs: 2, do: doSession,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.StringVar(&o.name, "name", "", "a name for people (open)")
				fs.BoolVar(&o.strict, "strict", false, "processes bound to it read before every write on the mount too (open)")
			},
			help: "A session owns what it has read: a guarded write, edit or delete needs the session to\nhave read the current version. 'open' prints the new session id; pass it as --session\n(or export DSH_SESSION) to the other verbs so their reads authorize later edits.\nProcesses bound to it ('dshmount exec') may also change, on the mount, files it never\nread that nobody else changed since it opened; --strict takes that away."},
		{name: "stat", paths: true, summary: "show a file's type, size and version", synopsis: "PATH", minArgs: 1, maxArgs: 1, do: doStat,
			help: "Shows metadata (never content) and records the session's observation of the file:\npresent at its version, or absent."},
		{name: "ls", paths: true, summary: "list a directory", synopsis: "[PATH]", maxArgs: 1, do: doList,
			help: "Lists the direct children of a directory (default: the workspace root) in name order."},
		{name: "read", paths: true, summary: "print a window of a file's lines, numbered", synopsis: "PATH", minArgs: 1, maxArgs: 1, do: doRead,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.IntVar(&o.offset, "offset", 1, "1-based first line")
				fs.IntVar(&o.limit, "limit", control.DefaultReadLimit, "number of lines")
				fs.Int64Var(&o.maxBytes, "max-bytes", control.DefaultReadMaxBytes, "cap on the bytes of returned text")
			},
			help: "Prints the lines like 'cat -n', then a footer 'lines A-B of N, version V'. The read\nrecords the session's observation, which authorizes a later guarded write or edit of\nthe same version."},
		{name: "write", paths: true, summary: "write a whole file from stdin", synopsis: "PATH", minArgs: 1, maxArgs: 1, guard: writeGuard, do: doWrite,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.BoolVar(&o.merge, "merge", false, "if the file changed since the version read, merge this change over it when the two do not touch (FS_MERGE_CONFLICT otherwise)")
			},
			help: "Creates or replaces PATH with the text read from stdin. Without a guard flag the\nsession's observation decides: unseen or absent creates only if the file does not\nexist; a read file is replaced only if it is still at the version read."},
		{name: "edit", paths: true, summary: "replace a literal string in a file", synopsis: "PATH --old TEXT --new TEXT", minArgs: 1, maxArgs: 1, guard: versionOnly, do: doEdit,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.StringVar(&o.old, "old", "", "literal text to replace (must match exactly once unless --all)")
				fs.StringVar(&o.new, "new", "", "replacement text; required (--new '' deletes)")
				fs.BoolVar(&o.all, "all", false, "replace every match")
				fs.BoolVar(&o.merge, "merge", false, "if the file changed since the version read, merge this change over it when the two do not touch (FS_MERGE_CONFLICT otherwise)")
			},
			help: "Replaces --old with --new; both are required (--new '' deletes the text). The session\nmust have read the file at its current version (or pass --version V)."},
		{name: "patch", paths: true, summary: "apply an apply_patch text (stdin or -f FILE)", synopsis: "[-f FILE]", maxArgs: 0, guard: unconditOnly, do: doPatch,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.StringVar(&o.file, "f", "", "read the patch from `FILE` instead of stdin")
				fs.BoolVar(&o.atomic, "atomic", false, "apply every operation through one journaled commit, or none (a crash included)")
				fs.BoolVar(&o.merge, "merge", false, "a patch updating one file that changed since the version read is merged over it when the two do not touch (FS_MERGE_CONFLICT otherwise)")
			},
			help: "Applies a '*** Begin Patch' ... '*** End Patch' text. Every operation is checked\nfirst (guards and hunks); if any check fails nothing is written. Operations then run\nin order; if one fails at commit time the rest do not run and the result lists what\nwas applied (exit status 1)."},
		{name: "mv", paths: true, summary: "move a file", synopsis: "FROM TO", minArgs: 2, maxArgs: 2, guard: versionOnly, do: doMove,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.BoolVar(&o.createDest, "create", false, "explicit destination guard: TO must not exist")
				fs.StringVar(&o.expectedDest, "dest-version", "", "explicit destination guard: replace TO only at version `V`")
			},
			help: "Publishes FROM at TO, then removes FROM. FROM is guarded like an edit (--version V),\nTO like a write (--create or --dest-version V)."},
		{name: "rm", paths: true, summary: "delete a file", synopsis: "PATH", minArgs: 1, maxArgs: 1, guard: versionOnly, do: doDelete,
			help: "Deletes a regular file the session has read at its current version (or pass\n--version V)."},
		{name: "watch", paths: true, summary: "print changes of a file or directory (-r: the whole tree) until interrupted", synopsis: "[-r] [--since SEQ] PATH",
			minArgs: 1, maxArgs: 1, flags: watchFlags, do: doWatch, help: watchHelp},
		{name: "log", paths: true, summary: "show the audit log, newest first", synopsis: "[PATH]", maxArgs: 1, do: doLog,
			flags: func(fs *flag.FlagSet, o *verbOpts) {
				fs.IntVar(&o.limitLog, "limit", control.DefaultLogLimit, "number of entries")
				fs.BoolVar(&o.refused, "refused", false, "only refusals: the changes the guard, the view or permissions refused")
				fs.Uint64Var(&o.since, "since", 0, "only entries after sequence number `SEQ` (the first column); with --limit, the first ones after it")
				fs.Var(&o.under, "path", "only entries about `P` or anything below it (repeatable; relative to the shell's directory inside the mount)")
				fs.Var(&o.exclude, "exclude", "leave out entries whose path matches `GLOB` (repeatable): '*.log' any file so named, 'build/out' that tree")
				fs.BoolVar(&o.git, "git", false, "show the entries under .git/ directories too (hidden by default)")
			},
			help: "Shows who changed what and when (mount and socket), and every refused attempt with\nits code and reason, newest first; optionally only the entries about PATH, or with\n--path P about anything under P (PATH and P are relative to the shell's directory\ninside the mount or the workspace, as for every verb; the entries show\nworkspace-relative paths). Entries under .git/ directories (git's own objects,\nindex and refs) are left out unless --git is given or the path asked for is in .git.\nAn editor's save that writes a temporary file and renames it over the file shows as\none 'save' line (--json lists the entries as they are). With --session S (given on\nthe command line; $DSH_SESSION does not apply here) only S's entries. Refusals on\nthe mount repeated within a second (the kernel retries ESTALE) are logged once, the\nnext entry counting the ones left out; every refused socket request is logged."},
		branchVerb(),
	}
}

func doStatus(ctx context.Context, e *clientEnv) error {
	st, err := e.client.Status(ctx)
	if err != nil {
		return err
	}
	return e.emit(st, func(w io.Writer) {
		fmt.Fprintf(w, "source:      %s\n", st.Source)
		if st.Mount != "" {
			fmt.Fprintf(w, "mount:       %s\n", st.Mount)
		}
		fmt.Fprintf(w, "uptime:      %s\n", (time.Duration(st.UptimeSeconds) * time.Second).String())
		fmt.Fprintf(w, "connections: %d\n", st.Connections)
		fmt.Fprintf(w, "sessions:    %d\n", len(st.Sessions))
		for _, s := range st.Sessions {
			fmt.Fprintf(w, "  %s  %-16s last used %s\n", s.ID, s.Name, s.LastUsed.Format(time.RFC3339))
		}
		if len(st.Bindings) > 0 {
			fmt.Fprintf(w, "bindings:\n")
		}
		for _, b := range st.Bindings {
			what := fmt.Sprintf("pid %d", b.PID)
			if b.Cgroup != "" {
				what = "cgroup " + b.Cgroup
			}
			note := ""
			switch {
			case b.TreeGone && b.Cgroup != "":
				note = "  (process tree gone: bound only while its processes stay in the cgroup; a root process can leave it)"
			case b.TreeGone:
				note = "  (process tree gone)"
			}
			fmt.Fprintf(w, "  %s  %s%s\n", b.Session, what, note)
		}
		names := make([]string, 0, len(st.Counters))
		for name, c := range st.Counters {
			if c.Requests > 0 {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			fmt.Fprintf(w, "requests:\n")
		}
		for _, name := range names {
			c := st.Counters[name]
			fmt.Fprintf(w, "  %-14s %8d  (%d errors)\n", name, c.Requests, c.Errors)
		}
		fmt.Fprintf(w, "cpu:         %.2fs\n", st.CPUSeconds)
		if len(st.FuseRequests) > 0 {
			fmt.Fprintf(w, "fuse requests:\n")
		}
		for _, op := range slices.Sorted(maps.Keys(st.FuseRequests)) {
			fmt.Fprintf(w, "  %-14s %8d\n", op, st.FuseRequests[op])
		}
	})
}

func doSession(ctx context.Context, e *clientEnv) error {
	switch e.args[0] {
	case "open":
		if len(e.args) != 1 {
			return &usageError{msg: "session open takes no arguments (use --name N)"}
		}
		id, err := e.client.OpenSessionWith(ctx, control.SessionOpenParams{Name: e.opts.name, Strict: e.opts.strict})
		if err != nil {
			return err
		}
		return e.emit(control.SessionOpenResult{Session: id}, func(w io.Writer) { fmt.Fprintln(w, id) })
	case "close":
		if len(e.args) != 2 {
			return &usageError{msg: "session close needs the session id"}
		}
		if err := e.client.CloseSession(ctx, control.SessionID(e.args[1])); err != nil {
			return err
		}
		return e.emit(control.Empty{}, func(io.Writer) {})
	}
	return &usageError{msg: fmt.Sprintf("unknown session action %q; use 'open' or 'close'", e.args[0])}
}

func doStat(ctx context.Context, e *clientEnv) error {
	st, err := e.client.Stat(ctx, control.StatParams{Branch: e.branch, Path: e.args[0], Cwd: e.cwd, Session: e.session})
	if err != nil {
		return err
	}
	return e.emit(st, func(w io.Writer) {
		if !st.Exists {
			fmt.Fprintf(w, "%s: does not exist\n", st.DisplayPath)
			return
		}
		size := ""
		if st.Size != nil {
			size = fmt.Sprintf(", %d bytes", *st.Size)
		}
		fmt.Fprintf(w, "%s: %s%s, version %s\n", st.DisplayPath, st.Type, size, st.Version)
	})
}

func doList(ctx context.Context, e *clientEnv) error {
	path := "."
	if len(e.args) == 1 {
		path = e.args[0]
	}
	res, err := e.client.List(ctx, control.ListParams{Branch: e.branch, Path: path, Cwd: e.cwd})
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		for _, en := range res.Entries {
			size := "-"
			if en.Size != nil {
				size = fmt.Sprint(*en.Size)
			}
			name := en.Name
			if en.Type == provider.TypeDirectory {
				name += "/"
			}
			fmt.Fprintf(w, "%-9s %10s  %s\n", en.Type, size, name)
		}
	})
}

func doRead(ctx context.Context, e *clientEnv) error {
	p := control.ReadParams{Branch: e.branch, Path: e.args[0], Cwd: e.cwd, Session: e.session}
	if e.opts.hasOffset {
		p.Offset = &e.opts.offset
	}
	if e.opts.hasLimit {
		p.Limit = &e.opts.limit
	}
	if e.opts.hasMaxBytes {
		p.MaxBytes = &e.opts.maxBytes
	}
	res, err := e.client.Read(ctx, p)
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		for _, l := range res.Lines {
			fmt.Fprintf(w, "%6d\t%s\n", l.Number, l.Text)
		}
		switch {
		case len(res.Lines) == 0:
			fmt.Fprintf(w, "no lines from %d; %s has %d lines, version %s\n", res.Offset, res.DisplayPath, res.TotalLines, res.Version)
		default:
			last := res.Lines[len(res.Lines)-1].Number
			fmt.Fprintf(w, "lines %d-%d of %d, version %s\n", res.Lines[0].Number, last, res.TotalLines, res.Version)
			if res.TruncatedByBytes {
				fmt.Fprintf(w, "(stopped at the byte cap; continue with --offset %d)\n", last+1)
			}
		}
	})
}

// readText reads UTF-8 text from r (stdin or a file).
func readText(r io.Reader, what string) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", &usageError{msg: fmt.Sprintf("read %s: %v", what, err)}
	}
	if !utf8.Valid(b) {
		return "", &fsFailure{code: provider.CodeNotText, msg: what + " is not valid UTF-8 text; dshmount writes text files only"}
	}
	return string(b), nil
}

func doWrite(ctx context.Context, e *clientEnv) error {
	content, err := readText(e.io.in, "stdin")
	if err != nil {
		return err
	}
	res, err := e.client.Write(ctx, control.WriteParams{Branch: e.branch, Path: e.args[0], Content: content, Cwd: e.cwd, Session: e.session,
		Expected: e.writeExpected(), Unconditional: e.unconditional, Merge: e.opts.merge})
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		verb := "updated"
		if res.Operation == provider.OpCreate {
			verb = "created"
		}
		fmt.Fprintf(w, "%s %s, version %s\n", verb, e.args[0], res.Version)
		if res.Merged {
			fmt.Fprintf(w, "merged over version %s\n", res.MergedOver)
		}
	})
}

func doEdit(ctx context.Context, e *clientEnv) error {
	if e.opts.old == "" {
		return &usageError{msg: "--old is required (the literal text to replace)"}
	}
	if !e.opts.hasNew {
		return &usageError{msg: "--new is required (the replacement text; --new '' deletes the --old text)"}
	}
	res, err := e.client.Edit(ctx, control.EditParams{Branch: e.branch, Path: e.args[0], OldString: e.opts.old, NewString: e.opts.new,
		ReplaceAll: e.opts.all, Cwd: e.cwd, Session: e.session, Expected: e.versionExpected(), Unconditional: e.unconditional, Merge: e.opts.merge})
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "edited %s, version %s\n", e.args[0], res.Version)
		if res.Merged {
			fmt.Fprintf(w, "merged over version %s\n", res.MergedOver)
		}
	})
}

func doPatch(ctx context.Context, e *clientEnv) error {
	in, what := e.io.in, "stdin"
	if e.opts.file != "" && e.opts.file != "-" {
		f, err := os.Open(e.opts.file)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("open patch file: %v", err)}
		}
		defer f.Close()
		in, what = f, e.opts.file
	}
	text, err := readText(in, what)
	if err != nil {
		return err
	}
	res, err := e.client.Patch(ctx, control.PatchParams{Branch: e.branch, Patch: text, Cwd: e.cwd, Session: e.session, Unconditional: e.unconditional, Atomic: e.opts.atomic, Merge: e.opts.merge})
	if err != nil {
		return err
	}
	if err := e.emit(res, func(w io.Writer) {
		for _, op := range res.Operations {
			target := op.Path
			if op.MoveTo != "" {
				target += " -> " + op.MoveTo
			}
			line := fmt.Sprintf("%-8s %-6s %s", op.Status, op.Kind, target)
			if op.Version != "" {
				line += ", version " + string(op.Version)
			}
			if op.Error != nil {
				line += fmt.Sprintf(" (%s: %s)", op.Error.Code, op.Error.Message)
			}
			fmt.Fprintln(w, line)
		}
	}); err != nil {
		return err
	}
	if !res.Complete {
		for _, op := range res.Operations {
			if op.Error != nil {
				return &fsFailure{code: op.Error.Code, msg: "the patch stopped at " + op.Path + ": " + op.Error.Message}
			}
		}
		return &fsFailure{code: provider.CodeIOError, msg: "the patch did not complete"}
	}
	return nil
}

func doMove(ctx context.Context, e *clientEnv) error {
	p := control.MoveParams{Branch: e.branch, From: e.args[0], To: e.args[1], Cwd: e.cwd, Session: e.session,
		ExpectedSource: e.versionExpected(), Unconditional: e.unconditional}
	switch {
	case e.opts.createDest && e.opts.expectedDest != "":
		return &usageError{msg: "--create and --dest-version exclude each other"}
	case e.opts.createDest:
		p.ExpectedDestination = &control.WriteExpected{Kind: provider.CreateIfAbsent}
	case e.opts.expectedDest != "":
		p.ExpectedDestination = &control.WriteExpected{Kind: provider.ReplaceIfVersion, Version: provider.Version(e.opts.expectedDest)}
	}
	res, err := e.client.Move(ctx, p)
	if err != nil {
		return err
	}
	if err := e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "moved %s -> %s, version %s\n", e.args[0], e.args[1], res.Destination.Version)
	}); err != nil {
		return err
	}
	if !res.SourceDeleted && res.SourceFailure != nil {
		return &fsFailure{code: res.SourceFailure.Code, msg: "moved, but " + e.args[0] + " could not be removed: " + res.SourceFailure.Message}
	}
	return nil
}

func doDelete(ctx context.Context, e *clientEnv) error {
	res, err := e.client.Delete(ctx, control.DeleteParams{Branch: e.branch, Path: e.args[0], Cwd: e.cwd, Session: e.session,
		Expected: e.versionExpected(), Unconditional: e.unconditional})
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) { fmt.Fprintf(w, "deleted %s\n", e.args[0]) })
}

// inGit reports whether one of the paths is a .git directory or inside one.
func inGit(paths []string) bool {
	for _, p := range paths {
		for c := range strings.SplitSeq(filepath.ToSlash(p), "/") {
			if c == ".git" {
				return true
			}
		}
	}
	return false
}

// stringList is a repeatable string flag.
type stringList []string

// String implements flag.Value.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func doLog(ctx context.Context, e *clientEnv) error {
	p := control.LogParams{Cwd: e.cwd, Limit: e.opts.limitLog, Since: e.opts.since}
	if len(e.args) == 1 {
		p.Path = e.args[0]
	}
	if e.opts.refused {
		refused := true
		p.Refused = &refused
	}
	if e.opts.sessionSet {
		p.Session = e.session
	}
	p.Under = e.opts.under
	p.Exclude = e.opts.exclude
	if !e.opts.git && !inGit(append([]string{p.Path}, p.Under...)) {
		p.Exclude = append(p.Exclude, ".git")
	}
	res, err := e.client.Log(ctx, p)
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		entries := res.Entries
		for i := 0; i < len(entries); i++ {
			en := entries[i]
			who := string(en.Channel)
			if en.Session != "" {
				who += " session " + string(en.Session)
				if en.SessionName != "" {
					who += fmt.Sprintf(" (%q)", en.SessionName)
				}
			}
			if en.PID != 0 {
				who += fmt.Sprintf(" pid %d", en.PID)
			}
			op, target := string(en.Op), en.Path
			if en.To != "" {
				target += " -> " + en.To
			}
			flags := ""
			if n := savedVia(entries, i); n > 0 {
				op, target = "save", en.To
				flags = fmt.Sprintf(" (written to %s, renamed over it)", en.Path)
				i += n
			}
			if en.Unconditional {
				flags += " (unconditional)"
			}
			if en.Branch != "" {
				flags += " (in branch " + en.Branch + ")"
			}
			if en.Refused != "" {
				flags += fmt.Sprintf("  REFUSED %s: %s", en.Refused, en.Reason)
				if en.Suppressed > 0 {
					flags += fmt.Sprintf(" (%d more refused before, not logged)", en.Suppressed)
				}
			}
			fmt.Fprintf(w, "%6d  %s  %-8s %s  by %s%s\n", en.Seq, en.Time.Local().Format("2006-01-02 15:04:05"), op, target, who, flags)
		}
	})
}

// saveWindow bounds an editor's save: the temporary file is written and
// renamed over its destination within it.
const saveWindow = 2 * time.Second

// savedVia recognises an editor's save in entries (newest first): entry i
// renames a temporary file (in the destination's directory, named after
// it: .a.txt.swp, a.txt~, a.txt.tmp.123) over its destination, and the
// entries right after it (older, within saveWindow) create or write that
// temporary file for the same session and channel. It returns how many
// such older entries belong to the save (0: entry i is no save; an
// agent's create then move of two ordinary names shows as both).
func savedVia(entries []control.LogEntry, i int) int {
	r := entries[i]
	if r.Refused != "" || r.To == "" || (r.Op != control.OpRename && r.Op != control.OpMove) || !tempOf(r.Path, r.To) {
		return 0
	}
	n := 0
	for j := i + 1; j < len(entries); j++ {
		e := entries[j]
		if e.Refused != "" || e.Path != r.Path || e.To != "" || e.Session != r.Session || e.Channel != r.Channel ||
			r.Time.Sub(e.Time) > saveWindow {
			break
		}
		switch e.Op {
		case control.OpCreate, control.OpWrite, control.OpTruncate, control.OpSetattr:
			n++
			continue
		}
		break
	}
	return n
}

// tempOf reports whether tmp is named like a temporary file of dst: in
// the same directory, its name dst's with something after it, or with a
// leading dot or # (.a.txt.swp, a.txt~, #a.txt#).
func tempOf(tmp, dst string) bool {
	if path.Dir(tmp) != path.Dir(dst) {
		return false
	}
	name, base := strings.TrimLeft(path.Base(dst), ".#"), path.Base(tmp)
	return name != "" && base != path.Base(dst) && strings.HasPrefix(strings.TrimLeft(base, ".#"), name)
}
