// Package kv is the seam between the policy store and the engine that keeps
// its records: an ordered key-value map with point reads, bounded prefix
// scans in either order, batched writes, and small all-or-nothing
// compare-and-swap transactions. It owns no record format; policy/ decides
// what the keys and values mean.
//
// Two engines implement it: badgerkv (embedded, one daemon, the default) and
// etcdkv (shared by every daemon that names the same etcd and prefix). Both
// pass one conformance suite, kvtest.Run. The seam is deliberately smaller
// than JuiceFS's tkv or etcd's STM: a transaction here is a list of
// conditions checked against the committed values and a list of writes
// applied if they all hold, never an interactive read-modify-write. A caller
// that needs one reads, computes, and commits with the values it read as
// conditions, retrying when another writer won.
//
// Limits: a Txn takes at most MaxTxnOps conditions and MaxTxnOps writes
// (etcd's server refuses more, by default 128, and a client cannot ask the
// server for its limit); Write takes any number and applies them in chunks
// of at most MaxTxnOps, each chunk atomic, so a reader may see a prefix of a
// large batch but never a torn chunk.
package kv

import (
	"bytes"
	"context"
	"errors"
)

// Errors of every engine, matched with errors.Is.
var (
	// ErrNotFound: Get found no value for the key.
	ErrNotFound = errors.New("key not found")
	// ErrUnavailable: the engine cannot be reached (a network partition, a
	// stopped server, a timeout). The call may have taken effect or not:
	// callers refuse guarded work and retry later.
	ErrUnavailable = errors.New("store engine unavailable")
	// ErrTooBig: a Txn has more conditions or writes than MaxTxnOps.
	ErrTooBig = errors.New("transaction has too many operations")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("store engine is closed")
)

// Op is one write: a put of Value at Key, or (Delete) the removal of Key.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Put is the write of value at key.
func Put(key, value []byte) Op { return Op{Key: key, Value: value} }

// Delete is the removal of key (no error when it is absent).
func Delete(key []byte) Op { return Op{Key: key, Delete: true} }

// Cond is one condition of a Txn: Key holds exactly Value, or (Absent) Key
// has no value.
type Cond struct {
	Key    []byte
	Value  []byte
	Absent bool
}

// IfValue is the condition "key holds exactly value".
func IfValue(key, value []byte) Cond { return Cond{Key: key, Value: value} }

// IfAbsent is the condition "key has no value".
func IfAbsent(key []byte) Cond { return Cond{Key: key, Absent: true} }

// Range selects the keys a Scan visits: those starting with Prefix, from
// Start on (inclusive; ascending: keys ≥ Start, Reverse: keys ≤ Start; nil:
// from the first, or the last, key of the prefix), at most Limit of them
// (0: no limit).
type Range struct {
	Prefix  []byte
	Start   []byte
	Reverse bool
	Limit   int
}

// Pair is one key and its value, as a Scan visits it. Both are the
// caller's to keep.
type Pair struct {
	Key, Value []byte
}

// Store is an ordered key-value store. Every method is safe for concurrent
// use. Keys are opaque bytes, compared bytewise.
type Store interface {
	// Get returns key's value, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn for each key of r in order, with its value, until fn
	// returns an error (returned as is) or the range ends. It reads a
	// consistent snapshot per page; a long scan may see later writes.
	Scan(ctx context.Context, r Range, fn func(Pair) error) error
	// Write applies ops in order (a later op on a key wins), atomically
	// per chunk of MaxTxnOps.
	Write(ctx context.Context, ops []Op) error
	// Txn applies ops atomically if every cond holds and reports whether
	// it did (false: nothing was written). More than MaxTxnOps conds or
	// ops fail with ErrTooBig.
	Txn(ctx context.Context, conds []Cond, ops []Op) (bool, error)
	// MaxTxnOps is the most conditions, and separately the most writes,
	// that one Txn takes.
	MaxTxnOps() int
	// Sync makes every acknowledged write durable.
	Sync(ctx context.Context) error
	// Shared reports whether other daemons may write the same records
	// (then the store does not cache what another daemon can change).
	Shared() bool
	// Close releases the engine; later calls fail with ErrClosed.
	Close() error
}

// Watcher is implemented by a shared engine: it tells a daemon what other
// daemons wrote.
type Watcher interface {
	// WatchPuts calls fn, in commit order, for each put under prefix
	// committed after the call began, until ctx ends (then it returns
	// ctx's error). Across a lost connection it resumes where it stopped;
	// when it cannot (the engine compacted that history away, or it is
	// unreachable for longer than its own retry), it returns an error
	// wrapping ErrUnavailable after the puts it did deliver.
	WatchPuts(ctx context.Context, prefix []byte, fn func(Pair)) error
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, or nil when there is none (an empty or all-0xff prefix).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Dedupe returns ops with only the last write of each key, in the order of
// those last writes (a transaction may name a key once).
func Dedupe(ops []Op) []Op {
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		last[string(op.Key)] = i
	}
	if len(last) == len(ops) {
		return ops
	}
	out := make([]Op, 0, len(last))
	for i, op := range ops {
		if last[string(op.Key)] == i {
			out = append(out, op)
		}
	}
	return out
}
