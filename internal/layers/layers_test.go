package layers

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// imports lists, for every package of the module, the module packages it
// imports (go list, test files excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, Module+"/...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "go list: %s", errb.String())
	got := map[string][]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], Module+"/")
		got[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, Module+"/"); ok {
				got[pkg] = append(got[pkg], rel)
			}
		}
	}
	require.NoError(t, sc.Err())
	return got
}

// TestLayers_EveryImportPointsDown checks each import of the module
// against the table: an import of the same or a higher layer is a
// package reaching past its place.
func TestLayers_EveryImportPointsDown(t *testing.T) {
	table := Table()
	var bad []string
	for pkg, deps := range imports(t) {
		layer, ok := table[pkg]
		if !ok {
			bad = append(bad, pkg+" is not in the layer table (internal/layers): place it")
			continue
		}
		for _, d := range deps {
			if dl, ok := table[d]; ok && dl >= layer {
				bad = append(bad, pkg+" imports "+d+", which is not below it")
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad)
}

// TestLayers_TheTableHasNoStalePackage keeps the table to packages that
// exist.
func TestLayers_TheTableHasNoStalePackage(t *testing.T) {
	pkgs := imports(t)
	for pkg := range Table() {
		_, ok := pkgs[pkg]
		require.True(t, ok, "the layer table names %s, which does not exist", pkg)
	}
}

// TestLayers_TransportsStayApart pins what the architecture relies on
// beyond the order: the mount and the socket do not import each other,
// and MCP reaches the workspace only as a client of the socket.
func TestLayers_TransportsStayApart(t *testing.T) {
	pkgs := imports(t)
	require.NotContains(t, pkgs["internal/fuse"], "control")
	require.NotContains(t, pkgs["control"], "internal/fuse")
	for _, d := range pkgs["control/mcp"] {
		require.NotContains(t, []string{"internal/viewrules", "internal/branch", "internal/provider/local", "internal/fuse", "internal/journal"}, d,
			"control/mcp imports %s; it is a client of the socket", d)
	}
}

// TestLayers_UnreachableStaysUnreached checks the table of Unreachable
// against every dependency, direct or not, of its packages (test files
// excluded).
func TestLayers_UnreachableStaysUnreached(t *testing.T) {
	var bad []string
	for pkg, forbidden := range Unreachable() {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", Module+"/"+pkg)
		cmd.Dir = "../.."
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "go list: %s", errb.String())
		deps := strings.Fields(out.String())
		for _, f := range forbidden {
			if slices.Contains(deps, Module+"/"+f) {
				bad = append(bad, pkg+" reaches "+f)
			}
		}
	}
	sort.Strings(bad)
	require.Empty(t, bad)
}

// inCore reports whether pkg is of the core the socket's transports reach
// only through the service: the guard (policy and its stores), the view
// and branches (viewrules, branch), and the host disk (provider/local).
func inCore(pkg string) bool {
	return pkg == "internal/policy" || strings.HasPrefix(pkg, "internal/policy/") ||
		pkg == "internal/viewrules" || pkg == "internal/branch" || pkg == "internal/provider/local"
}

// gateways are the packages through which a transport or the program may
// reach the core: the service, the daemon's assembly of the core and the
// service, and the FUSE transport (which guards the mount itself, beside
// the socket).
var gateways = []string{"internal/service", "internal/daemon", "internal/fuse"}

// pastService returns the direct imports of pkg that are in the core or
// reach it by a path that enters no gateway.
func pastService(pkgs map[string][]string, pkg string) []string {
	reaches := map[string]bool{}
	var walk func(p string) bool
	walk = func(p string) bool {
		if r, ok := reaches[p]; ok {
			return r
		}
		reaches[p] = false // cycles cannot happen in Go; this only memoises
		r := inCore(p)
		if !slices.Contains(gateways, p) {
			for _, d := range pkgs[p] {
				if walk(d) {
					r = true
				}
			}
		}
		reaches[p] = r
		return r
	}
	var out []string
	for _, d := range pkgs[pkg] {
		if !slices.Contains(gateways, d) && walk(d) {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// TestLayers_TransportsReachTheCoreOnlyThroughTheService pins the service
// boundary: control, control/mcp and the CLI reach policy, viewrules, branch and
// provider/local only through the service (the CLI: through the daemon's
// assembly, internal/daemon, which opens the core and builds the service),
// and neither the service nor the assembly imports a transport, not even
// indirectly.
func TestLayers_TransportsReachTheCoreOnlyThroughTheService(t *testing.T) {
	pkgs := imports(t)
	for _, pkg := range []string{"control", "control/mcp", "internal/fsmonitor", "cmd/dshmount"} {
		require.Empty(t, pastService(pkgs, pkg), "%s reaches policy, viewrules, branch or provider/local past the service", pkg)
	}

	for _, core := range []string{"internal/service", "internal/daemon"} {
		seen := map[string]bool{}
		var deps func(p string)
		deps = func(p string) {
			for _, d := range pkgs[p] {
				if !seen[d] {
					seen[d] = true
					deps(d)
				}
			}
		}
		deps(core)
		for d := range seen {
			require.False(t, d == "internal/fuse" || strings.HasPrefix(d, "internal/fuse/") && d != "internal/fuse/reqcount" || d == "internal/fsmonitor" ||
				d == "control" || strings.HasPrefix(d, "control/") || strings.HasPrefix(d, "cmd/"),
				"%s reaches the transport %s", core, d)
		}
	}
}
