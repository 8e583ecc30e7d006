package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
)

// The targets of the socket edit and memory rows.
const (
	// editShareTarget: guarded socket edits (default durability) reach at
	// least this share of the disk's fsync-bound publication rate.
	editShareTarget = 0.8
	// noSyncEditTarget: guarded socket edits per second with
	// `serve --durability none`.
	noSyncEditTarget = 10000
	// read1MiBTarget: fs.read of 1 MiB over the socket, in ms.
	read1MiBTarget = 5
	// rssTarget: daemon RSS after the memory fill, in MiB.
	rssTarget = 200
)

// The metrics of measureEditShare.
const (
	fsyncLimitMetric  = "fsync_publish_limit"
	nosyncLimitMetric = "nosync_publish_limit"
	pairedEditMetric  = "agent_edit_rate_paired"
	editShareMetric   = "agent_edit_fsync_share"
)

// measureEditShare measures guarded edits against the disk's fsync-bound
// limit in the same run: for c.EditTime in all, each round makes one bare
// publication (what a publish cannot avoid: write a temp file of the edit
// file's size and fsync it, rename it over a target, fsync the directory),
// the same publication without the fsyncs (the ceiling of --durability
// none) and two guarded edits through ops, so that all three see the same
// disk and the same neighbours from one moment to the next. It adds both
// limits, the paired edit rate and its ratio to the fsync-bound limit.
func measureEditShare(ctx context.Context, c *socketConfig, ops agentOps, r *Report) error {
	dir := filepath.Join(c.Dir, c.Sub)
	rel := c.Sub + "/" + editFile
	v, _, err := ops.read(ctx, rel)
	if err != nil {
		return fmt.Errorf("read before paired edits: %w", err)
	}
	p, err := newBarePublisher(dir)
	if err != nil {
		return err
	}
	defer p.close()
	pairs := [2][2]string{{"alpha", "omega"}, {"omega", "alpha"}}
	var pubs, edits int
	var pubTime, nosyncTime, editTime time.Duration
	for start := time.Now(); time.Since(start) < c.EditTime; {
		t0 := time.Now()
		if err := p.publish(true); err != nil {
			return err
		}
		t1 := time.Now()
		if err := p.publish(false); err != nil {
			return err
		}
		t2 := time.Now()
		for range 2 { // an even count leaves the file as it was
			if v, err = ops.edit(ctx, rel, pairs[edits%2][0], pairs[edits%2][1], v); err != nil {
				return fmt.Errorf("paired edit %d: %w", edits, err)
			}
			edits++
		}
		pubTime, nosyncTime, editTime = pubTime+t1.Sub(t0), nosyncTime+t2.Sub(t1), editTime+time.Since(t2)
		pubs++
	}
	limit, rate := float64(pubs)/pubTime.Seconds(), float64(edits)/editTime.Seconds()
	r.add(fsyncLimitMetric, "publishes/s", true, limit)
	r.add(nosyncLimitMetric, "publishes/s", true, float64(pubs)/nosyncTime.Seconds())
	r.add(pairedEditMetric, "edits/s", true, rate)
	r.add(editShareMetric, "ratio", true, rate/limit)
	return nil
}

// barePublisher makes bare publications in one directory.
type barePublisher struct {
	dir    *os.File
	path   string
	target string
	data   []byte
	n      int
}

func newBarePublisher(dir string) (*barePublisher, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("fsync limit: %w", err)
	}
	return &barePublisher{dir: d, path: dir, target: filepath.Join(dir, ".fsync-limit.txt"),
		data: []byte("package bench\n\nconst word = \"alpha\"\n")}, nil
}

// publish writes a temp file and (with sync) fsyncs it, renames it over the
// target and (with sync) fsyncs the directory.
func (p *barePublisher) publish(sync bool) error {
	tmp := filepath.Join(p.path, ".fsync-limit-"+strconv.Itoa(p.n)+".tmp")
	p.n++
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("fsync limit: %w", err)
	}
	_, err = f.Write(p.data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.target)
	}
	if err == nil && sync {
		err = p.dir.Sync()
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fsync limit: %w", err)
	}
	return nil
}

func (p *barePublisher) close() {
	_ = os.Remove(p.target)
	_ = p.dir.Close()
}

// printSpeedTargets prints one line per target of the socket and memory
// levers, each with its measured numbers and met / NOT met.
func printSpeedTargets(w io.Writer, res *Results) {
	sock, nosync := res.Targets["socket"], res.Targets["socket-nosync"]
	var lines []string
	if share := med(sock, editShareMetric); !math.IsNaN(share) {
		lines = append(lines, fmt.Sprintf("guarded fs.edit, default durability: %.0f edits/s against the disk's fsync-bound limit of %.0f publishes/s, interleaved op by op = %.0f%% (median of the repetitions' ratios); target ≥ %.0f%%: %s",
			med(sock, pairedEditMetric), med(sock, fsyncLimitMetric), 100*share, 100*editShareTarget, verdict(share >= editShareTarget)))
	}
	if rate := med(nosync, "agent_edit_rate"); !math.IsNaN(rate) {
		lines = append(lines, fmt.Sprintf("guarded fs.edit, --durability none: %.0f edits/s (the disk's bare publication without fsync, same run: %.0f/s); target ≥ %d: %s",
			rate, med(nosync, nosyncLimitMetric), noSyncEditTarget, verdict(rate >= noSyncEditTarget)))
	}
	if ms := med(sock, "agent_read_1MiB"); !math.IsNaN(ms) {
		lines = append(lines, fmt.Sprintf("fs.read of 1 MiB over the socket: %.2f ms; target ≤ %d ms: %s",
			ms, read1MiBTarget, verdict(ms <= read1MiBTarget)))
	}
	if m := res.Memory; m != nil {
		lines = append(lines, fmt.Sprintf("daemon RSS after %d files created through the mount: %.1f MiB; target ≤ %d MiB: %s",
			int(m["files"]), m["rss_after_mib"], rssTarget, verdict(m["rss_after_mib"] <= rssTarget)))
		if b, ok := m["badger_bytes"]; ok {
			lines = append(lines, fmt.Sprintf("Badger: %.1f MiB on disk (du of the state's db), %.0f bytes per tracked file (%d files)",
				b/(1<<20), m["badger_bytes_per_file"], int(m["files"])))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nsocket and memory targets")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// recordBadgerBytes adds the Badger directory's allocated size under state
// and its share per tracked file to mem.
func recordBadgerBytes(mem map[string]float64, state string) {
	b := float64(duBytes(filepath.Join(state, "db")))
	mem["badger_bytes"] = b
	if mem["files"] > 0 {
		mem["badger_bytes_per_file"] = b / mem["files"]
	}
}

// runSocketSpeed is `dshbench socketspeed`: only the socket and memory rows
// of `dshbench run` (guarded edits with the fsync-bound limit measured in
// the same run, edits without fsync, the 1 MiB read, RSS and Badger bytes
// after files created through the mount), each with its target.
func runSocketSpeed(args []string) error {
	var c runConfig
	f := flag.NewFlagSet("socketspeed", flag.ContinueOnError)
	f.StringVar(&c.Dshmount, "dshmount", "bin/dshmount", "dshmount binary")
	f.StringVar(&c.Base, "base", "/var/tmp", "where the temporary directories go")
	f.StringVar(&c.Out, "out", "", "results file (empty: none)")
	f.IntVar(&c.Reps, "reps", 3, "repetitions")
	f.IntVar(&c.MemFiles, "mem-files", 100000, "files created through the mount for the memory rows (0: skip)")
	f.DurationVar(&c.EditTime, "edit-time", 2*time.Second, "guarded-edit run duration")
	f.StringVar(&c.ServeArgs, "serve-args", "", "extra flags for dshmount serve (space separated)")
	if err := f.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own path: %w", err)
	}
	if c.Dshmount, err = filepath.Abs(c.Dshmount); err != nil {
		return err
	}
	base, err := os.MkdirTemp(c.Base, "dshbench-socket-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(base)
	began := time.Now()
	res := &Results{Time: began.UTC(), Config: c, Targets: map[string]*Report{}, Kernel: kernel()}
	reps, et := strconv.Itoa(c.Reps), c.EditTime.String()
	for _, mode := range []struct{ target, durability string }{{"socket", "fsync"}, {"socket-nosync", "none"}} {
		d, src, state, err := startServe(&c, base, mode.target, nil, "--durability", mode.durability)
		if err != nil {
			return err
		}
		logf("%s (serve --durability %s)", mode.target, mode.durability)
		res.Targets[mode.target], err = driver(exec.Command(self, "socket", "--socket", socketPath(state),
			"--dir", src, "--target", mode.target, "--reps", reps, "--edit-time", et))
		d.stop()
		if err != nil {
			return err
		}
	}
	if c.MemFiles > 0 {
		if res.Memory, err = measureMemory(&c, self, base); err != nil {
			return err
		}
	}
	res.Elapsed = time.Since(began).Seconds()
	printSocketRows(os.Stdout, res)
	printSpeedTargets(os.Stdout, res)
	if c.Out != "" {
		return writeResults(res, c.Out)
	}
	return nil
}

// startServe starts `dshmount serve` on fresh directories under base named
// after name, with extra flags after the configured ones.
func startServe(c *runConfig, base, name string, stderr io.Writer, extra ...string) (d *daemon, src, state string, err error) {
	src, mnt, state := mkdir(base, name+"-src"), mkdir(base, name+"-mnt"), mkdir(base, name+"-state")
	args := append([]string{"serve", "--state", state}, strings.Fields(c.ServeArgs)...)
	args = append(args, extra...)
	args = append(args, src, mnt)
	cmd := exec.Command(c.Dshmount, args...)
	cmd.Stderr = stderr
	if d, err = startDaemon(cmd, "ready mount="); err != nil {
		return nil, "", "", fmt.Errorf("dshmount %s: %w", strings.Join(args, " "), err)
	}
	return d, src, state, nil
}

func socketPath(state string) string { return filepath.Join(state, "run", "control.sock") }

// measureMemory creates c.MemFiles files through a fresh mount as a bound
// session and returns the daemon's RSS and Badger's bytes.
func measureMemory(c *runConfig, self, base string) (map[string]float64, error) {
	d, _, state, err := startServe(c, base, "mem", nil)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	ctx := context.Background()
	cl, err := control.Dial(socketPath(state))
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	session, err := cl.OpenSession(ctx, "bench-memory")
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	mem := map[string]float64{"rss_before_mib": rssMiB(d.cmd.Process.Pid)}
	logf("memory: %d files through the mount", c.MemFiles)
	start := time.Now()
	mnt := filepath.Join(base, "mem-mnt")
	cmd := exec.Command(c.Dshmount, "exec", "--socket", socketPath(state), "--session", string(session), "--",
		self, "fill", "--dir", filepath.Join(mnt, "mem"), "--n", strconv.Itoa(c.MemFiles))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("fill: %w: %s", err, out)
	}
	mem["fill_s"] = time.Since(start).Seconds()
	mem["files"] = float64(c.MemFiles)
	mem["rss_after_mib"] = rssMiB(d.cmd.Process.Pid)
	time.Sleep(2 * time.Second) // let batched state writes land
	mem["state_bytes"] = float64(duBytes(state))
	mem["state_bytes_per_file"] = mem["state_bytes"] / mem["files"]
	recordBadgerBytes(mem, state)
	return mem, nil
}

// printSocketRows prints the socket rows of every repetition's median.
func printSocketRows(w io.Writer, res *Results) {
	for _, name := range []string{"socket", "socket-nosync"} {
		r := res.Targets[name]
		if r == nil {
			continue
		}
		r.finish()
		fmt.Fprintf(w, "%s:\n", name)
		for _, m := range r.Metrics {
			fmt.Fprintf(w, "  %-22s %10s %-12s samples %v\n", m.Name, num(m.Median), m.Unit, roundAll(m.Samples))
		}
	}
	if m := res.Memory; m != nil {
		fmt.Fprintf(w, "memory: RSS %.1f MiB before, %.1f MiB after %d files (%.1f s); state %.1f MiB\n",
			m["rss_before_mib"], m["rss_after_mib"], int(m["files"]), m["fill_s"], m["state_bytes"]/(1<<20))
	}
}

func roundAll(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = num(x)
	}
	return out
}

// writeResults writes res as JSON to path.
func writeResults(res *Results, path string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
