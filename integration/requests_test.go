package integration

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requestFiles is how many files each request-count workload touches.
const requestFiles = 200

// requestSlack is the noise allowed above a pinned count, per file: the
// kernel sends a few extra LOOKUP or GETATTR when it reclaims dentries
// or an attribute timestamp ticks over (up to 8 in 200 files seen).
const requestSlack = 0.05

// requestWorkload is one file workload whose FUSE requests are counted.
// Each runs in a fresh directory of its own on the mount, in one perl
// process, so the requests are the syscalls' own and nothing of a shell's
// (-U: as root perl would lstat before every unlink).
//
// Measured when pinned (kernel 6.18, passthrough on): create 6 per file
// unbound (LOOKUP, CREATE, IOCTL — perl asks whether it is a terminal —,
// FLUSH, RELEASE, GETATTR of the parent — default_permissions re-reads a
// directory's attributes after each change of it) and 7 bound (and WRITE:
// bound writers use direct I/O); rename 3 (LOOKUP of the new name, RENAME, parent GETATTR);
// unlink 2 (UNLINK, parent GETATTR); lstat after listing 2,000 fresh
// files 0.02 (READDIRPLUS 11, a few LOOKUPs of names the kernel had let
// go: every listing batch carries the attributes of the files the kernel
// holds, which the writes had dropped; it was 0.9, a GETATTR per file
// after the first batch, when the kernel asked for attributes with the
// first batch only).
type requestWorkload struct {
	name    string
	files   int    // files touched (0: requestFiles)
	setup   string // perl run before counting ("" = none)
	measure string // perl run while counting
	// pinned is the most requests per file the daemon may receive for the
	// measured step (FORGET excluded: the kernel sends it when it reclaims
	// inodes, not per operation), by binding.
	pinned map[string]float64
}

// perlCreate writes requestFiles files of 4 KiB each.
const perlCreate = `for (1..{N}) { open(my $f, ">", "f$_") or die "create f$_: $!"; print $f ("x" x 4096); close($f) or die "close f$_: $!"; }`

var requestWorkloads = []requestWorkload{
	{
		name:    "create",
		measure: perlCreate,
		pinned:  map[string]float64{"unbound": 6, "bound": 7},
	},
	{
		name:    "stat-after-readdir",
		files:   2000, // more than one listing batch
		setup:   perlCreate,
		measure: `opendir(my $d, ".") or die "opendir: $!"; my @n = grep { !/^\./ } readdir($d); closedir($d); scalar(@n) == {N} or die "listed " . scalar(@n); for (@n) { lstat($_) or die "lstat $_: $!"; }`,
		pinned:  map[string]float64{"unbound": 0.02, "bound": 0.02},
	},
	{
		name:    "rename",
		setup:   perlCreate,
		measure: `for (1..{N}) { rename("f$_", "g$_") or die "rename f$_: $!"; }`,
		pinned:  map[string]float64{"unbound": 3, "bound": 3},
	},
	{
		name:    "unlink",
		setup:   perlCreate,
		measure: `for (1..{N}) { unlink("f$_") or die "unlink f$_: $!"; }`,
		pinned:  map[string]float64{"unbound": 2, "bound": 2},
	},
}

// requestCounts reads the mount's FUSE request counters (daemon.status)
// once no request arrived for 300 ms (the kernel sends RELEASE after the
// last close returned).
func (d *daemon) requestCounts() map[string]uint64 {
	d.t.Helper()
	read := func() (map[string]uint64, uint64) {
		st, err := d.Client.Status(testCtx(d.t))
		require.NoError(d.t, err)
		var total uint64
		for _, n := range st.FuseRequests {
			total += n
		}
		return st.FuseRequests, total
	}
	_, last := read()
	since := time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		counts, total := read()
		if total != last {
			last, since = total, time.Now()
			continue
		}
		if time.Since(since) >= 300*time.Millisecond {
			return counts
		}
	}
	d.t.Fatalf("the mount kept receiving requests for 20 s")
	return nil
}

// TestRequests_PerFileIsPinned pins how many FUSE requests the kernel sends
// the daemon per file for create, stat after a listing, rename and unlink,
// unbound and bound to a session (the daemon's own counters, daemon.status
// fuseRequests, without debug logging), so a change cannot add round trips
// unnoticed (each costs a kernel round trip, ~25 µs here). When a change
// removes requests, lower the pinned numbers.
func TestRequests_PerFileIsPinned(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	for _, w := range requestWorkloads {
		for _, binding := range []string{"unbound", "bound"} {
			t.Run(w.name+"/"+binding, func(t *testing.T) {
				dir := w.name + "-" + binding
				require.NoError(t, os.Mkdir(d.m(dir), 0o755))
				var session string
				if binding == "bound" {
					id, err := d.Client.OpenSession(testCtx(t), "requests-"+dir)
					require.NoError(t, err)
					session = string(id)
				}
				files := w.files
				if files == 0 {
					files = requestFiles
				}
				run := func(script string) {
					t.Helper()
					script = strings.ReplaceAll(script, "{N}", fmt.Sprint(files))
					args := []string{"perl", "-U", "-e", "chdir($ARGV[0]) or die \"chdir: $!\"; " + script, d.m(dir)}
					var cmd *exec.Cmd
					if binding == "bound" {
						cmd = exec.Command(dshBinary, append([]string{"exec", "--socket", d.Socket, "--session", session, "--"}, args...)...)
					} else {
						cmd = exec.Command(args[0], args[1:]...)
					}
					_, stderr, code := runCaptured(t, cmd)
					require.Zero(t, code, "%s: %s", script, stderr)
				}
				if w.setup != "" {
					run(w.setup)
				}
				before := d.requestCounts()
				run(w.measure)
				counts := d.requestCounts()
				for op, n := range before {
					counts[op] -= n
				}
				delete(counts, "FORGET")
				var total uint64
				for op, n := range counts {
					if n == 0 {
						delete(counts, op)
					}
					total += n
				}
				perFile := float64(total) / float64(files)
				t.Logf("%s %s: %.2f requests per file: %s", w.name, binding, perFile, formatCounts(counts))
				assert.LessOrEqual(t, perFile, w.pinned[binding]+requestSlack,
					"%s %s: FUSE requests per file went up (%s)", w.name, binding, formatCounts(counts))
			})
		}
	}
}

// formatCounts renders counts by opcode, most first.
func formatCounts(counts map[string]uint64) string {
	ops := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %d", op, counts[op]))
	}
	return strings.Join(parts, ", ")
}
