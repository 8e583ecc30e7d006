package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
)

// runStep is `dshbench step`: one step of the request table in a directory
// (files f0…f(n-1), renamed to g…, then deleted; seq.bin of n MiB; the tar's
// tree extracted, committed to a new git repository and removed).
func runStep(args []string) error {
	f := flag.NewFlagSet("step", flag.ContinueOnError)
	step := f.String("step", "", "create, readdir, stat_after_readdir, rename, delete, seq_write, seq_read, tar_x, git_add_commit or rm_rf")
	dir := f.String("dir", "", "directory to work in (must exist)")
	n := f.Int("n", 1000, "files, or MiB for seq_write and seq_read")
	tarPath := f.String("tar", "", "tar_x: the tar to extract (its tree is src/...)")
	if err := f.Parse(args); err != nil {
		return err
	}
	name := func(prefix string, i int) string { return filepath.Join(*dir, prefix+strconv.Itoa(i)) }
	each := func(fn func(i int) error) error {
		for i := range *n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	data := bytes.Repeat([]byte("x"), 4096)
	seq := filepath.Join(*dir, "seq.bin")
	switch *step {
	case "create":
		return each(func(i int) error { return os.WriteFile(name("f", i), data, 0o644) })
	case "stat_after_readdir":
		return each(func(i int) error { _, err := os.Lstat(name("f", i)); return err })
	case "readdir":
		ents, err := os.ReadDir(*dir)
		if err == nil && len(ents) < *n {
			err = fmt.Errorf("listed %d entries, want %d", len(ents), *n)
		}
		return err
	case "rename":
		return each(func(i int) error { return os.Rename(name("f", i), name("g", i)) })
	case "delete":
		return each(func(i int) error { return os.Remove(name("g", i)) })
	case "seq_write":
		return seqWrite(seq, *n)
	case "tar_x":
		return run(*dir, "tar", "-xf", *tarPath)
	case "git_add_commit": // the repository's creation is part of the step: one git init
		return run(filepath.Join(*dir, "src"), "sh", "-c",
			"git init -q && git config gc.auto 0 && git config maintenance.auto false && git add -A && git commit -q -m bench")
	case "rm_rf":
		return os.RemoveAll(filepath.Join(*dir, "src"))
	case "seq_read":
		dropCaches()
		fh, err := os.Open(seq)
		if err != nil {
			return err
		}
		defer fh.Close()
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{fh}, make([]byte, 1<<20))
		return err
	}
	return fmt.Errorf("unknown step %q", *step)
}

// seqWrite writes mib MiB to p in 1 MiB blocks and fsyncs it.
func seqWrite(p string, mib int) error {
	buf := bytes.Repeat([]byte{0x5a}, 1<<20)
	fh, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	for range mib {
		if _, err := fh.Write(buf); err != nil {
			fh.Close()
			return err
		}
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// fprintRequests prints the request table: per step and target the FUSE
// requests per file (per MiB for the sequential rows) by opcode, the
// daemon's CPU per request, the median wall time of the interleaved runs
// and its ratio to the loopback's with the target.
func fprintRequests(w io.Writer, rows []*RequestRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFUSE requests per file (per MiB for seq_*, per entry of Go's source tree for tar_x, git_add_commit and rm_rf) and daemon CPU, %d files / %d MiB / %d entries; the daemons' own counters (daemon.status, the loopback's -stats socket) over %d interleaved runs (medians; counts from the first)\n",
		unitsOf(rows, stepFiles), unitsOf(rows, stepMiB), unitsOf(rows, stepTree), len(rows[0].Wall))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\ttarget\treq/file\tCPU µs/req\tCPU/file ÷loopback\twall s\t÷loopback\ttarget\tby opcode")
	lb := map[string]*RequestRow{}
	for _, r := range rows {
		if r.Target == reqLoopback {
			lb[r.Step] = r
		}
	}
	for _, r := range rows {
		wall, ratioText, goal, cpuText := median(r.Wall), "", "", ""
		if l := lb[r.Step]; l != nil && r.Target != reqLoopback && median(l.Wall) > 0 {
			q := wall / median(l.Wall)
			ratioText = fmt.Sprintf("%.2f×", q)
			goal = fmt.Sprintf("≤%.1f %s", reqMax[r.Target], verdict(q <= reqMax[r.Target]))
			cpuText = ratio(nanIfEmpty(r.CPUus)*r.total(), nanIfEmpty(l.CPUus)*l.total())
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\t%.3f\t%s\t%s\t%s\n", r.Step, r.Target, r.total(),
			num(nanIfEmpty(r.CPUus)), cpuText, wall, ratioText, goal, opsText(r.PerUnit))
	}
	tw.Flush()
}

// stepUnit is what a request-table step counts per: files, MiB or tree entries.
type stepUnit int

const (
	stepFiles stepUnit = iota
	stepMiB
	stepTree
)

// unit is what the step counts per.
func (s reqStep) unit() stepUnit {
	switch {
	case s.Seq:
		return stepMiB
	case s.Tree:
		return stepTree
	}
	return stepFiles
}

// unitOf is the unit of the step named name.
func unitOf(name string) stepUnit {
	for _, s := range reqSteps {
		if s.Name == name {
			return s.unit()
		}
	}
	return stepFiles
}

// unitsOf is the files, MiB or entries of the table's rows of that unit.
func unitsOf(rows []*RequestRow, u stepUnit) int {
	for _, r := range rows {
		if unitOf(r.Step) == u {
			return r.Units
		}
	}
	return 0
}

func nanIfEmpty(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return median(xs)
}
