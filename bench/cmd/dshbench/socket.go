package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/patch"
)

// socketConfig is one `dshbench socket` run.
type socketConfig struct {
	Socket   string // control socket; "" measures in process
	Dir      string // backing directory the files are prepared in
	Sub      string // workspace-relative directory of the files
	Target   string
	Reps     int
	EditTime time.Duration
}

// agentOps are the guarded operations measured over the socket and in
// process, behind one interface so both are timed alike.
type agentOps interface {
	read(ctx context.Context, rel string) (provider.Version, int, error)
	edit(ctx context.Context, rel, old, new string, v provider.Version) (provider.Version, error)
	patch(ctx context.Context, text string) error
	close()
}

// runSocket is `dshbench socket`: guarded edits, a 1 MiB read and a
// 200-hunk patch over the control socket, or in process (policy.Engine
// over provider/local) without --socket.
func runSocket(args []string) error {
	var c socketConfig
	f := flag.NewFlagSet("socket", flag.ContinueOnError)
	f.StringVar(&c.Socket, "socket", "", "control socket (empty: in process, on --dir)")
	f.StringVar(&c.Dir, "dir", "", "workspace directory (the backing directory with --socket)")
	f.StringVar(&c.Sub, "sub", "sock", "workspace-relative directory for the files")
	f.StringVar(&c.Target, "target", "", "name of the target, for the report")
	f.IntVar(&c.Reps, "reps", 3, "repetitions")
	f.DurationVar(&c.EditTime, "edit-time", 2*time.Second, "duration of one edit run")
	noSync := f.Bool("nosync", false, "in process: provider/local without fsync (Durability none)")
	if err := f.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	r := &Report{Target: c.Target, Dir: c.Dir}
	if err := prepareSocketFiles(filepath.Join(c.Dir, c.Sub)); err != nil {
		return err
	}
	var ops agentOps
	var err error
	if c.Socket != "" {
		ops, err = dialOps(ctx, c.Socket)
	} else {
		ops, err = inProcessOps(c.Dir, *noSync)
	}
	if err != nil {
		return err
	}
	defer ops.close()
	for range c.Reps {
		if err := measureAgentOps(ctx, &c, ops, r); err != nil {
			return err
		}
	}
	return r.write(os.Stdout)
}

// The prepared files.
const (
	editFile  = "edit.txt"
	bigFile   = "big.txt"
	patchFile = "patch.txt"
	patchRows = 10000
	patchHunk = 200
)

// prepareSocketFiles writes the files the socket workloads change.
func prepareSocketFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("socket files: %w", err)
	}
	var big strings.Builder
	for i := 0; big.Len() < 1<<20; i++ {
		fmt.Fprintf(&big, "line %07d of the one-mebibyte read benchmark, padded to a typical width\n", i)
	}
	files := map[string]string{
		editFile:  "package bench\n\nconst word = \"alpha\"\n",
		bigFile:   big.String()[:1<<20],
		patchFile: patchText(0),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("socket files: %w", err)
		}
	}
	return nil
}

// patchText is the 10,000-line file at generation g: every 50th line
// carries the generation.
func patchText(g int) string {
	var b strings.Builder
	for i := range patchRows {
		if i%(patchRows/patchHunk) == 25 {
			fmt.Fprintf(&b, "row %05d value gen-%d\n", i, g)
		} else {
			fmt.Fprintf(&b, "row %05d steady context line\n", i)
		}
	}
	return b.String()
}

// patchFor is a 200-hunk patch turning generation g of rel into g+1.
func patchFor(rel string, g int) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Update File: " + rel + "\n")
	for i := range patchRows {
		if i%(patchRows/patchHunk) != 25 {
			continue
		}
		fmt.Fprintf(&b, "@@\n row %05d steady context line\n-row %05d value gen-%d\n+row %05d value gen-%d\n row %05d steady context line\n",
			i-1, i, g, i, g+1, i+1)
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// measureAgentOps runs one repetition of every agent workload.
func measureAgentOps(ctx context.Context, c *socketConfig, ops agentOps, r *Report) error {
	editRel, bigRel, patchRel := c.Sub+"/"+editFile, c.Sub+"/"+bigFile, c.Sub+"/"+patchFile
	v, _, err := ops.read(ctx, editRel)
	if err != nil {
		return fmt.Errorf("read before edits: %w", err)
	}
	pairs := [2][2]string{{"alpha", "omega"}, {"omega", "alpha"}}
	var lat []time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < c.EditTime; i++ {
		t0 := time.Now()
		if v, err = ops.edit(ctx, editRel, pairs[i%2][0], pairs[i%2][1], v); err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	if len(lat)%2 == 1 { // leave the file as it was
		if _, err := ops.edit(ctx, editRel, "omega", "alpha", v); err != nil {
			return fmt.Errorf("edit back: %w", err)
		}
	}
	slices.Sort(lat)
	r.add("agent_edit_rate", "edits/s", true, float64(len(lat))/elapsed.Seconds())
	r.add("agent_edit_p50", "ms", false, ms(lat[len(lat)/2]))
	r.add("agent_edit_p99", "ms", false, ms(lat[min(len(lat)-1, len(lat)*99/100)]))

	if err := measureEditShare(ctx, c, ops, r); err != nil {
		return err
	}
	var reads []time.Duration
	for range 10 {
		t0 := time.Now()
		_, n, err := ops.read(ctx, bigRel)
		if err != nil {
			return fmt.Errorf("read 1 MiB: %w", err)
		}
		if n < 1<<20-100 {
			return fmt.Errorf("read 1 MiB: got %d bytes", n)
		}
		reads = append(reads, time.Since(t0))
	}
	r.add("agent_read_1MiB", "ms", false, ms(medianDur(reads)))

	if _, _, err := ops.read(ctx, patchRel); err != nil {
		return fmt.Errorf("read before patch: %w", err)
	}
	var patches []time.Duration
	gen := 0
	cur, err := os.ReadFile(filepath.Join(c.Dir, c.Sub, patchFile))
	if err != nil {
		return fmt.Errorf("patch file: %w", err)
	}
	for g := range 20 { // find the file's generation: reps continue from the last
		if string(cur) == patchText(g) {
			gen = g
			break
		}
	}
	for range 5 {
		text := patchFor(patchRel, gen)
		t0 := time.Now()
		if err := ops.patch(ctx, text); err != nil {
			return fmt.Errorf("patch: %w", err)
		}
		patches = append(patches, time.Since(t0))
		gen++
	}
	// Reset for the next repetition (out of band; the next read re-observes).
	if err := os.WriteFile(filepath.Join(c.Dir, c.Sub, patchFile), []byte(patchText(0)), 0o644); err != nil {
		return fmt.Errorf("reset patch file: %w", err)
	}
	r.add("agent_patch_200_hunks", "ms", false, ms(medianDur(patches)))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func medianDur(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// socketOps are agentOps over the control socket.
type socketOps struct {
	c       *control.Client
	session policy.SessionID
}

func dialOps(ctx context.Context, socket string) (*socketOps, error) {
	c, err := control.Dial(socket)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	s, err := c.OpenSession(ctx, "bench-socket")
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open session: %w", err)
	}
	return &socketOps{c: c, session: s}, nil
}

func (o *socketOps) read(ctx context.Context, rel string) (provider.Version, int, error) {
	limit, maxBytes := 1<<20, int64(4<<20)
	res, err := o.c.Read(ctx, control.ReadParams{Path: rel, Session: o.session, Limit: &limit, MaxBytes: &maxBytes})
	if err != nil {
		return "", 0, err
	}
	n := 0
	for _, l := range res.Lines {
		n += len(l.Text) + 1
	}
	return res.Version, n, nil
}

func (o *socketOps) edit(ctx context.Context, rel, old, new string, v provider.Version) (provider.Version, error) {
	res, err := o.c.Edit(ctx, control.EditParams{Path: rel, OldString: old, NewString: new, Session: o.session,
		Expected: &control.VersionExpected{Version: v}})
	if err != nil {
		return "", err
	}
	return res.Version, nil
}

func (o *socketOps) patch(ctx context.Context, text string) error {
	res, err := o.c.Patch(ctx, control.PatchParams{Patch: text, Session: o.session})
	if err != nil {
		return err
	}
	if !res.Complete {
		return fmt.Errorf("patch incomplete: %+v", res.Operations)
	}
	return nil
}

func (o *socketOps) close() { o.c.Close() }

// engineOps are agentOps through policy.Engine over provider/local.
type engineOps struct {
	store  *policy.Store
	lfs    *local.FS
	engine *policy.Engine
	actor  policy.Actor
	state  string
}

func inProcessOps(dir string, noSync bool) (*engineOps, error) {
	state, err := os.MkdirTemp("", "dshbench-state-")
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	store, err := localstore.Open(state, policy.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	opts := local.Options{Digests: store}
	if noSync {
		opts.Durability = local.DurabilityNone
	}
	lfs, err := local.New(dir, opts)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("workspace: %w", err)
	}
	engine := policy.NewEngine(store, lfs)
	sess, err := store.OpenSession("bench-inprocess")
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	return &engineOps{store: store, lfs: lfs, engine: engine, state: state,
		actor: policy.Actor{Session: sess.ID, Channel: policy.ChannelSocket}}, nil
}

func (o *engineOps) target(ctx context.Context, rel string) (provider.Target, error) {
	return o.engine.FS().Resolve(ctx, rel, provider.ResolveOptions{})
}

func (o *engineOps) read(ctx context.Context, rel string) (provider.Version, int, error) {
	t, err := o.target(ctx, rel)
	if err != nil {
		return "", 0, err
	}
	text, info, err := o.engine.Read(ctx, o.actor, t)
	if err != nil {
		return "", 0, err
	}
	return info.Version, len(text), nil
}

func (o *engineOps) edit(ctx context.Context, rel, old, new string, v provider.Version) (provider.Version, error) {
	t, err := o.target(ctx, rel)
	if err != nil {
		return "", err
	}
	out, err := o.engine.Edit(ctx, o.actor, t, provider.EditRequest{OldString: old, NewString: new},
		policy.Guard{Version: &provider.VersionGuard{Version: v}})
	if err != nil {
		return "", err
	}
	return out.Version, nil
}

func (o *engineOps) patch(ctx context.Context, text string) error {
	ops, err := patch.Parse(text)
	if err != nil {
		return err
	}
	for _, op := range ops {
		u, ok := op.(*patch.Update)
		if !ok {
			return fmt.Errorf("unexpected patch operation %T", op)
		}
		t, err := o.target(ctx, u.Path)
		if err != nil {
			return err
		}
		if _, err := o.engine.Patch(ctx, o.actor, t, u.Hunks, policy.Guard{}); err != nil {
			return err
		}
	}
	return nil
}

func (o *engineOps) close() {
	o.lfs.Close()
	o.store.Close()
	os.RemoveAll(o.state)
}
