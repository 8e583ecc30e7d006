package fuse

import (
	"errors"
	"log/slog"
	"time"

	"github.com/dshmount/dshmount/overlay"
	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/policy/procbind"
	"github.com/dshmount/dshmount/provider/local"
)

// Default kernel cache timeouts. Every change made through the mount is
// seen by the kernel and every change made through the control socket is
// invalidated at once (see invalidate.go); only out-of-band changes to the
// backing directory (git checkout there, another program) wait for the
// timeout, so it bounds how long the mount may show their old state.
const (
	DefaultEntryTimeout = 10 * time.Second
	DefaultAttrTimeout  = 10 * time.Second
)

// Bindings maps a calling pid to the session it acts for;
// *procbind.Registry implements it.
type Bindings interface {
	SessionOf(pid int) (policy.SessionID, bool)
}

var _ Bindings = (*procbind.Registry)(nil)

// Config is everything a mount needs.
type Config struct {
	Local  *local.FS      // the backing directory; required
	View   *overlay.View  // hide / read-only rules; required
	Engine *policy.Engine // guards, versions, audit; required
	// Bindings maps callers to sessions; nil: every caller is unbound.
	Bindings Bindings
	Logger   *slog.Logger // nil: slog.Default()
	// Debug logs every FUSE request (go-fuse's debug output, at debug level).
	Debug bool
	// AllowOther lets other users use the mount (allow_other; the kernel
	// still checks file modes: default_permissions is always on).
	AllowOther bool
	// EntryTimeout and AttrTimeout bound how long the kernel caches names
	// and attributes; zero means the defaults above, negative means none.
	EntryTimeout, AttrTimeout time.Duration
	// Passthrough offers the kernel the backing file of each open (kernel
	// ≥ 6.9, as root): reads and writes then bypass the daemon. Guards do not
	// depend on it (they are decided at open, setattr, rename, unlink and
	// release); it is switchable so tests can cover both paths.
	Passthrough bool
}

// withDefaults fills the zero fields; it is the one place defaults live.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if r, ok := c.Bindings.(*procbind.Registry); ok && r == nil {
		c.Bindings = nil // a nil registry in the interface: nobody is bound
	}
	if c.EntryTimeout == 0 {
		c.EntryTimeout = DefaultEntryTimeout
	}
	if c.AttrTimeout == 0 {
		c.AttrTimeout = DefaultAttrTimeout
	}
	if c.EntryTimeout < 0 {
		c.EntryTimeout = 0
	}
	if c.AttrTimeout < 0 {
		c.AttrTimeout = 0
	}
	return c
}

// validate reports a missing required field.
func (c Config) validate() error {
	var errs []error
	if c.Local == nil {
		errs = append(errs, errors.New("Config.Local is required"))
	}
	if c.View == nil {
		errs = append(errs, errors.New("Config.View is required"))
	}
	if c.Engine == nil {
		errs = append(errs, errors.New("Config.Engine is required"))
	}
	return errors.Join(errs...)
}
