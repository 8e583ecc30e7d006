package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dshmount/dshmount/control"
)

// The fsmonitor rows: `git status` on the Go source tree natively, on the
// mount, and on the mount with dshmount's core.fsmonitor hook and the
// untracked cache; then what the backing-tree watcher costs on a
// 100,000-file workspace and how soon an out-of-band change shows through
// the mount.

// gitStatusReps is how often each git status is timed (after a warm-up).
const gitStatusReps = 7

// Watcher-cost workload sizes.
const (
	watchFiles      = 100_000
	watchDirs       = 100
	watchLatencyN   = 200
	watchQuietFor   = time.Second
	watchSettleWait = 5 * time.Minute
)

// fsmonitorTarget measures the git status and watcher rows into
// res.Targets["fsmonitor"].
func fsmonitorTarget(c *runConfig, base, tarPath string, res *Results) error {
	r := &Report{Target: "fsmonitor", Dir: base}
	runDir := mkdir(base, "fsm-run")
	env := append(os.Environ(), "DSH_RUN_DIR="+runDir, "GIT_CONFIG_NOSYSTEM=1", "HOME="+mkdir(base, "fsm-home"))

	native := mkdir(base, "fsm-native")
	logf("git status: native %s", native)
	if err := goSourceRepo(native, tarPath, env); err != nil {
		return err
	}
	if err := timeGitStatus(r, "git_status_native", filepath.Join(native, "src"), env); err != nil {
		return err
	}

	src, mnt, state := mkdir(base, "fsm-src"), mkdir(base, "fsm-mnt"), mkdir(base, "fsm-state")
	if err := goSourceRepo(src, tarPath, env); err != nil {
		return err
	}
	args := append([]string{"serve", "--watch", "--state", state}, strings.Fields(c.ServeArgs)...)
	cmd := exec.Command(c.Dshmount, append(args, src, mnt)...)
	cmd.Env = env
	d, err := startDaemon(cmd, "ready mount=")
	if err != nil {
		return fmt.Errorf("dshmount serve --watch: %w", err)
	}
	defer d.stop()
	repo := filepath.Join(mnt, "src")
	logf("git status: the mount %s, without and with the hook", repo)
	if err := timeGitStatus(r, "git_status_mount", repo, env); err != nil {
		return err
	}
	hook := c.Dshmount + " fsmonitor"
	for _, v := range []struct{ name, hook string }{
		{"git_status_mount_fsmonitor", hook},
		{"git_status_mount_fsmonitor_nosync", hook + " --no-sync"},
	} {
		if err := timeGitStatus(r, v.name, repo, env, "-c", "core.fsmonitor="+v.hook, "-c", "core.untrackedCache=true"); err != nil {
			return err
		}
	}
	r.note("git status: `git status --porcelain` on the Go source tree (" + strconv.Itoa(countFiles(filepath.Join(src, "src"))) +
		" paths), committed; median of " + strconv.Itoa(gitStatusReps) + " runs after 3 warm-ups; the hook rows set core.fsmonitor to `dshmount fsmonitor` (serve --watch) and core.untrackedCache true")
	d.stop()

	if err := watcherCost(c, base, env, r); err != nil {
		return err
	}
	r.finish()
	res.Targets["fsmonitor"] = r
	return nil
}

// goSourceRepo extracts the Go source tree into dir/src and commits it.
func goSourceRepo(dir, tarPath string, env []string) error {
	if err := run(dir, "tar", "-xf", tarPath); err != nil {
		return err
	}
	src := filepath.Join(dir, "src")
	for _, a := range [][]string{
		{"init", "-q"}, {"config", "gc.auto", "0"}, {"config", "maintenance.auto", "false"},
		{"add", "-A"}, {"commit", "-q", "-m", "bench"},
	} {
		if err := gitRun(src, env, a...); err != nil {
			return err
		}
	}
	return nil
}

// gitRun runs git in dir with env.
func gitRun(dir string, env []string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(env, "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %v in %s: %w: %s", args, dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// timeGitStatus records gitStatusReps timings of `git [pre...] status
// --porcelain` in dir after three warm-ups (the hook needs two to hold a
// token of the daemon).
func timeGitStatus(r *Report, name, dir string, env []string, pre ...string) error {
	args := append(append([]string{}, pre...), "status", "--porcelain")
	for range 3 {
		if err := gitRun(dir, env, args...); err != nil {
			return err
		}
	}
	for range gitStatusReps {
		start := time.Now()
		if err := gitRun(dir, env, args...); err != nil {
			return err
		}
		r.add(name, "s", false, time.Since(start).Seconds())
	}
	return nil
}

// countFiles counts the paths below dir.
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n
}

// watcherCost starts a watching daemon on an empty workspace, creates
// watchFiles files in it out of band and records the daemon's CPU time and
// RSS for them, then the latency of out-of-band saves until they show
// through the mount.
func watcherCost(c *runConfig, base string, env []string, r *Report) error {
	src, mnt, state := mkdir(base, "wc-src"), mkdir(base, "wc-mnt"), mkdir(base, "wc-state")
	args := append([]string{"serve", "--watch", "--state", state}, strings.Fields(c.ServeArgs)...)
	cmd := exec.Command(c.Dshmount, append(args, src, mnt)...)
	cmd.Env = env
	d, err := startDaemon(cmd, "ready mount=")
	if err != nil {
		return fmt.Errorf("dshmount serve --watch: %w", err)
	}
	defer d.stop()
	pid := d.cmd.Process.Pid
	cl, err := control.Dial(filepath.Join(state, "run", "control.sock"))
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer cl.Close()
	ctx := context.Background()
	seqNow := func() (uint64, error) {
		res, err := cl.Changes(ctx, control.ChangesParams{})
		if err != nil {
			return 0, err
		}
		return res.Seq, nil
	}
	logf("watcher: %d files created in the workspace directory", watchFiles)
	seq0, err := seqNow()
	if err != nil {
		return err
	}
	cpu0, rss0 := cpuSeconds(pid), rssMiB(pid)
	start := time.Now()
	data := []byte("x\n")
	for i := range watchFiles {
		dir := filepath.Join(src, fmt.Sprintf("d%03d", i%watchDirs))
		if i < watchDirs {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d", i)), data, 0o644); err != nil {
			return err
		}
	}
	created := time.Since(start)
	// Settled: the feed's seq has not moved for watchQuietFor.
	last, quiet := uint64(0), time.Now()
	for time.Since(quiet) < watchQuietFor {
		if time.Since(start) > watchSettleWait {
			return fmt.Errorf("the watcher did not settle within %s", watchSettleWait)
		}
		s, err := seqNow()
		if err != nil {
			return err
		}
		if s != last {
			last, quiet = s, time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	settled := quiet.Sub(start)
	r.add("watch_100k_create_cpu", "s", false, cpuSeconds(pid)-cpu0)
	r.add("watch_100k_rss_before", "MiB", false, rss0)
	r.add("watch_100k_rss_after", "MiB", false, rssMiB(pid))
	r.add("watch_100k_settled", "s", false, settled.Seconds())
	r.add("watch_100k_feed_entries", "entries", false, float64(last-seq0))
	r.note(fmt.Sprintf("watcher: %d files in %d new directories created directly in the workspace directory in %.1f s; "+
		"cpu is the daemon's utime+stime for them (/proc/PID/stat), settled when the change feed stood still for %s",
		watchFiles, watchDirs, created.Seconds(), watchQuietFor))

	logf("watcher: out-of-band visibility latency, %d saves", watchLatencyN)
	name := filepath.Join("d000", "f000000")
	var lat []time.Duration
	for i := range watchLatencyN {
		want := fmt.Sprintf("save %d\n", i)
		if _, err := os.ReadFile(filepath.Join(mnt, name)); err != nil { // cached by the kernel
			return err
		}
		begin := time.Now()
		tmp := filepath.Join(src, name+".new")
		if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(src, name)); err != nil {
			return err
		}
		for {
			b, err := os.ReadFile(filepath.Join(mnt, name))
			if err == nil && string(b) == want {
				break
			}
			if time.Since(begin) > 30*time.Second {
				return fmt.Errorf("an out-of-band save did not show through the mount within 30 s")
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(begin))
	}
	slices.Sort(lat)
	r.add("watch_visible_p50", "ms", false, float64(lat[len(lat)/2].Microseconds())/1000)
	r.add("watch_visible_p99", "ms", false, float64(lat[len(lat)*99/100].Microseconds())/1000)
	r.note(fmt.Sprintf("visibility: %d out-of-band saves (write a temp file, rename it over the name) in the %d-file workspace, "+
		"each polled through the mount until its new bytes show", watchLatencyN, watchFiles))
	return nil
}

// cpuSeconds is utime+stime of pid from /proc/PID/stat.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// fsmonitorGoal is the target: git status on the mount with the
// hook at most this many times native git status.
const fsmonitorGoal = 1.5

// printFsmonitor prints the git status and watcher rows.
func printFsmonitor(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	native := med(r, "git_status_native")
	fmt.Fprintf(w, "\ngit status on the Go source tree\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "git status\tunit\tmedian\tvs native\ttarget\t")
	for _, row := range []struct{ name, label string }{
		{"git_status_native", "native, no hook"},
		{"git_status_mount", "mount, no hook"},
		{"git_status_mount_fsmonitor", "mount, hook + untracked cache"},
		{"git_status_mount_fsmonitor_nosync", "mount, hook --no-sync + untracked cache"},
	} {
		v := med(r, row.name)
		goal := ""
		if row.name == "git_status_mount_fsmonitor" {
			goal = fmt.Sprintf("≤%.1f× %s", fsmonitorGoal, verdict(v <= fsmonitorGoal*native))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", row.label, "s", num(v), ratio(v, native), goal)
	}
	tw.Flush()
	fmt.Fprintf(w, "watcher on a %d-file workspace: %s s cpu and RSS %s → %s MiB for %d out-of-band creates (settled after %s s); "+
		"%s feed entries; out-of-band save visible through the mount p50 %s ms, p99 %s ms\n",
		watchFiles, num(med(r, "watch_100k_create_cpu")), num(med(r, "watch_100k_rss_before")), num(med(r, "watch_100k_rss_after")),
		watchFiles, num(med(r, "watch_100k_settled")), num(med(r, "watch_100k_feed_entries")), num(med(r, "watch_visible_p50")), num(med(r, "watch_visible_p99")))
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note (fsmonitor): %s\n", n)
	}
}
