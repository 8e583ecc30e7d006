package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// targets are the project's speed goals: for times, dshmount's time relative to
// native at most Max; for rates, dshmount's rate relative to native at
// least Min. Every metadata row (a Max target) must also beat the plain
// loopback by 2× wherever the loopback is more than 2× native (loopbackRule).
var targets = map[string]struct{ Min, Max float64 }{
	"seq_write_1MiB_blocks": {Min: 0.9},
	"seq_read_1MiB_blocks":  {Min: 0.9},
	"files_create_10k":      {Max: 3},
	"files_stat_10k":        {Max: 1.5},
	"files_stat_cold_10k":   {Max: 1.5},
	"files_readdir_10k":     {Max: 3},
	"files_delete_10k":      {Max: 4},
	"gosrc_tar_x":           {Max: 5},
	"gosrc_find_warm":       {Max: 1.5},
	"gosrc_git_add_commit":  {Max: 2},
	"gosrc_git_status":      {Max: 2},
	"gosrc_rm_rf":           {Max: 4},
}

// loopbackRule reports whether dshmount's time d meets the loopback rule
// against native n and loopback l, and whether the rule applies at all.
func loopbackRule(n, l, d float64) (met, applies bool) {
	if n <= 0 || l/n <= 2 {
		return true, false
	}
	return d <= l/2, true
}

// printTable prints one line per metric: the medians on each target and
// dshmount's ratio to native and to loopback (for times, lower is better;
// for rates, higher is better), then the socket and memory lines.
func printTable(w io.Writer, res *Results) {
	nat, lb, dsh, unb := res.Targets["native"], res.Targets["loopback"], res.Targets["dshmount"], res.Targets["dshmount-unbound"]
	var names []Metric
	for _, r := range []*Report{nat, lb, dsh} {
		if r != nil {
			names = r.Metrics
			break
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(names) > 0 {
		fmt.Fprintln(tw, "metric\tunit\tnative\tloopback\tdshmount\tdsh/native\tdsh/loopback\tunbound\tunb/native\ttarget\t÷loopback: bound ≤1.5, unbound ≤1.1\t")
	}
	for _, m := range names {
		n, l, d, u := med(nat, m.Name), med(lb, m.Name), med(dsh, m.Name), med(unb, m.Name)
		goal := ""
		if t, ok := targets[m.Name]; ok {
			r := d / n
			switch {
			case t.Min > 0:
				goal = fmt.Sprintf("≥%.1f %s", t.Min, verdict(r >= t.Min))
			default:
				goal = fmt.Sprintf("≤%g %s", t.Max, verdict(r <= t.Max))
				if met, applies := loopbackRule(n, l, d); applies {
					goal += "; ≤½ loopback " + verdict(met)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Name, m.Unit, num(n), num(l), num(d),
			ratio(d, n), ratio(d, l), num(u), ratio(u, n), goal, loopbackTargets(m.HigherBetter, l, d, u))
	}
	tw.Flush()
	for _, r := range []*Report{nat, lb, dsh} {
		if r != nil {
			for _, n := range r.Notes {
				fmt.Fprintf(w, "note (%s): %s\n", r.Target, n)
			}
		}
	}

	for _, mode := range []string{"", "-nosync"} {
		sock, inproc := res.Targets["socket"+mode], res.Targets["in-process"+mode]
		if sock == nil || inproc == nil {
			continue
		}
		label := "durability fsync (default)"
		if mode != "" {
			label = "durability none (serve --durability none)"
		}
		fmt.Fprintf(w, "\nagent operations, %s\n", label)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "agent op\tunit\tin-process\tsocket\tsocket/in-process\t")
		for _, m := range inproc.Metrics {
			i, s := m.Median, med(sock, m.Name)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", m.Name, m.Unit, num(i), num(s), ratio(s, i))
		}
		tw.Flush()
		if s := med(sock, "agent_edit_rate"); !math.IsNaN(s) {
			fmt.Fprintf(w, "target: socket ≥ 5000 guarded edits/s: %s; socket overhead ≤ 2× in process (edit p50): %s\n",
				verdict(s >= 5000), verdict(med(sock, "agent_edit_p50") <= 2*med(inproc, "agent_edit_p50")))
		}
	}
	printStores(w, res)
	if res.Memory != nil {
		fmt.Fprintf(w, "\nmemory: daemon RSS %.1f MiB before, %.1f MiB after %d files created through the mount (%.1f s); target ≤ 200 MiB: %s\n",
			res.Memory["rss_before_mib"], res.Memory["rss_after_mib"], int(res.Memory["files"]), res.Memory["fill_s"],
			verdict(res.Memory["rss_after_mib"] <= 200))
		fmt.Fprintf(w, "state: %.1f MiB on disk, %.0f bytes per tracked file\n",
			res.Memory["state_bytes"]/(1<<20), res.Memory["state_bytes_per_file"])
	}
	printFsmonitor(w, res.Targets["fsmonitor"])
	printBranches(w, res.Targets["branches"])
	printGitCommit(w, res.Targets["gitcommit"])
	printMerge(w, res.Targets["merge"])
	printSpeedTargets(w, res)
	fprintRequests(w, res.Requests)
	for name, line := range res.MountOpt {
		fmt.Fprintf(w, "mount (%s): %s\n", name, line)
	}
}

// loopbackTargets is the slowdown against the loopback (time ratio; for
// rates the inverse) of the bound and unbound runs with their targets.
func loopbackTargets(higher bool, l, d, u float64) string {
	var parts []string
	for _, c := range []struct {
		name string
		v    float64
		max  float64
	}{{"bound", d, reqMax[reqBound]}, {"unbound", u, reqMax[reqUnbound]}} {
		q := c.v / l
		if higher {
			q = l / c.v
		}
		if math.IsNaN(q) || math.IsInf(q, 0) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f× %s", c.name, q, verdict(q <= c.max)))
	}
	return strings.Join(parts, "; ")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func med(r *Report, name string) float64 {
	if r == nil {
		return math.NaN()
	}
	m, ok := r.get(name)
	if !ok {
		return math.NaN()
	}
	return m.Median
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
