package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/control"
)

// Request targets: the plain loopback, the mount unbound (a person), bound
// to a session (an agent), and unbound while another process is bound (a
// person next to an agent: only the sequential rows).
const (
	reqLoopback = "loopback"
	reqUnbound  = "unbound"
	reqBound    = "bound"
	reqBeside   = "unbound, agent bound"
)

// reqTargets are the request targets in print order.
var reqTargets = []string{reqLoopback, reqUnbound, reqBound, reqBeside}

// minCPURequests is the fewest requests a step needs for its daemon CPU per
// request to be printed: below it the daemon's background work (the
// store's batches, the watcher) and the 10 ms clock tick dominate.
const minCPURequests = 500

// reqDirs are the targets' work directories.
var reqDirs = map[string]string{reqLoopback: "work", reqUnbound: "unbound", reqBound: "bound", reqBeside: "beside"}

// reqMax is the most a target may take relative to the loopback.
var reqMax = map[string]float64{reqUnbound: 1.1, reqBound: 1.5, reqBeside: 1.1}

// reqStep is one workload step of the request table, run by `dshbench step`
// in a process of its own so the daemon's counters can be read around it.
type reqStep struct {
	Name string
	Seq  bool // sequential 1 MiB-block rows: per MiB, not per file
}

// reqSteps run in order on each target's directory: the stat follows the
// create and a listing (what READDIRPLUS can answer).
var reqSteps = []reqStep{
	{Name: "create"}, {Name: "readdir"}, {Name: "stat_after_readdir"},
	{Name: "rename"}, {Name: "delete"}, {Name: "seq_write", Seq: true}, {Name: "seq_read", Seq: true},
}

// RequestRow is one step on one target: FUSE requests per file (per MiB
// for the sequential rows) by opcode, from a run with debug request
// logging, and daemon CPU and wall time from runs without it.
type RequestRow struct {
	Step    string             `json:"step"`
	Target  string             `json:"target"`
	Units   int                `json:"units"` // files, or MiB for the sequential rows
	PerUnit map[string]float64 `json:"requests_per_unit"`
	CPUus   []float64          `json:"daemon_cpu_us_per_request"` // per repetition
	Wall    []float64          `json:"wall_s"`                    // per repetition, interleaved
}

// total is the requests per unit, all opcodes.
func (r *RequestRow) total() float64 {
	var t float64
	for _, v := range r.PerUnit {
		t += v
	}
	return t
}

// rxOp matches one received request in a go-fuse debug log line (plain
// log or dshmount's slog text).
var rxOp = regexp.MustCompile(`rx [0-9]+: ([A-Z_0-9]+) `)

// reqCounter counts the FUSE requests by opcode in a daemon's debug log.
type reqCounter struct {
	mu      sync.Mutex
	counts  map[string]int
	total   int
	partial []byte
}

func (c *reqCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		if m := rxOp.FindSubmatch(c.partial[:i]); m != nil && string(m[1]) != "FORGET" && string(m[1]) != "BATCH_FORGET" {
			c.counts[string(m[1])]++
			c.total++
		}
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

// snapshot returns a copy of the counts and their total.
func (c *reqCounter) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out, c.total
}

// quiet waits until no request arrived for 300 ms (the kernel sends RELEASE
// and FLUSH after the last close returned), at most 20 s.
func (c *reqCounter) quiet() {
	_, last := c.snapshot()
	since := time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, n := c.snapshot(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			return
		}
	}
}

// cpuTicks is the user+system CPU time of pid in clock ticks (1/100 s).
func cpuTicks(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): state is 3,
	// utime 14, stime 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return u + st
}

// reqPass is the daemons of one pass: the loopback and dshmount, both with
// or without debug request logging.
type reqPass struct {
	lb, dsh       *daemon
	lbReq, dshReq *reqCounter
	dirs          map[string]string // target → its work directory's parent
	bind          func(args ...string) *exec.Cmd
}

// startReqPass mounts the loopback and dshmount for one pass.
func startReqPass(c *runConfig, self, base, name string, debug bool) (*reqPass, error) {
	p := &reqPass{lbReq: &reqCounter{}, dshReq: &reqCounter{}, dirs: map[string]string{}}
	lbSrc, lbMnt := mkdir(base, name+"-lb-src"), mkdir(base, name+"-lb-mnt")
	lbArgs := []string{lbSrc, lbMnt}
	if debug {
		lbArgs = append([]string{"-debug"}, lbArgs...)
	}
	cmd := exec.Command(c.Loopback, lbArgs...)
	cmd.Stderr = p.lbReq
	var err error
	if p.lb, err = startDaemon(cmd, "ready"); err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	var extra []string
	if debug {
		extra = []string{"--debug"}
	}
	var state string
	if p.dsh, _, state, err = startServe(c, base, name, p.dshReq, extra...); err != nil {
		p.stop()
		return nil, err
	}
	cl, err := control.Dial(socketPath(state))
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("dial: %w", err)
	}
	session, err := cl.OpenSession(context.Background(), "bench-requests")
	cl.Close()
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("open session: %w", err)
	}
	p.bind = func(args ...string) *exec.Cmd {
		return exec.Command(c.Dshmount, append([]string{"exec", "--socket", socketPath(state), "--session", string(session), "--"}, args...)...)
	}
	dshMnt := filepath.Join(base, name+"-mnt")
	p.dirs[reqLoopback] = lbMnt
	for _, t := range reqTargets[1:] {
		p.dirs[t] = dshMnt
	}
	return p, nil
}

func (p *reqPass) stop() {
	if p.dsh != nil {
		p.dsh.stop()
	}
	if p.lb != nil {
		p.lb.stop()
	}
}

// runStep runs one step on one target and returns its requests by opcode,
// the daemon's CPU ticks and the wall time.
func (p *reqPass) runStep(self, target string, step reqStep, dir string, units int) (map[string]int, int, float64, float64, error) {
	d, cnt := p.dsh, p.dshReq
	if target == reqLoopback {
		d, cnt = p.lb, p.lbReq
	}
	args := []string{self, "step", "--step", step.Name, "--dir", dir, "--n", strconv.Itoa(units)}
	cmd := exec.Command(args[0], args[1:]...)
	if target == reqBound {
		cmd = p.bind(args...)
	}
	// Go's asynchronous preemption signals the driver's threads, and the
	// kernel answers a signal during a FUSE request with an INTERRUPT: not
	// the workload's requests.
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	if target == reqBeside { // an agent holds a session on the mount meanwhile
		holder := p.bind("sleep", "3600")
		if err := holder.Start(); err != nil {
			return nil, 0, 0, 0, fmt.Errorf("bound holder: %w", err)
		}
		defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
		time.Sleep(200 * time.Millisecond)
	}
	cnt.quiet()
	before, n0 := cnt.snapshot()
	cpu0 := cpuTicks(d.cmd.Process.Pid)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("%s on %s: %w: %s", step.Name, target, err, out)
	}
	wall := time.Since(start).Seconds()
	cnt.quiet()
	cpu := cpuTicks(d.cmd.Process.Pid) - cpu0
	after, n1 := cnt.snapshot()
	for k, v := range before {
		after[k] -= v
	}
	return after, n1 - n0, cpu, wall, nil
}

// runRequests is the request table: one pass with debug request logging
// for the counts, then Reps interleaved passes without it (every step runs
// on each target in turn, A B A B) for daemon CPU per request and wall time.
func runRequests(c *runConfig, self, base string) ([]*RequestRow, error) {
	rows := map[string]*RequestRow{}
	var order []*RequestRow
	row := func(step, target string, units int) *RequestRow {
		k := step + "/" + target
		if rows[k] == nil {
			rows[k] = &RequestRow{Step: step, Target: target, Units: units, PerUnit: map[string]float64{}}
			order = append(order, rows[k])
		}
		return rows[k]
	}
	reqs := map[string]int{} // step/target → requests in the debug pass
	for pass := 0; pass <= c.Reps; pass++ {
		debug := pass == 0
		name := fmt.Sprintf("req%d", pass)
		p, err := startReqPass(c, self, base, name, debug)
		if err != nil {
			return nil, err
		}
		logf("requests: pass %d of %d (debug logging %v)", pass, c.Reps, debug)
		for _, step := range reqSteps {
			units := c.ReqFiles
			if step.Seq {
				units = c.ReqMiB
			}
			for _, t := range reqTargets {
				if t == reqBeside && !step.Seq {
					continue
				}
				dir := filepath.Join(p.dirs[t], reqDirs[t])
				if err := os.MkdirAll(dir, 0o755); err != nil {
					p.stop()
					return nil, err
				}
				ops, n, cpu, wall, err := p.runStep(self, t, step, dir, units)
				if err != nil {
					p.stop()
					return nil, err
				}
				r := row(step.Name, t, units)
				k := step.Name + "/" + t
				if debug {
					for op, v := range ops {
						if v > 0 {
							r.PerUnit[op] = float64(v) / float64(units)
						}
					}
					reqs[k] = n
					continue
				}
				if reqs[k] >= minCPURequests {
					r.CPUus = append(r.CPUus, cpu*1e4/float64(reqs[k]))
				}
				r.Wall = append(r.Wall, wall)
			}
		}
		p.stop()
	}
	return order, nil
}

// opsText is "LOOKUP 1.00, CREATE 1.00, …", largest first.
func opsText(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range m {
		if v >= 0.005 {
			s = append(s, kv{k, v})
		}
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].v != s[j].v {
			return s[i].v > s[j].v
		}
		return s[i].k < s[j].k
	})
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = fmt.Sprintf("%s %.2f", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}
