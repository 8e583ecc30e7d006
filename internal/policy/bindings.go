package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// BindingRecord is a persisted process binding: which processes act for
// which session on the mount. A binding names its processes either by a
// cgroup (every member of the cgroup v2 directory Cgroup, or of a cgroup
// below it) or by a root process (PID with its start time Start, and the
// descendants of that process). Bindings are kept apart from the session
// they name: they outlive it, so a process whose session was closed stays
// bound to a closed session (refused) instead of becoming unbound.
type BindingRecord struct {
	Session SessionID `json:"session"`
	// Cgroup is the cgroup's path in the cgroup v2 hierarchy as
	// /proc/PID/cgroup shows it ("/a/b"); empty for a process binding.
	Cgroup string `json:"cgroup,omitempty"`
	// PID and Start name the root process of a process binding.
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
	// Strict: the bound processes read before every write through the
	// mount, whatever their session's rule (dshmount exec --strict).
	Strict bool `json:"strict,omitempty"`
}

// bindingKey is the store key of rec: one per cgroup or per process
// incarnation, under this host on a shared engine.
func (s *Store) bindingKey(rec BindingRecord) []byte {
	if rec.Cgroup != "" {
		return []byte(s.bindingPrefix() + "c" + rec.Cgroup)
	}
	return []byte(s.bindingPrefix() + "p" + strconv.Itoa(rec.PID) + ":" + strconv.FormatUint(rec.Start, 10))
}

// bindingPrefix is where this daemon's bindings live: pids and cgroups
// name processes of one host only.
func (s *Store) bindingPrefix() string { return s.rec.bindingPrefix() }

// PutBinding stores rec durably (written and synced before it returns): a
// daemon killed right after a bind must still know the binding when it
// starts again, or the bound processes would act unguarded.
func (s *Store) PutBinding(rec BindingRecord) error {
	if s.closed.Load() {
		return ErrClosed
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode binding of session %s: %w", rec.Session, err)
	}
	ctx := context.Background()
	if err := s.db.Write(ctx, []kv.Op{kv.Put(s.bindingKey(rec), val)}); err != nil {
		return fmt.Errorf("store binding of session %s: %w", rec.Session, err)
	}
	if err := s.db.Sync(ctx); err != nil {
		return fmt.Errorf("sync binding of session %s: %w", rec.Session, err)
	}
	return nil
}

// DeleteBinding removes rec (once its processes are all gone).
func (s *Store) DeleteBinding(rec BindingRecord) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.db.Write(context.Background(), []kv.Op{kv.Delete(s.bindingKey(rec))}); err != nil {
		return fmt.Errorf("delete binding of session %s: %w", rec.Session, err)
	}
	return nil
}

// Bindings returns every stored binding.
func (s *Store) Bindings() ([]BindingRecord, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var out []BindingRecord
	prefix := []byte(s.bindingPrefix())
	err := s.db.Scan(context.Background(), kv.Range{Prefix: prefix}, func(p kv.Pair) error {
		var rec BindingRecord
		if err := json.Unmarshal(p.Value, &rec); err != nil {
			return fmt.Errorf("decode binding %q: %w", p.Key, err)
		}
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load bindings: %w", err)
	}
	return out, nil
}
