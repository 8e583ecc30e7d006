package policy

import (
	"context"

	"github.com/dshmount/dshmount/policy/kv"
)

// recorder is how the store keeps its records on its engine, chosen once
// when the store opens from the engine's declared capability (kv.Engine's
// Shared): a local engine is this daemon's alone, so records are buffered,
// cached and flushed in batches, with a clean-shutdown marker; a shared
// engine is written by other daemons too, so records are written through
// and nothing another daemon can change is cached.
type recorder interface {
	// start loads the meta records and sessions and applies the crash
	// rule.
	start() error
	// lookup reads key: (value, true) or (nil, false) when absent.
	lookup(key []byte) ([]byte, bool, error)
	// put stores key=val (keep: stay cached once flushed).
	put(key, val []byte, keep bool) error
	// del removes key.
	del(key []byte) error
	// markClean records a clean shutdown, before the final sync.
	markClean(ctx context.Context) error
}

// newRecorder is the recorder for s's engine.
func newRecorder(s *Store) recorder {
	if s.db.Shared() {
		return sharedRecorder{s}
	}
	return localRecorder{s}
}

// localRecorder keeps the records of a store whose engine only this daemon
// writes.
type localRecorder struct{ s *Store }

func (r localRecorder) start() error                            { return r.s.startLocal() }
func (r localRecorder) lookup(key []byte) ([]byte, bool, error) { return r.s.lookupLocal(key) }
func (r localRecorder) put(key, val []byte, keep bool) error {
	r.s.buf.put(key, val, keep)
	return nil
}
func (r localRecorder) del(key []byte) error {
	r.s.buf.del(key)
	return nil
}
func (r localRecorder) markClean(ctx context.Context) error {
	return r.s.db.Write(ctx, []kv.Op{kv.Put([]byte(keyClean), []byte{1})})
}

// sharedRecorder keeps the records of a store whose engine other daemons
// write too.
type sharedRecorder struct{ s *Store }

func (r sharedRecorder) start() error                            { return r.s.startShared() }
func (r sharedRecorder) lookup(key []byte) ([]byte, bool, error) { return r.s.lookupShared(key) }
func (r sharedRecorder) put(key, val []byte, _ bool) error {
	return r.s.writeThrough(kv.Put(key, val))
}
func (r sharedRecorder) del(key []byte) error { return r.s.writeThrough(kv.Delete(key)) }

// markClean does nothing: a shared store has no clean-shutdown marker (other
// daemons go on using it).
func (sharedRecorder) markClean(context.Context) error { return nil }
