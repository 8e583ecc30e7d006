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
	// Assembly opens a daemon's core and builds its service, for the
	// program that hands them to the transports.
	Assembly
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
		"patch":                              Pure,
		"internal/merge":                     Pure,
		"internal/records":                   Pure,
		"internal/mountinfo":                 Pure,
		"internal/proctest":                  Pure,
		"internal/layers":                    Pure,
		"internal/fuse/reqcount":             Pure,
		"internal/fuse/mounttest":            Pure,
		"internal/shardcache":                Pure,
		"internal/provider/eol":              Pure,
		"internal/provider/version":          Primitives,
		"internal/beneath":                   Primitives,
		"internal/provider/providertest":     Backends,
		"internal/registry":                  Pure,
		"internal/policy/kv":                 Seams,
		"internal/provider":                  Seams,
		"internal/provider/local":            Backends,
		"internal/policy/kv/badgerkv":        Backends,
		"internal/policy/kv/etcdkv":          Backends,
		"internal/policy/kv/etcdkv/etcdtest": Backends,
		"internal/policy/kv/kvtest":          Backends,
		"internal/viewrules":                 Rules,
		"internal/policy":                    Rules,
		"internal/journal":                   Rules,
		"internal/seen":                      Rules,
		"internal/branch":                    Composites,
		"internal/policy/procbind":           Composites,
		"internal/policy/localstore":         Composites,
		"internal/watcher":                   Composites,
		"internal/service":                   Services,
		"internal/daemon":                    Assembly,
		"internal/fuse":                      Transports,
		"control":                            Transports,
		"control/mcp":                        Clients,
		"internal/fsmonitor":                 Clients,
		"cmd/dshmount":                       Programs,
		"bench/cmd/dshbench":                 Programs,
		"bench/loopback":                     Programs,
		"integration":                        Programs,
		"integration/fsx":                    Programs,
	}
}

// Unreachable lists, for some packages, the module packages they must not
// reach even through others (go list -deps): the transports serve the
// workspace through the provider seam, and the daemon's assembly
// (internal/daemon, which the program calls) alone chooses the host-disk
// backend.
func Unreachable() map[string][]string {
	return map[string][]string{
		"internal/fuse": {"internal/provider/local"},
		"control":       {"internal/provider/local"},
	}
}
