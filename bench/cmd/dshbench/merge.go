package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/seen"
)

// Issue 34's targets for merging and the sizes of the merge section.
const (
	rebaseTargetMS    = 1000 // branch.rebase of a 200-file branch, 20 files merged
	mergeEditTargetMS = 50   // merge: true fs.edit of a 1 MiB file made stale, p50
	rebaseFiles       = 200
	rebaseMerged      = 20
	rebaseLines       = 100 // lines of each rebased file
	cacheReadFiles    = 10000
	cacheFileBytes    = 2048 // about; each file's bytes are distinct
)

// The metrics of the merge section.
const (
	rebaseMetric       = "branch_rebase_200_20"
	mergeEditP50Metric = "merge_edit_1MiB_p50"
	mergeEditP99Metric = "merge_edit_1MiB_p99"
	mergeEditCPUMetric = "merge_edit_1MiB_daemon_cpu"
	cacheDiskMetric    = "seen_cache_disk_bytes"
	cacheRSSBefore     = "seen_rss_before_mib"
	cacheRSSAfter      = "seen_rss_after_mib"
)

// runMerge measures merging over the control socket of a real daemon: the
// seen cache's disk use and the daemon's RSS after 10,000 socket reads of
// distinct files, branch.rebase of a 200-file branch where 20 files need
// a three-way merge, and merge: true fs.edits of a 1 MiB file whose token
// another session made stale.
func runMerge(c *runConfig, base string, res *Results) error {
	src := mkdir(base, "merge-src") // filled before the daemon starts (startServe reuses it)
	logf("merge: filling %d distinct files, %d rebase files and a 1 MiB file", cacheReadFiles, c.Reps*rebaseFiles)
	if err := fillDistinct(filepath.Join(src, "cache"), cacheReadFiles); err != nil {
		return err
	}
	for rep := range c.Reps { // each repetition rebases its own files
		for i := range rebaseFiles {
			if err := writeFile(filepath.Join(src, rebaseName(rep, i)), rebaseText(i, "", "")); err != nil {
				return err
			}
		}
	}
	if err := writeFile(filepath.Join(src, bigFile), mergeBigText()); err != nil {
		return err
	}
	d, _, state, err := startServe(c, base, "merge", nil)
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
	r := &Report{Target: "merge", Dir: src}
	if c.ServeArgs != "" {
		r.note("dshmount serve " + c.ServeArgs)
	}
	if err := seenCacheRun(ctx, cl, d.cmd.Process.Pid, filepath.Join(state, "seen"), r); err != nil {
		return err
	}
	for rep := range c.Reps {
		if err := rebaseRep(ctx, cl, rep, r); err != nil {
			return err
		}
	}
	if err := mergeEditRun(ctx, cl, c.MergeEdits, r); err != nil {
		return err
	}
	r.finish()
	res.Targets["merge"] = r
	return nil
}

// fillDistinct writes n files of about cacheFileBytes below dir, 1,000 per
// directory, each with bytes no other holds (the cache keeps equal bytes
// once).
func fillDistinct(dir string, n int) error {
	pad := strings.Repeat("a line of text that fills the file to about two kibibytes.\n", cacheFileBytes/60)
	for i := range n {
		if err := writeFile(filepath.Join(dir, distinctName(i)), "file "+strconv.Itoa(i)+"\n"+pad); err != nil {
			return err
		}
	}
	return nil
}

func distinctName(i int) string { return "d" + strconv.Itoa(i/1000) + "/f" + strconv.Itoa(i) + ".txt" }

// rebaseName is rebase file i of repetition rep.
func rebaseName(rep, i int) string {
	return "rebase/r" + strconv.Itoa(rep) + "/f" + strconv.Itoa(i) + ".txt"
}

// rebaseText is rebase file i: rebaseLines lines, the 10th replaced by
// head and the 90th by tail when they are not empty (the branch changes
// the head, the workspace the tail: a clean three-way merge).
func rebaseText(i int, head, tail string) string {
	var b strings.Builder
	for l := 1; l <= rebaseLines; l++ {
		switch {
		case l == 10 && head != "":
			b.WriteString(head + "\n")
		case l == 90 && tail != "":
			b.WriteString(tail + "\n")
		default:
			fmt.Fprintf(&b, "file %d line %d of the rebase benchmark\n", i, l)
		}
	}
	return b.String()
}

// mergeBigText is the 1 MiB file of the merged edits: numbered lines.
func mergeBigText() string {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("merge files: %w", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("merge files: %w", err)
	}
	return nil
}

// seenCacheRun reads every distinct file once as one session and records
// the daemon's RSS before and after and the bytes under the cache's
// directory.
func seenCacheRun(ctx context.Context, cl *control.Client, pid int, cacheDir string, r *Report) error {
	s, err := cl.OpenSession(ctx, "bench-seen")
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	r.add(cacheRSSBefore, "MiB", false, rssMiB(pid))
	logf("merge: %d socket reads of distinct files", cacheReadFiles)
	for i := range cacheReadFiles {
		if _, err := cl.Read(ctx, control.ReadParams{Path: "cache/" + distinctName(i), Session: s}); err != nil {
			return fmt.Errorf("fs.read %d: %w", i, err)
		}
	}
	r.add(cacheRSSAfter, "MiB", false, rssMiB(pid))
	r.add(cacheDiskMetric, "bytes", false, float64(duBytes(cacheDir)))
	return nil
}

// rebaseRep is one repetition of the rebase row: a branch changes every
// rebase file's head, the workspace then changes the tail of 20 of them,
// and branch.rebase merges those 20.
func rebaseRep(ctx context.Context, cl *control.Client, rep int, r *Report) error {
	name := "bench-rebase-" + strconv.Itoa(rep)
	if _, err := cl.BranchCreate(ctx, control.BranchCreateParams{Name: name}); err != nil {
		return fmt.Errorf("branch.create: %w", err)
	}
	tag := "rep " + strconv.Itoa(rep)
	for i := range rebaseFiles {
		if _, err := cl.Write(ctx, control.WriteParams{Path: rebaseName(rep, i), Branch: name, Unconditional: true,
			Content: rebaseText(i, "head changed in the branch, "+tag, "")}); err != nil {
			return fmt.Errorf("fs.write in branch: %w", err)
		}
	}
	for i := range rebaseMerged {
		k := i * (rebaseFiles / rebaseMerged)
		if _, err := cl.Write(ctx, control.WriteParams{Path: rebaseName(rep, k), Unconditional: true,
			Content: rebaseText(k, "", "tail changed in the workspace, "+tag)}); err != nil {
			return fmt.Errorf("fs.write in the workspace: %w", err)
		}
	}
	began := time.Now()
	out, err := cl.BranchRebase(ctx, control.BranchRebaseParams{Name: name})
	if err != nil {
		return fmt.Errorf("branch.rebase: %w", err)
	}
	r.add(rebaseMetric, "ms", false, ms(time.Since(began)))
	if len(out.Merged) != rebaseMerged || len(out.Flagged) != 0 {
		return fmt.Errorf("branch.rebase merged %d files (%d flagged), want %d", len(out.Merged), len(out.Flagged), rebaseMerged)
	}
	if err := cl.BranchDiscard(ctx, name); err != nil {
		return fmt.Errorf("branch.discard: %w", err)
	}
	return nil
}

// mergeEditRun makes n merge: true fs.edits of the 1 MiB file: each time
// the file is reset, sessions a and b read it, b changes a line far down,
// and a's edit near the top (its token now stale) is timed.
func mergeEditRun(ctx context.Context, cl *control.Client, n int, r *Report) error {
	var ids [2]control.SessionID
	for i, name := range []string{"bench-merge-a", "bench-merge-b"} {
		s, err := cl.OpenSession(ctx, name)
		if err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		ids[i] = s
	}
	content := mergeBigText()
	limit, maxBytes := 1<<20, int64(4<<20)
	lat := make([]time.Duration, 0, n)
	var cpu []float64 // the daemon's CPU seconds across each timed edit
	logf("merge: %d merge: true edits of a 1 MiB file", n)
	for i := range n {
		if _, err := cl.Write(ctx, control.WriteParams{Path: bigFile, Content: content, Unconditional: true}); err != nil {
			return fmt.Errorf("reset %s: %w", bigFile, err)
		}
		for _, s := range ids {
			if _, err := cl.Read(ctx, control.ReadParams{Path: bigFile, Session: s, Limit: &limit, MaxBytes: &maxBytes}); err != nil {
				return fmt.Errorf("fs.read: %w", err)
			}
		}
		if _, err := cl.Edit(ctx, control.EditParams{Path: bigFile, Session: ids[1],
			OldString: "line 80000\n", NewString: "line 80000 by b\n"}); err != nil {
			return fmt.Errorf("fs.edit by b: %w", err)
		}
		cpu0, err := daemonCPU(ctx, cl)
		if err != nil {
			return err
		}
		began := time.Now()
		out, err := cl.Edit(ctx, control.EditParams{Path: bigFile, Session: ids[0], Merge: true,
			OldString: "line 10\n", NewString: "line 10 by a " + strconv.Itoa(i) + "\n"})
		lat = append(lat, time.Since(began))
		cpu1, cerr := daemonCPU(ctx, cl)
		if cerr != nil {
			return cerr
		}
		cpu = append(cpu, cpu1-cpu0)
		if err != nil {
			return fmt.Errorf("merge: true fs.edit by a: %w", err)
		}
		if !out.Merged {
			return fmt.Errorf("merge: true fs.edit by a was not merged (the seen bytes were not kept?)")
		}
	}
	p50, p99 := percentiles(lat)
	r.add(mergeEditP50Metric, "ms", false, ms(p50))
	r.add(mergeEditP99Metric, "ms", false, ms(p99))
	r.add(mergeEditCPUMetric, "ms", false, 1000*median(cpu))
	r.note(fmt.Sprintf("merge: true fs.edit: p50 and p99 of %d edits, each over a 1 MiB file another session changed 80,000 lines away", n))
	return nil
}

// daemonCPU is the daemon's user and system CPU seconds (daemon.status).
func daemonCPU(ctx context.Context, cl *control.Client) (float64, error) {
	st, err := cl.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("daemon.status: %w", err)
	}
	return st.CPUSeconds, nil
}

// percentiles returns the p50 and p99 of d (nearest rank).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// printMerge prints the merge rows, each with its target or bound.
func printMerge(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	fmt.Fprintln(w, "\nmerge (socket, a real daemon; durability fsync unless a note says otherwise)")
	rebase := med(r, rebaseMetric)
	fmt.Fprintf(w, "  %-58s %10s ms; target < %d ms: %s\n",
		fmt.Sprintf("branch.rebase, %d-file branch, %d files merged", rebaseFiles, rebaseMerged),
		num(rebase), rebaseTargetMS, verdict(rebase < rebaseTargetMS))
	p50, p99 := med(r, mergeEditP50Metric), med(r, mergeEditP99Metric)
	fmt.Fprintf(w, "  %-58s %10s ms (p99 %s ms; daemon CPU %s ms per edit, median); target p50 < %d ms: %s\n",
		"merge: true fs.edit of a 1 MiB file, stale token, p50", num(p50), num(p99), num(med(r, mergeEditCPUMetric)),
		mergeEditTargetMS, verdict(p50 < mergeEditTargetMS))
	disk := med(r, cacheDiskMetric)
	fmt.Fprintf(w, "  %-58s %10s MiB; bound --merge-cache %d MiB: %s\n",
		fmt.Sprintf("seen cache on disk after %d reads of distinct files", cacheReadFiles),
		num(disk/(1<<20)), seen.DefaultMaxBytes>>20, verdict(!math.IsNaN(disk) && disk <= seen.DefaultMaxBytes))
	before, after := med(r, cacheRSSBefore), med(r, cacheRSSAfter)
	fmt.Fprintf(w, "  %-58s %10s MiB (%+.1f MiB across the reads; no target)\n",
		"daemon RSS after them", num(after), after-before)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
