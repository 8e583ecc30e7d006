package procbind

import (
	"sort"

	"github.com/dshmount/dshmount/internal/policy"
)

// State is one binding as dshmount status shows it.
type State struct {
	Session policy.SessionID
	// PID is the root process of a process binding (0 for a cgroup).
	PID int
	// Cgroup is the binding cgroup ("" for a process binding).
	Cgroup string
	// TreeGone: no bound root process of the session runs any more (the
	// dshmount exec that bound it was killed or exited). A process
	// binding is then about to be swept; a cgroup binding keeps its
	// members bound only while they stay in it, and a root process can
	// leave it.
	TreeGone bool
}

// List returns every binding without sweeping, so a binding whose process
// tree is gone is shown until the next sweep removes it; by session, then
// process bindings first.
func (r *Registry) List() []State {
	r.mu.Lock()
	bound := make(map[int]binding, len(r.bound))
	for pid, b := range r.bound {
		bound[pid] = b
	}
	groups := make(map[string]policy.SessionID, len(r.groups))
	for cg, s := range r.groups {
		groups[cg] = s
	}
	r.mu.Unlock()

	var out []State
	liveTree := map[policy.SessionID]bool{}
	for pid, b := range bound {
		alive := r.alive(policy.BindingRecord{Session: b.session, PID: pid, Start: b.start})
		liveTree[b.session] = liveTree[b.session] || alive
		out = append(out, State{Session: b.session, PID: pid, TreeGone: !alive})
	}
	for cg, s := range groups {
		out = append(out, State{Session: s, Cgroup: cg, TreeGone: !liveTree[s]})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		if (a.Cgroup == "") != (b.Cgroup == "") {
			return a.Cgroup == ""
		}
		return a.PID < b.PID || a.PID == b.PID && a.Cgroup < b.Cgroup
	})
	return out
}
