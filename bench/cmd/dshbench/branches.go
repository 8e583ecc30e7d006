package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
)

// Issue 17's speed targets for branches.
const (
	branchCreateTargetMS = 10   // branch.create on a 100,000-file workspace
	branchCopyUpTargetMS = 10   // first change of a 1 MiB file in a branch
	branchCommitTargetMS = 1000 // branch.commit of 200 changed files, fsync on
	branchFiles          = 100000
	branchCommitFiles    = 200
	branchDiffFiles      = 10000
)

// runBranches measures branches over the control socket of a daemon whose
// workspace holds 100,000 files: branch.create, the first change of a
// 1 MiB file (its copy-up), a 200-file branch.commit, and every page of
// branch.diff of a 10,000-file branch with the daemon's RSS before and
// after (the diff streams: it must not hold every file at once).
func runBranches(c *runConfig, base string, res *Results) error {
	src := mkdir(base, "branch-src") // filled before the daemon starts (startServe reuses it)
	logf("branches: filling %d files", branchFiles)
	if err := fillDir(filepath.Join(src, "tree"), branchFiles); err != nil {
		return err
	}
	big := strings.Repeat("a line of about sixty-four bytes in a one mebibyte text file.\n", (1<<20)/62)
	if err := os.WriteFile(filepath.Join(src, "big.txt"), []byte("first line\n"+big), 0o644); err != nil {
		return fmt.Errorf("big file: %w", err)
	}
	d, _, state, err := startServe(c, base, "branch", nil)
	if err != nil {
		return err
	}
	defer d.stop()
	cl, err := control.Dial(socketPath(state))
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer cl.Close()
	ctx := context.Background()
	r := &Report{Target: "branches", Dir: src}
	for rep := range c.Reps {
		if err := branchRep(ctx, cl, rep, r); err != nil {
			return err
		}
	}
	if err := branchDiffRun(ctx, cl, d.cmd.Process.Pid, r); err != nil {
		return err
	}
	r.finish()
	res.Targets["branches"] = r
	return nil
}

// branchRep is one repetition of the create, copy-up and commit rows.
func branchRep(ctx context.Context, cl *control.Client, rep int, r *Report) error {
	name := "bench-" + strconv.Itoa(rep)
	began := time.Now()
	if _, err := cl.BranchCreate(ctx, control.BranchCreateParams{Name: name}); err != nil {
		return fmt.Errorf("branch.create: %w", err)
	}
	r.add("branch_create_100k", "ms", false, ms(time.Since(began)))

	limit, maxBytes := 1<<20, int64(4<<20)
	read, err := cl.Read(ctx, control.ReadParams{Path: "big.txt", Branch: name, Limit: &limit, MaxBytes: &maxBytes})
	if err != nil {
		return fmt.Errorf("fs.read in branch: %w", err)
	}
	began = time.Now()
	if _, err := cl.Edit(ctx, control.EditParams{Path: "big.txt", Branch: name, OldString: "first line",
		NewString: "first line, changed", Expected: &control.VersionExpected{Version: read.Version}}); err != nil {
		return fmt.Errorf("first fs.edit in branch (copy-up): %w", err)
	}
	r.add("branch_first_edit_1MiB", "ms", false, ms(time.Since(began)))
	for i := range 3 { // the same edit without the copy-up
		read, err = cl.Read(ctx, control.ReadParams{Path: "big.txt", Branch: name, Limit: &limit, MaxBytes: &maxBytes})
		if err != nil {
			return fmt.Errorf("fs.read in branch: %w", err)
		}
		began = time.Now()
		if _, err := cl.Edit(ctx, control.EditParams{Path: "big.txt", Branch: name, OldString: "first line, changed" + strings.Repeat("!", i),
			NewString: "first line, changed" + strings.Repeat("!", i+1), Expected: &control.VersionExpected{Version: read.Version}}); err != nil {
			return fmt.Errorf("next fs.edit in branch: %w", err)
		}
		r.add("branch_next_edit_1MiB", "ms", false, ms(time.Since(began)))
	}

	for i := range branchCommitFiles {
		rel := "tree/d" + strconv.Itoa(rep) + "/f" + strconv.Itoa(rep*1000+i)
		if _, err := cl.Write(ctx, control.WriteParams{Path: rel, Branch: name, Unconditional: true,
			Content: "changed in " + name + "\n"}); err != nil {
			return fmt.Errorf("fs.write in branch: %w", err)
		}
	}
	began = time.Now()
	out, err := cl.BranchCommit(ctx, control.BranchCommitParams{Name: name})
	if err != nil {
		return fmt.Errorf("branch.commit: %w", err)
	}
	r.add("branch_commit_200", "ms", false, ms(time.Since(began)))
	if len(out.Files) != branchCommitFiles+1 {
		return fmt.Errorf("branch.commit applied %d files, want %d", len(out.Files), branchCommitFiles+1)
	}
	return nil
}

// branchDiffRun fills a branch with 10,000 new files through atomic-free
// patches and reads its whole diff page by page.
func branchDiffRun(ctx context.Context, cl *control.Client, pid int, r *Report) error {
	const name = "bench-diff"
	if _, err := cl.BranchCreate(ctx, control.BranchCreateParams{Name: name}); err != nil {
		return fmt.Errorf("branch.create: %w", err)
	}
	for chunk := 0; chunk < branchDiffFiles; chunk += 1000 {
		var b strings.Builder
		b.WriteString("*** Begin Patch\n")
		for i := chunk; i < chunk+1000; i++ {
			fmt.Fprintf(&b, "*** Add File: new/n%d/file%d.txt\n+new file %d\n+second line\n", i/1000, i, i)
		}
		b.WriteString("*** End Patch\n")
		res, err := cl.Patch(ctx, control.PatchParams{Patch: b.String(), Branch: name})
		if err != nil {
			return fmt.Errorf("fs.patch in branch: %w", err)
		}
		if !res.Complete {
			return fmt.Errorf("fs.patch in branch incomplete")
		}
	}
	rssBefore := rssMiB(pid)
	began := time.Now()
	files, pages, offset := 0, 0, 0
	for {
		page, err := cl.BranchDiff(ctx, control.BranchDiffParams{Name: name, Offset: offset})
		if err != nil {
			return fmt.Errorf("branch.diff: %w", err)
		}
		files += len(page.Files)
		pages++
		if page.Next == nil {
			break
		}
		offset = *page.Next
	}
	r.add("branch_diff_10k", "s", false, time.Since(began).Seconds())
	r.add("branch_diff_rss_growth", "MiB", false, rssMiB(pid)-rssBefore)
	if files != branchDiffFiles {
		return fmt.Errorf("branch.diff listed %d files in %d pages, want %d", files, pages, branchDiffFiles)
	}
	r.note(fmt.Sprintf("branch.diff of %d added files in %d pages (default page size)", files, pages))
	if err := cl.BranchDiscard(ctx, name); err != nil {
		return fmt.Errorf("branch.discard: %w", err)
	}
	return nil
}

// printBranches prints the branch rows, each with its target.
func printBranches(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nbranches (socket, %d-file workspace, durability fsync)\n", branchFiles)
	row := func(name, what string, target float64) {
		v := med(r, name)
		fmt.Fprintf(w, "  %-48s %10s ms; target < %g ms: %s\n", what, num(v), target, verdict(v < target))
	}
	row("branch_create_100k", "branch.create", branchCreateTargetMS)
	fmt.Fprintf(w, "  %-48s %10s ms (the next edit of it: %s ms)\n", "first fs.edit of a 1 MiB file in the branch",
		num(med(r, "branch_first_edit_1MiB")), num(med(r, "branch_next_edit_1MiB")))
	copyUp := med(r, "branch_first_edit_1MiB") - med(r, "branch_next_edit_1MiB")
	fmt.Fprintf(w, "  %-48s %10s ms; target < %d ms: %s\n", "its copy-up (median first − median next edit)",
		num(copyUp), branchCopyUpTargetMS, verdict(copyUp < branchCopyUpTargetMS))
	row("branch_commit_200", "branch.commit of 200 changed files", branchCommitTargetMS)
	fmt.Fprintf(w, "  %-48s %10s s; daemon RSS %+.1f MiB across it (streams: a page at a time)\n",
		"branch.diff of a 10,000-file branch, every page", num(med(r, "branch_diff_10k")), med(r, "branch_diff_rss_growth"))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
