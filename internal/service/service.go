package service

import (
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/seen"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// ProcessBinder makes a process and its descendants act for a session on the
// mount (policy/procbind implements it).
type ProcessBinder interface {
	Bind(session policy.SessionID, pid int) error
	// SessionOf answers which session pid acts for (false: unbound).
	SessionOf(pid int) (policy.SessionID, bool)
}

// StrictBinder is a ProcessBinder that also makes strict bindings
// (session.bind {strict}).
type StrictBinder interface {
	BindStrict(session policy.SessionID, pid int) error
}

// BindingLister is a ProcessBinder that also lists its bindings
// (daemon.status shows them).
type BindingLister interface {
	Bindings() []BindingInfo
}

// Config configures a Service. Engine is required.
type Config struct {
	Engine *policy.Engine // the one guarded path
	Binder ProcessBinder  // nil: session.bind answers an error
	// View holds the workspace view's hide and read-only rules, which
	// branch scopes, branch commits and atomic patches apply too (the
	// journal writes the workspace beneath the view); nil: no rules.
	View *viewrules.View
	// Branches keeps the branches of branch.* and of the fs.* methods'
	// branch parameter; nil: they answer an error.
	Branches *branch.Manager
	// Journal applies atomic patches all or nothing (the workspace's one
	// commit journal, which branch commits go through too); nil: atomic
	// patches answer an error.
	Journal Committer
	// BranchMounts serves branches as FUSE mounts (branch.create's mount,
	// branch.mount); nil: those are refused.
	BranchMounts BranchMounter
	// ExternalWatched reports whether the backing-tree watcher runs (nil:
	// it does not); without it fs.changes cannot vouch for changes made in
	// the workspace directory and answers everything: true.
	ExternalWatched func() bool
	// SeenBytes keeps the bytes sessions read over the socket, for
	// merge: true (nil: no merge; a stale change is refused as before).
	SeenBytes *seen.Cache
	// MaxWatches bounds fs.watch watches across connections (each is a
	// feed subscription with its buffer). Default DefaultMaxWatches.
	MaxWatches int
	// WatchBuffer bounds how many changes a watch may fall behind by before
	// it gets a lost event and ends. Default policy.DefaultFeedBuffer.
	WatchBuffer int
	// WatchWindow is how long a watch collects changes before sending
	// them, merging the changes of one path by one actor. Default
	// DefaultWatchWindow.
	WatchWindow time.Duration
	Logger      *slog.Logger // nil: slog.Default()
	// Source and Mount are the workspace directory and its mount point
	// (daemon.status; no branch is mounted inside them).
	Source, Mount string

	// Hooks let tests interleave with request handling (nil: none); they
	// are read at each call.
	Hooks *Hooks
}

// Hooks let tests interleave with request handling.
type Hooks struct {
	// BeforeCommitOp runs before the commit of patch operation i (0-based).
	BeforeCommitOp func(i int)
	// CommitApplied runs when a branch commit or an atomic patch has put
	// every file in place, before it ends.
	CommitApplied func()
}

// Defaults of Config.
const (
	DefaultMaxWatches  = 256
	DefaultWatchWindow = 30 * time.Millisecond
)

// withDefaults fills the zero knobs.
func (c Config) withDefaults() Config {
	if c.MaxWatches <= 0 {
		c.MaxWatches = DefaultMaxWatches
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = policy.DefaultFeedBuffer
	}
	if c.WatchWindow <= 0 {
		c.WatchWindow = DefaultWatchWindow
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Service runs the methods of the control protocol over the policy
// engine, the view, the branches and the journal. Every transport calls
// it with a Caller and a method's params. Create it with New.
type Service struct {
	cfg     Config
	log     *slog.Logger
	engine  *policy.Engine
	store   *policy.Store
	names   *sessionNames // names of the sessions opened here, closed ones included
	fs      provider.FileSystem
	br      *branchScopes
	journal Committer
	// commitHooks tie every journaled commit (branch commit, atomic
	// patch) to the engine; built once, each commit's origin says who.
	commitHooks branch.Hooks
	view        *viewrules.View // the workspace view's rules (Config.View)
	uid         uint32

	changeRun *changesState // fs.changes' run, one per service
	watchSeq  atomic.Uint64
	watches   atomic.Int64 // watches open, all connections

	hooks *Hooks
}

// New returns the service of cfg's engine; branches recovered at start are
// audited.
func New(cfg Config) (*Service, error) {
	if cfg.Hooks == nil {
		cfg.Hooks = &Hooks{}
	}
	if cfg.Engine == nil {
		return nil, errors.New("service: no policy engine configured")
	}
	cfg = cfg.withDefaults()
	s := &Service{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "control"),
		engine:    cfg.Engine,
		store:     cfg.Engine.Store(),
		names:     newSessionNames(cfg.Engine.Store()),
		fs:        cfg.Engine.FS(),
		uid:       uint32(os.Getuid()),
		changeRun: &changesState{run: newRunID()},
		hooks:     cfg.Hooks,
	}
	var rules viewrules.Rules
	if cfg.View != nil {
		rules = cfg.View.Rules()
	}
	s.br = newBranchScopes(cfg.Branches, rules, cfg.BranchMounts)
	s.journal, s.view = cfg.Journal, cfg.View
	s.commitHooks = s.newCommitHooks()
	if cfg.Branches != nil {
		s.auditRecovered(cfg.Branches.TakeRecovered())
	}
	return s, nil
}

// Store returns the policy store (sessions, audit log, change feed).
func (s *Service) Store() *policy.Store { return s.store }

// Binder returns the process binder (nil: none).
func (s *Service) Binder() ProcessBinder { return s.cfg.Binder }

// Watches returns the number of watches open, all connections.
func (s *Service) Watches() int64 { return s.watches.Load() }
