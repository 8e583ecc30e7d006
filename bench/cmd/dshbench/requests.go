package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	Tree bool // the Go source tree's rows: per entry of its tar
}

// reqSteps run in order on each target's directory: the stat follows the
// create and a listing (what READDIRPLUS can answer); the tree rows are the
// workloads a mount is felt in (tar -x, git add -A && git commit, rm -rf).
var reqSteps = []reqStep{
	{Name: "create"}, {Name: "readdir"}, {Name: "stat_after_readdir"},
	{Name: "rename"}, {Name: "delete"},
	{Name: "tar_x", Tree: true}, {Name: "git_add_commit", Tree: true}, {Name: "rm_rf", Tree: true},
	{Name: "seq_write", Seq: true}, {Name: "seq_read", Seq: true},
}

// reqTree is the tar the tree rows extract and its entries.
type reqTree struct {
	Tar     string
	Entries int
}

// RequestRow is one step on one target: FUSE requests per file (per MiB
// for the sequential rows) by opcode, and daemon CPU and wall time per repetition, from the daemons' own
// counters (dshmount's daemon.status, the loopback's -stats socket).
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

// statsReader reads a daemon's FUSE request counters by opcode and its
// CPU time in seconds.
type statsReader func() (map[string]uint64, float64, error)

// dshStats reads dshmount's counters from daemon.status.
func dshStats(socket string) statsReader {
	return func() (map[string]uint64, float64, error) {
		cl, err := control.Dial(socket)
		if err != nil {
			return nil, 0, fmt.Errorf("dial %s: %w", socket, err)
		}
		defer cl.Close()
		st, err := cl.Status(context.Background())
		if err != nil {
			return nil, 0, fmt.Errorf("daemon.status: %w", err)
		}
		return st.FuseRequests, st.CPUSeconds, nil
	}
}

// loopbackStats reads the loopback's counters from its -stats socket.
func loopbackStats(socket string) statsReader {
	return func() (map[string]uint64, float64, error) {
		c, err := net.Dial("unix", socket)
		if err != nil {
			return nil, 0, fmt.Errorf("dial %s: %w", socket, err)
		}
		defer c.Close()
		var r struct {
			FuseRequests map[string]uint64 `json:"fuseRequests"`
			CPUSeconds   float64           `json:"cpuSeconds"`
		}
		if err := json.NewDecoder(c).Decode(&r); err != nil {
			return nil, 0, fmt.Errorf("loopback stats: %w", err)
		}
		return r.FuseRequests, r.CPUSeconds, nil
	}
}

// requestsOf is the requests in counts, FORGET excluded (the kernel sends
// it when it reclaims inodes, not per operation).
func requestsOf(counts map[string]uint64) uint64 {
	var n uint64
	for op, v := range counts {
		if op != "FORGET" {
			n += v
		}
	}
	return n
}

// quietWindow is how long a daemon must receive no request and use less
// than quietCPU of CPU for quiet to call it idle. The polling itself costs
// dshmount about 2 ms of CPU per daemon.status; a store batch or a
// compaction keeps a core busy.
const (
	quietWindow = 300 * time.Millisecond
	quietCPU    = 0.03 // seconds per quietWindow: a tenth of a core
)

// quiet waits until the daemon received no request for quietWindow (the
// kernel sends RELEASE and FLUSH after the last close returned) and used
// less than quietCPU in it (its store's batches and compactions and its
// watcher finish the step's work after the last reply), at most 30 s, and
// returns its counters and CPU time then. A step's CPU so includes the
// work it left behind, which would otherwise be counted to the next step.
func (r statsReader) quiet() (map[string]uint64, float64, error) {
	counts, cpu, err := r()
	if err != nil {
		return nil, 0, err
	}
	last, since, cpuSince := requestsOf(counts), time.Now(), cpu
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if counts, cpu, err = r(); err != nil {
			return nil, 0, err
		}
		switch n := requestsOf(counts); {
		case n != last:
			last, since, cpuSince = n, time.Now(), cpu
		case time.Since(since) < quietWindow:
		case cpu-cpuSince < quietCPU:
			return counts, cpu, nil
		default: // busy without requests: start a new window
			since, cpuSince = time.Now(), cpu
		}
	}
	return counts, cpu, nil
}

// reqPass is the daemons of one pass: the loopback and dshmount, with
// their request counters.
type reqPass struct {
	lb, dsh           *daemon
	lbStats, dshStats statsReader
	dirs              map[string]string // target → its work directory's parent
	bind              func(args ...string) *exec.Cmd
}

// startReqPass mounts the loopback and dshmount for one pass.
func startReqPass(c *runConfig, self, base, name string) (*reqPass, error) {
	p := &reqPass{dirs: map[string]string{}}
	lbSrc, lbMnt := mkdir(base, name+"-lb-src"), mkdir(base, name+"-lb-mnt")
	lbSock := filepath.Join(mkdir(base, name+"-lb-run"), "stats.sock")
	p.lbStats = loopbackStats(lbSock)
	cmd := exec.Command(c.Loopback, "-stats", lbSock, lbSrc, lbMnt)
	var err error
	if p.lb, err = startDaemon(cmd, "ready"); err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	var state string
	if p.dsh, _, state, err = startServe(c, base, name, nil); err != nil {
		p.stop()
		return nil, err
	}
	p.dshStats = dshStats(socketPath(state))
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

// runStep runs one step on one target and returns its requests by opcode
// (FORGET excluded), the daemon's CPU seconds and the wall time.
func (p *reqPass) runStep(self, target string, step reqStep, dir string, units int, tree reqTree) (map[string]uint64, float64, float64, error) {
	stats := p.dshStats
	if target == reqLoopback {
		stats = p.lbStats
	}
	args := []string{self, "step", "--step", step.Name, "--dir", dir, "--n", strconv.Itoa(units)}
	if step.Tree {
		args = append(args, "--tar", tree.Tar)
	}
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
			return nil, 0, 0, fmt.Errorf("bound holder: %w", err)
		}
		defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
		time.Sleep(200 * time.Millisecond)
	}
	before, cpu0, err := stats.quiet()
	if err != nil {
		return nil, 0, 0, err
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, 0, 0, fmt.Errorf("%s on %s: %w: %s", step.Name, target, err, out)
	}
	wall := time.Since(start).Seconds()
	after, cpu1, err := stats.quiet()
	if err != nil {
		return nil, 0, 0, err
	}
	for k, v := range before {
		after[k] -= v
	}
	delete(after, "FORGET")
	return after, cpu1 - cpu0, wall, nil
}

// passOrder is the order the targets run each step in on pass (from 1):
// rotated by one per pass, so no target always runs first (the page cache
// and the disk are shared: a sequential write right after another one
// pays for its dirty pages).
func passOrder(pass int) []string {
	k := (pass - 1) % len(reqTargets)
	return append(append([]string(nil), reqTargets[k:]...), reqTargets[:k]...)
}

// runRequests is the request table: Reps interleaved passes (every step
// runs on each target in turn, A B C A B C, the first target rotating per
// pass), each counting the daemons' requests, CPU and wall time; the
// counts per unit are the first pass's. The tree rows extract tree.Tar
// (none without it).
func runRequests(c *runConfig, self, base string, tree reqTree) ([]*RequestRow, error) {
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
	for pass := 1; pass <= c.Reps; pass++ {
		name := fmt.Sprintf("req%d", pass)
		p, err := startReqPass(c, self, base, name)
		if err != nil {
			return nil, err
		}
		logf("requests: pass %d of %d", pass, c.Reps)
		for _, step := range reqSteps {
			units := c.ReqFiles
			switch step.unit() {
			case stepMiB:
				units = c.ReqMiB
			case stepTree:
				if tree.Tar == "" {
					continue
				}
				units = tree.Entries
			}
			for _, t := range passOrder(pass) {
				if t == reqBeside && !step.Seq {
					continue
				}
				dir := filepath.Join(p.dirs[t], reqDirs[t])
				if err := os.MkdirAll(dir, 0o755); err != nil {
					p.stop()
					return nil, err
				}
				ops, cpu, wall, err := p.runStep(self, t, step, dir, units, tree)
				if err != nil {
					p.stop()
					return nil, err
				}
				r := row(step.Name, t, units)
				if pass == 1 {
					for op, v := range ops {
						if v > 0 {
							r.PerUnit[op] = float64(v) / float64(units)
						}
					}
				}
				if n := requestsOf(ops); n >= minCPURequests {
					r.CPUus = append(r.CPUus, cpu*1e6/float64(n))
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
