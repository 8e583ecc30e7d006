package fuse

import (
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// fakeGuard answers the mount's decisions with a fixed error and counts
// the calls; the methods a test does not expect panic (the nil Guard).
type fakeGuard struct {
	Guard
	refuse  error
	outside bool
	checks  int
	observe int
}

func (g *fakeGuard) CheckMountFile(policy.Actor, policy.MutationOp, provider.Target, policy.FileNow) error {
	g.checks++
	return g.refuse
}

func (g *fakeGuard) CheckMountCreate(policy.Actor, policy.MutationOp, provider.Target, *provider.Version) error {
	g.checks++
	return g.refuse
}

func (g *fakeGuard) OutsideGuard(policy.Actor, provider.Target) bool { return g.outside }

func (g *fakeGuard) ObserveMount(policy.Actor, provider.Target, policy.Observation) error {
	g.observe++
	return nil
}

// TestGuardSeam_DecisionsBecomeErrnos runs the mount's guard hooks through
// a fake guard, without a kernel mount: who is asked, and which errno a
// program sees for each refusal.
func TestGuardSeam_DecisionsBecomeErrnos(t *testing.T) {
	bound := policy.Actor{Channel: policy.ChannelMount, Session: "s1"}
	unbound := policy.Actor{Channel: policy.ChannelMount}
	target := provider.Target{DisplayPath: "f.txt", Key: "f.txt"}
	refusal := func(code provider.Code) error { return provider.NewError(code, "write", "f.txt", nil, "refused") }
	for _, tc := range []struct {
		name   string
		actor  policy.Actor
		refuse error
		want   syscall.Errno
		asked  bool
	}{
		{"an unbound caller is never asked about", unbound, refusal(provider.CodeNotObserved), 0, false},
		{"allowed", bound, nil, 0, true},
		{"not read in this session: EACCES", bound, refusal(provider.CodeNotObserved), syscall.EACCES, true},
		{"read-only or hidden: EACCES", bound, refusal(provider.CodeSandboxDenied), syscall.EACCES, true},
		{"changed since it was read: ESTALE", bound, refusal(provider.CodeStaleVersion), syscall.ESTALE, true},
		{"seen absent: ENOENT", bound, refusal(provider.CodeNotFound), syscall.ENOENT, true},
		{"any other code: EIO", bound, refusal(provider.CodeIOError), syscall.EIO, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGuard{refuse: tc.refuse}
			m := &mountState{cfg: Config{Engine: g}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			assert.Equal(t, tc.want, m.checkChange(tc.actor, "write", target, policy.FileNow{}), "change")
			assert.Equal(t, tc.want, m.checkCreate(tc.actor, "create", target), "create")
			assert.Equal(t, tc.asked, g.checks == 2, "the guard was asked %d times", g.checks)
		})
	}
}

// TestGuardSeam_AFileThatCannotBeHashedIsNoDecision pins that an error
// without a code (the file vanished while it was hashed) is the
// syscall's own error, not a refusal.
func TestGuardSeam_AFileThatCannotBeHashedIsNoDecision(t *testing.T) {
	g := &fakeGuard{refuse: &wrappedErrno{syscall.ENOENT}}
	m := &mountState{cfg: Config{Engine: g}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	got := m.checkChange(policy.Actor{Session: "s1"}, "write", provider.Target{DisplayPath: "f"}, policy.FileNow{})
	require.Equal(t, syscall.ENOENT, got)
}

// TestGuardSeam_OutsideTheGuardNothingIsObserved pins that the mount
// records no observation of a path outside the guard (git's directory,
// --unguarded), nor of an unbound caller's read.
func TestGuardSeam_OutsideTheGuardNothingIsObserved(t *testing.T) {
	target := provider.Target{DisplayPath: ".git/index"}
	g := &fakeGuard{outside: true}
	m := &mountState{cfg: Config{Engine: g}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	m.observe(policy.Actor{Session: "s1"}, target, policy.Observation{})
	m.observe(policy.Actor{}, target, policy.Observation{})
	assert.Zero(t, g.observe)
	g.outside = false
	m.observe(policy.Actor{Session: "s1"}, target, policy.Observation{})
	assert.Equal(t, 1, g.observe)
}

// wrappedErrno is an error that carries an errno but no provider code.
type wrappedErrno struct{ errno syscall.Errno }

func (e *wrappedErrno) Error() string { return "hash: " + e.errno.Error() }
func (e *wrappedErrno) Unwrap() error { return e.errno }
