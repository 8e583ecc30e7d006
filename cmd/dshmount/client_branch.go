package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
)

// branchVerb is "dshmount branch": create, list, diff, commit, discard.
func branchVerb() clientVerb {
	return clientVerb{name: "branch", summary: "create, list, review, commit or discard a copy-on-write branch",
		synopsis: "create NAME [--mount DIR] | list | diff NAME [--stat] [--patch] | commit NAME [--keep] [--rebase] | rebase NAME [--markers] | discard NAME | mount NAME DIR | unmount NAME",
		minArgs:  1, maxArgs: 3, do: doBranch,
		flags: func(fs *flag.FlagSet, o *verbOpts) {
			fs.StringVar(&o.mountDir, "mount", "", "create: also serve the branch as a mount at this empty directory (see mount)")
			fs.BoolVar(&o.stat, "stat", false, "diff: one line per changed file and the lines added and removed")
			fs.BoolVar(&o.asPatch, "patch", false, "diff: print the changes as an apply_patch text instead of a unified diff")
			fs.BoolVar(&o.keep, "keep", false, "commit: keep the branch, empty, over the new workspace state")
			fs.BoolVar(&o.rebase, "rebase", false, "commit: rebase first (see rebase), then commit")
			fs.BoolVar(&o.markers, "markers", false, "rebase: write conflicts into the branch as conflict markers instead of refusing")
		},
		help: "A branch is a named copy-on-write layer over the workspace: requests with its name\n" +
			"(the branch parameter of the socket methods, session.open {branch}) change only the\n" +
			"branch; files it has not changed show the live workspace.\n\n" +
			"  create NAME     make an empty branch (NAME: 1-64 of A-Z a-z 0-9 . _ -);\n" +
			"                  with --mount DIR, also mount it at DIR (as mount does)\n" +
			"  list            the branches, when made, how many paths each changed, where\n" +
			"                  each is mounted\n" +
			"  diff NAME       what the branch changed, as a unified diff 'git apply' takes\n" +
			"                  (binary files named only); --stat summarises, --patch prints an\n" +
			"                  apply_patch text\n" +
			"  commit NAME     apply every change to the workspace, all or nothing: if the\n" +
			"                  workspace changed a path since the branch started from it,\n" +
			"                  nothing is applied (FS_STALE_VERSION naming the paths, exit 1)\n" +
			"                  and the branch stays; --keep keeps the branch, empty;\n" +
			"                  --rebase rebases first\n" +
			"  rebase NAME     merge the workspace's changes since the branch started each\n" +
			"                  file into the branch (git's three-way merge): all clean, the\n" +
			"                  branch's files and bases move on and a commit then applies;\n" +
			"                  any conflict, nothing changes (FS_MERGE_CONFLICT, the hunks\n" +
			"                  printed, exit 1). --markers writes git-style conflict markers\n" +
			"                  into the conflicted files instead; a commit is refused until\n" +
			"                  they are gone. Renames are a delete plus a create\n" +
			"  discard NAME    drop the branch and everything in it (unmounting it first)\n" +
			"  mount NAME DIR  serve the branch as a second mount at DIR, so editors, builds\n" +
			"                  and git work in it: DIR (absolute or relative to the current\n" +
			"                  directory) must be an empty directory of yours, outside the\n" +
			"                  workspace and its mount, and not a mount point. The daemon\n" +
			"                  mounts it there again when it restarts. 'dshmount exec\n" +
			"                  --branch NAME -- CMD' runs CMD in it, bound to a session\n" +
			"  unmount NAME    end the branch's mount (the branch stays); a busy mount is\n" +
			"                  detached lazily\n\n" +
			"commit (without --keep) and discard unmount the branch first; a refused commit\n" +
			"mounts it again."}
}

func doBranch(ctx context.Context, e *clientEnv) error {
	sub := e.args[0]
	name := ""
	if len(e.args) > 1 {
		name = e.args[1]
	}
	needName := func() error {
		if name == "" {
			return &usageError{msg: fmt.Sprintf("branch %s needs a branch name", sub)}
		}
		return nil
	}
	if len(e.args) > 2 && sub != "mount" {
		return &usageError{msg: fmt.Sprintf("branch %s takes one branch name; run 'dshmount branch --help'", sub)}
	}
	if e.opts.mountDir != "" && sub != "create" {
		return &usageError{msg: "--mount goes with branch create; for an existing branch use 'dshmount branch mount NAME DIR'"}
	}
	switch sub {
	case "create":
		if err := needName(); err != nil {
			return err
		}
		p := control.BranchCreateParams{Name: name}
		if e.opts.mountDir != "" {
			wd, err := shellDir()
			if err != nil {
				return err
			}
			p.Mount, p.Cwd = absDir(e.opts.mountDir), wd
		}
		info, err := e.client.BranchCreate(ctx, p)
		if err != nil {
			return err
		}
		return e.emit(info, func(w io.Writer) {
			fmt.Fprintf(w, "created branch %s", info.Name)
			if info.Mount != "" {
				fmt.Fprintf(w, ", mounted at %s", info.Mount)
			}
			fmt.Fprintln(w)
		})
	case "mount":
		if len(e.args) != 3 {
			return &usageError{msg: "branch mount needs a branch name and a directory: dshmount branch mount NAME DIR"}
		}
		wd, err := shellDir()
		if err != nil {
			return err
		}
		res, err := e.client.BranchMount(ctx, control.BranchMountParams{Name: name, Mount: absDir(e.args[2]), Cwd: wd})
		if err != nil {
			return err
		}
		return e.emit(res, func(w io.Writer) { fmt.Fprintf(w, "mounted branch %s at %s\n", name, res.Mount) })
	case "unmount":
		if err := needName(); err != nil {
			return err
		}
		if err := e.client.BranchUnmount(ctx, name); err != nil {
			return err
		}
		return e.emit(control.Empty{}, func(w io.Writer) { fmt.Fprintf(w, "unmounted branch %s\n", name) })
	case "list":
		if name != "" {
			return &usageError{msg: "branch list takes no name"}
		}
		res, err := e.client.BranchList(ctx)
		if err != nil {
			return err
		}
		return e.emit(res, func(w io.Writer) {
			for _, b := range res.Branches {
				fmt.Fprintf(w, "%-24s %4d changed  created %s", b.Name, b.Changed, b.Created.Local().Format(time.RFC3339))
				if b.Mount != "" {
					fmt.Fprintf(w, "  mounted at %s", b.Mount)
				}
				fmt.Fprintln(w)
			}
		})
	case "diff":
		if err := needName(); err != nil {
			return err
		}
		return doBranchDiff(ctx, e, name)
	case "commit":
		if err := needName(); err != nil {
			return err
		}
		res, err := e.client.BranchCommit(ctx, control.BranchCommitParams{Name: name, Keep: e.opts.keep, Rebase: e.opts.rebase, Session: string(e.session)})
		if err != nil {
			return err
		}
		return e.emit(res, func(w io.Writer) {
			for _, f := range res.Files {
				what := "wrote  "
				if f.Deleted {
					what = "deleted"
				}
				fmt.Fprintf(w, "%s %s\n", what, f.Path)
			}
			fmt.Fprintf(w, "committed branch %s: %s", name, plural(len(res.Files), "file"))
			if res.Kept {
				fmt.Fprintf(w, " (the branch is kept, empty)")
			}
			fmt.Fprintln(w)
		})
	case "rebase":
		if err := needName(); err != nil {
			return err
		}
		res, err := e.client.BranchRebase(ctx, control.BranchRebaseParams{Name: name, Markers: e.opts.markers})
		if err != nil {
			return err
		}
		return e.emit(res, func(w io.Writer) {
			flagged := map[string]bool{}
			for _, p := range res.Flagged {
				flagged[p] = true
			}
			for _, p := range res.Merged {
				what := "merged   "
				if flagged[p] {
					what = "conflict "
				}
				fmt.Fprintf(w, "%s %s\n", what, p)
			}
			fmt.Fprintf(w, "rebased branch %s: %d files merged", name, len(res.Merged))
			if len(res.Flagged) > 0 {
				fmt.Fprintf(w, ", %d with conflict markers to resolve before a commit", len(res.Flagged))
			}
			fmt.Fprintln(w)
		})
	case "discard":
		if err := needName(); err != nil {
			return err
		}
		if err := e.client.BranchDiscard(ctx, name); err != nil {
			return err
		}
		return e.emit(control.Empty{}, func(w io.Writer) { fmt.Fprintf(w, "discarded branch %s\n", name) })
	}
	return &usageError{msg: fmt.Sprintf("unknown branch command %q; expected create, list, diff, commit, rebase, discard, mount or unmount", sub)}
}

// absDir makes a directory argument absolute against the current
// directory (unchanged when that cannot be known: the daemon then refuses
// a relative one).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// doBranchDiff streams every page of a branch's diff.
func doBranchDiff(ctx context.Context, e *clientEnv, name string) error {
	if e.opts.stat && e.opts.asPatch {
		return &usageError{msg: "--stat and --patch exclude each other"}
	}
	w := e.io.out
	offset := 0
	var all []control.BranchDiffResult
	if e.opts.asPatch && !e.json {
		fmt.Fprintln(w, "*** Begin Patch")
	}
	for {
		page, err := e.client.BranchDiff(ctx, control.BranchDiffParams{Name: name, Offset: offset})
		if err != nil {
			return err
		}
		switch {
		case e.json:
			all = append(all, *page)
		case e.opts.stat:
			printDiffStat(w, page)
		case e.opts.asPatch:
			if err := printApplyPatch(w, page); err != nil {
				return err
			}
		default:
			fmt.Fprint(w, page.Diff)
		}
		if page.Next == nil {
			break
		}
		offset = *page.Next
	}
	if e.json {
		return e.emit(all, nil)
	}
	if e.opts.asPatch {
		fmt.Fprintln(w, "*** End Patch")
	}
	return nil
}

// printDiffStat prints "status path +added -removed" per file of a page.
func printDiffStat(w io.Writer, page *control.BranchDiffResult) {
	counts := map[string][2]int{}
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(page.Diff))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "diff --git "):
			cur = l[strings.LastIndex(l, " b/")+3:]
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			c := counts[cur]
			c[0]++
			counts[cur] = c
		case strings.HasPrefix(l, "-"):
			c := counts[cur]
			c[1]++
			counts[cur] = c
		}
	}
	for _, f := range page.Files {
		c := counts[f.Path]
		name := f.Path
		if f.From != "" {
			name = f.From + " -> " + f.Path
		}
		if f.Binary {
			fmt.Fprintf(w, "%-9s %s (binary)%s\n", f.Status, name, diffNote(f))
			continue
		}
		fmt.Fprintf(w, "%-9s %s +%d -%d%s\n", f.Status, name, c[0], c[1], diffNote(f))
	}
}

// diffNote is the --stat note of a file in conflict, without a base copy
// or no longer visible in the daemon's view ("" for none).
func diffNote(f control.BranchFile) string {
	switch {
	case f.Access == "hidden":
		return " (hidden in this daemon's view: content withheld, a commit is refused)"
	case f.Access != "":
		return " (" + f.Access + " in this daemon's view: a commit is refused)"
	case f.Conflict && f.NoBase:
		return " (conflict: the workspace changed it; no base copy: the diff also undoes that change)"
	case f.Conflict:
		return " (conflict: the workspace changed it)"
	case f.NoBase:
		return " (no base copy: diffed against the workspace)"
	}
	return ""
}

// printApplyPatch turns a page's unified diff into apply_patch operations.
func printApplyPatch(w io.Writer, page *control.BranchDiffResult) error {
	byPath := map[string]control.BranchFile{}
	for _, f := range page.Files {
		byPath[f.Path] = f
	}
	var f control.BranchFile
	inHunks := false
	sc := bufio.NewScanner(strings.NewReader(page.Diff))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "diff --git "):
			f = byPath[l[strings.LastIndex(l, " b/")+3:]]
			inHunks = false
			switch {
			case f.Binary:
				return &fsFailure{code: "FS_NOT_TEXT", path: f.Path,
					msg: "an apply_patch text cannot hold the binary file " + f.Path + "; use the unified diff (without --patch)"}
			case f.Status == "added":
				fmt.Fprintf(w, "*** Add File: %s\n", f.Path)
			case f.Status == "deleted":
				fmt.Fprintf(w, "*** Delete File: %s\n", f.Path)
			case f.Status == "renamed":
				fmt.Fprintf(w, "*** Update File: %s\n*** Move to: %s\n", f.From, f.Path)
			default:
				fmt.Fprintf(w, "*** Update File: %s\n", f.Path)
			}
		case strings.HasPrefix(l, "@@"):
			inHunks = true
			if f.Status != "added" && f.Status != "deleted" {
				fmt.Fprintln(w, "@@")
			}
		case !inHunks || strings.HasPrefix(l, `\ `):
		case f.Status == "added":
			fmt.Fprintln(w, l)
		case f.Status != "deleted":
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

// plural is "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
