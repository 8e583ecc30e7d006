package daemon

import (
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/procbind"
	"github.com/dshmount/dshmount/internal/service"
)

// binder binds through the registry, then tells the mounts to forget the
// callers they resolved before the bind.
type binder struct {
	reg    *procbind.Registry
	forget func() // nil: no mount to tell
}

var (
	_ service.ProcessBinder = binder{}
	_ service.StrictBinder  = binder{}
	_ service.BindingLister = binder{}
)

// Bind implements service.ProcessBinder.
func (b binder) Bind(session policy.SessionID, pid int) error {
	err := b.reg.Bind(session, pid)
	b.forgetCallers()
	return err
}

// BindStrict implements service.StrictBinder.
func (b binder) BindStrict(session policy.SessionID, pid int) error {
	err := b.reg.BindWith(session, pid, true)
	b.forgetCallers()
	return err
}

func (b binder) forgetCallers() {
	if b.forget != nil {
		b.forget()
	}
}

// SessionOf implements service.ProcessBinder.
func (b binder) SessionOf(pid int) (policy.SessionID, bool) { return b.reg.SessionOf(pid) }

// Bindings implements service.BindingLister.
func (b binder) Bindings() []service.BindingInfo {
	var out []service.BindingInfo
	for _, st := range b.reg.List() {
		out = append(out, service.BindingInfo{Session: st.Session, PID: st.PID, Cgroup: st.Cgroup, TreeGone: st.TreeGone})
	}
	return out
}
