package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dshmount/dshmount/control"
)

// runConfig is one whole comparison.
type runConfig struct {
	Dshmount   string // dshmount binary
	Loopback   string // bench/loopback binary
	Base       string // parent of the temporary directories
	Out        string // results.json
	Reps       int
	SeqMiB     int
	Files      int
	MemFiles   int
	RandTime   time.Duration
	EditTime   time.Duration
	ServeArgs  string // extra flags for dshmount serve
	Only       string // comma-separated subset: native,loopback,dshmount,fsmonitor,stores,branches
	Unbound    bool   // also run the file-system workloads on the mount unbound
	ReqFiles   int    // files of the request table's steps
	ReqMiB     int    // MiB of its sequential steps
	MergeEdits int    // merge: true edits of the merge section's p50 and p99
}

// Results is bench/results.json.
type Results struct {
	Time     time.Time          `json:"time"`
	Config   runConfig          `json:"config"`
	Targets  map[string]*Report `json:"targets"`
	Memory   map[string]float64 `json:"memory,omitempty"`
	Elapsed  float64            `json:"elapsed_s"`
	Kernel   string             `json:"kernel"`
	MountOpt map[string]string  `json:"mount_options,omitempty"`
	Requests []*RequestRow      `json:"requests,omitempty"`
}

// runAll is `dshbench run`.
func runAll(args []string) error {
	var c runConfig
	f := flag.NewFlagSet("run", flag.ContinueOnError)
	f.StringVar(&c.Dshmount, "dshmount", "bin/dshmount", "dshmount binary")
	f.StringVar(&c.Loopback, "loopback", "bin/bench-loopback", "plain go-fuse loopback binary (bench/loopback)")
	f.StringVar(&c.Base, "base", "/var/tmp", "where the temporary directories go (one disk for all targets)")
	f.StringVar(&c.Out, "out", "bench/results.json", "results file")
	f.IntVar(&c.Reps, "reps", 3, "repetitions of every workload")
	f.IntVar(&c.SeqMiB, "seq-mib", 1024, "sequential file size in MiB")
	f.IntVar(&c.Files, "files", 10000, "small files")
	f.IntVar(&c.MemFiles, "mem-files", 100000, "files created through the mount for the memory measurement (0: skip)")
	f.DurationVar(&c.RandTime, "rand-time", 5*time.Second, "random-read duration")
	f.DurationVar(&c.EditTime, "edit-time", 2*time.Second, "guarded-edit run duration")
	f.StringVar(&c.ServeArgs, "serve-args", "", "extra flags for dshmount serve (space separated)")
	f.StringVar(&c.Only, "only", "native,loopback,dshmount,requests,fsmonitor,stores,branches,gitcommit,merge",
		"targets to run (requests: FUSE requests per file by opcode, daemon CPU per request and interleaved wall times, loopback vs dshmount unbound and bound; fsmonitor: git status with the hook, the watcher's cost; stores: the socket rows on Badger and on etcd; branches: create, copy-up, commit and diff costs; gitcommit: git add -A && git commit natively, unbound, bound and bound with --guard-git; merge: branch.rebase with 20 merged files, merge: true edits of a 1 MiB file, the seen cache after 10,000 reads)")
	f.BoolVar(&c.Unbound, "unbound", true, "also run the file-system workloads on the mount unbound (no session: the guard's cost is the difference)")
	f.IntVar(&c.ReqFiles, "req-files", 2000, "files of each request-table step")
	f.IntVar(&c.ReqMiB, "req-mib", 256, "MiB of the request table's sequential steps")
	f.IntVar(&c.MergeEdits, "merge-edits", 100, "merge: true edits of a 1 MiB file timed by the merge section (its p50 and p99)")
	if err := f.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own path: %w", err)
	}
	for _, p := range []*string{&c.Dshmount, &c.Loopback, &c.Out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	base, err := os.MkdirTemp(c.Base, "dshbench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(base)
	began := time.Now()
	res := &Results{Time: began.UTC(), Config: c, Targets: map[string]*Report{}, Kernel: kernel(), MountOpt: map[string]string{}}

	tarPath := filepath.Join(base, "src.tar")
	goroot := strings.TrimSpace(output("go", "env", "GOROOT"))
	if goroot == "" {
		goroot = "/usr/local/go"
	}
	if out, err := exec.Command("tar", "-C", goroot, "-cf", tarPath, "src").CombinedOutput(); err != nil {
		return fmt.Errorf("tar of the Go source: %w: %s", err, out)
	}
	fsArgs := func(dir, target string) []string {
		return []string{"fs", "--dir", dir, "--target", target, "--reps", strconv.Itoa(c.Reps),
			"--seq-mib", strconv.Itoa(c.SeqMiB), "--files", strconv.Itoa(c.Files),
			"--rand-time", c.RandTime.String(), "--tar", tarPath}
	}
	only := func(t string) bool { return strings.Contains(","+c.Only+",", ","+t+",") }

	if only("native") {
		dir := mkdir(base, "native")
		logf("native: %s", dir)
		if res.Targets["native"], err = driver(exec.Command(self, fsArgs(dir, "native")...)); err != nil {
			return err
		}
	}
	if only("loopback") {
		src, mnt := mkdir(base, "lb-src"), mkdir(base, "lb-mnt")
		logf("loopback: %s on %s", src, mnt)
		d, err := startDaemon(exec.Command(c.Loopback, src, mnt), "ready")
		if err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
		res.MountOpt["loopback"] = mountOptions(mnt)
		res.Targets["loopback"], err = driver(exec.Command(self, fsArgs(mnt, "loopback")...))
		d.stop()
		if err != nil {
			return err
		}
	}
	if only("dshmount") {
		if err := runDshmount(&c, self, base, fsArgs, res); err != nil {
			return err
		}
	}
	if only("requests") {
		entries, err := tarEntries(tarPath)
		if err != nil {
			return err
		}
		if res.Requests, err = runRequests(&c, self, base, reqTree{Tar: tarPath, Entries: entries}); err != nil {
			return err
		}
	}
	if only("fsmonitor") {
		if err := fsmonitorTarget(&c, base, tarPath, res); err != nil {
			return err
		}
	}
	if only("stores") {
		if err := runStores(&c, self, base, res); err != nil {
			return err
		}
	}
	if only("branches") {
		if err := runBranches(&c, base, res); err != nil {
			return err
		}
	}
	if only("gitcommit") {
		if err := runGitCommit(&c, base, res); err != nil {
			return err
		}
	}
	if only("merge") {
		if err := runMerge(&c, base, res); err != nil {
			return err
		}
	}
	res.Elapsed = time.Since(began).Seconds()
	printTable(os.Stdout, res)
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	fmt.Printf("\nwrote %s (whole run %.0f s)\n", c.Out, res.Elapsed)
	return nil
}

// runDshmount measures the guarded mount: the file-system workloads as a
// bound session, the control socket against in process, then memory.
func runDshmount(c *runConfig, self, base string, fsArgs func(string, string) []string, res *Results) error {
	src, mnt, state := mkdir(base, "dsh-src"), mkdir(base, "dsh-mnt"), mkdir(base, "dsh-state")
	logf("dshmount: %s on %s", src, mnt)
	args := []string{"serve", "--state", state}
	args = append(args, strings.Fields(c.ServeArgs)...)
	args = append(args, src, mnt)
	d, err := startDaemon(exec.Command(c.Dshmount, args...), "ready mount=")
	if err != nil {
		return fmt.Errorf("dshmount serve: %w", err)
	}
	defer d.stop()
	res.MountOpt["dshmount"] = mountOptions(mnt)
	socket := filepath.Join(state, "run", "control.sock")
	ctx := context.Background()
	cl, err := control.Dial(socket)
	if err != nil {
		return fmt.Errorf("dial %s: %w", socket, err)
	}
	session, err := cl.OpenSession(ctx, "bench")
	cl.Close()
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	bound := func(verb ...string) *exec.Cmd {
		a := append([]string{"exec", "--socket", socket, "--session", string(session), "--", self}, verb...)
		return exec.Command(c.Dshmount, a...)
	}
	work := mkdir(mnt, "work")
	if res.Targets["dshmount"], err = driver(bound(fsArgs(work, "dshmount")...)); err != nil {
		return err
	}
	if c.Unbound {
		logf("dshmount, unbound")
		if res.Targets["dshmount-unbound"], err = driver(exec.Command(self, fsArgs(mkdir(mnt, "work-unbound"), "dshmount-unbound")...)); err != nil {
			return err
		}
	}
	logf("control socket vs in process")
	if res.Targets["socket"], err = driver(exec.Command(self, "socket", "--socket", socket, "--dir", src,
		"--target", "socket", "--reps", strconv.Itoa(c.Reps), "--edit-time", c.EditTime.String())); err != nil {
		return err
	}
	inproc := mkdir(base, "inproc")
	if res.Targets["in-process"], err = driver(exec.Command(self, "socket", "--dir", inproc,
		"--target", "in-process", "--reps", strconv.Itoa(c.Reps), "--edit-time", c.EditTime.String())); err != nil {
		return err
	}
	if res.Targets["socket-nosync"], res.Targets["in-process-nosync"], err = runNoSync(c, self, base); err != nil {
		return err
	}
	if c.MemFiles > 0 { // on a fresh daemon: the workloads above tracked tens of thousands of files already
		if res.Memory, err = measureMemory(c, self, base); err != nil {
			return err
		}
	}
	return nil
}

// daemon is a started mount process.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon starts cmd and waits for a stdout line beginning with ready.
func startDaemon(cmd *exec.Cmd, ready string) (*daemon, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	var errw io.Writer = &limitedWriter{w: &stderr, n: 1 << 20}
	if cmd.Stderr != nil { // the caller reads the log too (request counts)
		errw = io.MultiWriter(cmd.Stderr, errw)
	}
	cmd.Stderr = errw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if !sent && strings.HasPrefix(sc.Text(), ready) {
				lines <- sc.Text()
				sent = true
			}
		}
		close(lines)
	}()
	go func() { _ = cmd.Wait(); close(d.done) }()
	select {
	case _, ok := <-lines:
		if ok {
			return d, nil
		}
		<-d.done
		return nil, fmt.Errorf("exited before it was ready: %s", stderr.String())
	case <-time.After(30 * time.Second):
		d.stop()
		return nil, fmt.Errorf("not ready after 30 s: %s", stderr.String())
	}
}

// stop sends SIGTERM and waits for the daemon to unmount and exit.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// limitedWriter keeps the first n bytes.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// driver runs one workload driver and decodes its report.
func driver(cmd *exec.Cmd) (*Report, error) {
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("%s: report: %w", strings.Join(cmd.Args, " "), err)
	}
	logf("  %s done in %.0f s", r.Target, time.Since(start).Seconds())
	return &r, nil
}

func mkdir(parent, name string) string {
	p := filepath.Join(parent, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		panic(err)
	}
	return p
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func output(name string, args ...string) string {
	b, _ := exec.Command(name, args...).Output()
	return string(b)
}

func kernel() string { return strings.TrimSpace(output("uname", "-r")) }

// mountOptions is the /proc/mounts line of mnt.
func mountOptions(mnt string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == mnt {
			return line
		}
	}
	return ""
}

// tarEntries counts the entries of the tar at p.
func tarEntries(p string) (int, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, fmt.Errorf("tar entries: %w", err)
	}
	defer f.Close()
	n := 0
	for tr := tar.NewReader(f); ; n++ {
		if _, err := tr.Next(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return 0, fmt.Errorf("tar entries of %s: %w", p, err)
		}
	}
}

// rssMiB is VmRSS of pid in MiB.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

// duBytes is the allocated size of the files under dir.
func duBytes(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// runNoSync measures the agent operations once more without fsync
// (dshmount serve --durability none, and provider/local with
// DurabilityNone in process), on a second daemon.
func runNoSync(c *runConfig, self, base string) (sock, inproc *Report, err error) {
	src, mnt, state := mkdir(base, "ns-src"), mkdir(base, "ns-mnt"), mkdir(base, "ns-state")
	d, err := startDaemon(exec.Command(c.Dshmount, "serve", "--durability", "none", "--state", state, src, mnt), "ready mount=")
	if err != nil {
		return nil, nil, fmt.Errorf("dshmount serve --durability none: %w", err)
	}
	defer d.stop()
	logf("control socket vs in process, without fsync")
	reps, et := strconv.Itoa(c.Reps), c.EditTime.String()
	if sock, err = driver(exec.Command(self, "socket", "--socket", filepath.Join(state, "run", "control.sock"),
		"--dir", src, "--target", "socket-nosync", "--reps", reps, "--edit-time", et)); err != nil {
		return nil, nil, err
	}
	inproc, err = driver(exec.Command(self, "socket", "--nosync", "--dir", mkdir(base, "inproc-nosync"),
		"--target", "in-process-nosync", "--reps", reps, "--edit-time", et))
	return sock, inproc, err
}
