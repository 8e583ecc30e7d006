package policy

import (
	"context"

	"github.com/dshmount/dshmount/internal/provider"
)

// Decider turns an actor's knowledge into the guard of a mutation. The
// Engine has one decider slot; the first registered decider fully decides.
// A nil guard with a nil error means unconditional.
type Decider interface {
	// WriteIntent guards a full-file write (and a move destination).
	WriteIntent(ctx context.Context, a Actor, t provider.Target) (*provider.WriteIntent, error)
	// EditIntent guards an edit, a patch and a move source.
	EditIntent(ctx context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error)
	// DeleteIntent guards a delete.
	DeleteIntent(ctx context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error)
}

// ObservationDecider is the observation policy ("read before you write")
// of the socket and MCP: the socket columns of the guard table (guard.go).
//
//	write:               unseen, absent → CreateIfAbsent; present(v) → ReplaceIfVersion(v)
//	edit, patch, delete: unseen → FS_NOT_OBSERVED; absent → FS_NOT_FOUND; present(v) → {v}
//	move:                source as edit, destination as write
//
// An actor without a session has no owner for observations, so it is treated
// as having seen nothing (seed 004's "agent without session" rung): it may
// only create absent files. Callers that mean "unguarded" say so with
// Guard.Unconditional.
type ObservationDecider struct{ table guardTable }

var _ Decider = ObservationDecider{}

// NewObservationDecider returns the observation decider over store.
func NewObservationDecider(store *Store) ObservationDecider {
	return ObservationDecider{table: guardTable{store: store}}
}

// WriteIntent implements Decider.
func (d ObservationDecider) WriteIntent(_ context.Context, a Actor, t provider.Target) (*provider.WriteIntent, error) {
	r := d.table.rule(a, Session{}, reqWrite, "write", t, nil)
	switch r.kind {
	case ruleAt:
		return &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: r.version}, nil
	case ruleRefuse:
		return nil, r.err
	}
	return &provider.WriteIntent{Kind: provider.CreateIfAbsent}, nil
}

// EditIntent implements Decider.
func (d ObservationDecider) EditIntent(_ context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error) {
	return d.versionGuard(a, t, "edit")
}

// DeleteIntent implements Decider.
func (d ObservationDecider) DeleteIntent(_ context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error) {
	return d.versionGuard(a, t, "delete")
}

func (d ObservationDecider) versionGuard(a Actor, t provider.Target, op string) (*provider.VersionGuard, error) {
	r := d.table.rule(a, Session{}, reqChange, op, t, nil)
	if r.kind != ruleAt {
		return nil, r.err
	}
	return &provider.VersionGuard{Version: r.version}, nil
}

func notObserved(op, path string) error {
	return provider.NewError(provider.CodeNotObserved, op, path, nil,
		"you have not read this file in this session; read it first")
}

func observedAbsent(op, path string) error {
	return provider.NewError(provider.CodeNotFound, op, path, nil,
		"this file did not exist when you last looked; read it again, or write it to create it")
}

func staleVersion(op, path string) error {
	return provider.NewError(provider.CodeStaleVersion, op, path, nil,
		"the file changed since you read it; read it again")
}
