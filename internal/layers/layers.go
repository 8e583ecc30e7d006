// Package layers writes down, once, the order of the module's packages:
// a package may import only packages of a lower layer. ARCHITECTURE.md
// describes the layers; the test in this package checks every import of
// the module against the table, and fails when a package is not placed.
package layers

// Module is the module path the table's package names are relative to.
const Module = "github.com/dshmount/dshmount"

// Layer numbers, lowest first.
const (
	// Pure is code with no I/O of the workspace: the patch language, the
	// merge engine, small helpers.
	Pure = iota
	// Seams are the interfaces and types every backend shares.
	Seams
	// Primitives are definitions built on the seams that every backend
	// and transport shares: content versions, the resolution fence of
	// writes beneath a directory.
	Primitives
	// Backends reach the disk or a database.
	Backends
	// Rules decide: the view's rules, the guard and its store, the commit
	// journal.
	Rules
	// Composites build on the rules: branches, process bindings.
	Composites
	// Services run the methods every transport serves: one checklist per
	// method over the rules and composites.
	Services
	// Transports serve requests: the FUSE mount and the control socket.
	Transports
	// Clients speak to a transport: MCP, the fsmonitor hook.
	Clients
	// Programs are binaries and test drivers.
	Programs
)

// Table places every package of the module (relative to Module).
func Table() map[string]int {
	return map[string]int{
		"patch":                     Pure,
		"merge":                     Pure,
		"internal/records":          Pure,
		"internal/mountinfo":        Pure,
		"internal/proctest":         Pure,
		"internal/layers":           Pure,
		"fuse/reqcount":             Pure,
		"internal/shardcache":       Pure,
		"provider/eol":              Pure,
		"provider/version":          Primitives,
		"internal/beneath":          Primitives,
		"provider/providertest":     Backends,
		"control/registry":          Pure,
		"policy/kv":                 Seams,
		"provider":                  Seams,
		"provider/local":            Backends,
		"policy/kv/badgerkv":        Backends,
		"policy/kv/etcdkv":          Backends,
		"policy/kv/etcdkv/etcdtest": Backends,
		"policy/kv/kvtest":          Backends,
		"overlay":                   Rules,
		"policy":                    Rules,
		"internal/journal":          Rules,
		"internal/seen":             Rules,
		"overlay/branch":            Composites,
		"policy/procbind":           Composites,
		"policy/localstore":         Composites,
		"internal/watcher":          Composites,
		"service":                   Services,
		"fuse":                      Transports,
		"control":                   Transports,
		"control/mcp":               Clients,
		"control/fsmonitor":         Clients,
		"cmd/dshmount":              Programs,
		"bench/cmd/dshbench":        Programs,
		"bench/loopback":            Programs,
		"integration":               Programs,
		"integration/fsx":           Programs,
	}
}

// Unreachable lists, for some packages, the module packages they must not
// reach even through others (go list -deps): the transports serve the
// workspace through the provider seam, and the program alone chooses the
// host-disk backend.
func Unreachable() map[string][]string {
	return map[string][]string{
		"fuse":    {"provider/local"},
		"control": {"provider/local"},
	}
}
