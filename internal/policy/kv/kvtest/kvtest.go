// Package kvtest is the conformance suite every kv.Store passes: Run
// drives an engine through the contract of package kv (reads, ordered
// scans, chunked writes, compare-and-swap with racing writers, the
// transaction limit, durability across reopen, and the errors of an engine
// that is gone).
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// Harness is how the suite reaches one engine's backing storage.
type Harness struct {
	// Open opens an engine on the harness's storage; after Close, Open
	// again sees what was written before. A shared engine may be open
	// more than once at a time.
	Open func(t *testing.T) kv.Store
	// Outage, when set, makes the storage unreachable and returns the
	// function that brings it back (an engine server stopped and
	// restarted). Without it the suite checks a closed engine instead.
	Outage func(t *testing.T) (restore func())
}

// Run runs the suite; newHarness gives each subtest fresh storage.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"ScanOrderAndBounds", testScan},
		{"WriteLaterOpWins", testWriteLaterOpWins},
		{"WriteChunksPastTxnLimit", testWriteChunks},
		{"TxnAllOrNothing", testTxnAllOrNothing},
		{"TxnTooBig", testTxnTooBig},
		{"TxnRacersOneWinner", testTxnRacers},
		{"CounterNoLostUpdate", testCounter},
		{"DurableAcrossReopen", testDurable},
		{"Unavailable", testUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
}

func open(t *testing.T, h Harness) kv.Store {
	e := h.Open(t)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func b(s string) []byte { return []byte(s) }

func testGetPutDelete(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	_, err := e.Get(ctx, b("k"))
	require.ErrorIs(t, err, kv.ErrNotFound)
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put(b("k"), b("v1")), kv.Put(b("k2"), []byte{0, 0xff, 1})}))
	v, err := e.Get(ctx, b("k"))
	require.NoError(t, err)
	assert.Equal(t, "v1", string(v))
	v, err = e.Get(ctx, b("k2"))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0xff, 1}, v, "binary values round-trip")
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Delete(b("k")), kv.Delete(b("never"))}))
	_, err = e.Get(ctx, b("k"))
	require.ErrorIs(t, err, kv.ErrNotFound)
}

func collect(t *testing.T, e kv.Store, r kv.Range) []string {
	var out []string
	require.NoError(t, e.Scan(context.Background(), r, func(p kv.Pair) error {
		out = append(out, string(p.Key)+"="+string(p.Value))
		return nil
	}))
	return out
}

func testScan(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	var ops []kv.Op
	for _, k := range []string{"a/1", "a/2", "a/3", "a/30", "a0", "a", "b/1", "a/\xff"} {
		ops = append(ops, kv.Put(b(k), b("v"+k)))
	}
	require.NoError(t, e.Write(ctx, ops))
	p := b("a/")
	assert.Equal(t, []string{"a/1=va/1", "a/2=va/2", "a/3=va/3", "a/30=va/30", "a/\xff=va/\xff"}, collect(t, e, kv.Range{Prefix: p}))
	assert.Equal(t, []string{"a/\xff=va/\xff", "a/30=va/30", "a/3=va/3", "a/2=va/2", "a/1=va/1"},
		collect(t, e, kv.Range{Prefix: p, Reverse: true}), "descending from the prefix's end, never past it (a0 follows a/)")
	assert.Equal(t, []string{"a/2=va/2", "a/3=va/3"}, collect(t, e, kv.Range{Prefix: p, Start: b("a/2"), Limit: 2}))
	assert.Equal(t, []string{"a/3=va/3", "a/2=va/2", "a/1=va/1"}, collect(t, e, kv.Range{Prefix: p, Start: b("a/3"), Reverse: true}),
		"descending from Start inclusive")
	assert.Equal(t, []string{"a/2=va/2", "a/1=va/1"}, collect(t, e, kv.Range{Prefix: p, Start: b("a/25"), Reverse: true}),
		"a Start that is no key: the largest key below it")
	assert.Equal(t, []string{"a/1=va/1"}, collect(t, e, kv.Range{Prefix: p, Start: b("a/"), Limit: 1}))
	assert.Empty(t, collect(t, e, kv.Range{Prefix: b("c/")}))
	assert.Empty(t, collect(t, e, kv.Range{Prefix: b("c/"), Reverse: true}))
	all := collect(t, e, kv.Range{})
	assert.Len(t, all, 8, "an empty prefix is every key")
	assert.Equal(t, "a=va", all[0])
	assert.Equal(t, "b/1=vb/1", collect(t, e, kv.Range{Reverse: true, Limit: 1})[0])

	stop := errors.New("stop")
	n := 0
	err := e.Scan(ctx, kv.Range{Prefix: p}, func(kv.Pair) error { n++; return stop })
	require.ErrorIs(t, err, stop, "the callback's error ends the scan and is returned")
	assert.Equal(t, 1, n)

	// More keys than one page of any engine.
	ops = ops[:0]
	for i := range 1200 {
		ops = append(ops, kv.Put(fmt.Appendf(nil, "p/%05d", i), b("x")))
	}
	require.NoError(t, e.Write(ctx, ops))
	keys := collect(t, e, kv.Range{Prefix: b("p/"), Reverse: true, Start: b("p/01100")})
	require.Len(t, keys, 1101)
	assert.Equal(t, "p/01100=x", keys[0])
	assert.Equal(t, "p/00000=x", keys[1100])
	assert.Len(t, collect(t, e, kv.Range{Prefix: b("p/"), Start: b("p/00100")}), 1100)
}

func testWriteLaterOpWins(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put(b("k"), b("1")), kv.Delete(b("k")), kv.Put(b("k"), b("3")),
		kv.Put(b("j"), b("1")), kv.Delete(b("j"))}))
	v, err := e.Get(ctx, b("k"))
	require.NoError(t, err)
	assert.Equal(t, "3", string(v))
	_, err = e.Get(ctx, b("j"))
	require.ErrorIs(t, err, kv.ErrNotFound)
}

func testWriteChunks(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	n := e.MaxTxnOps() + 72 // 200 on etcd's default limit
	ops := make([]kv.Op, n)
	for i := range ops {
		ops[i] = kv.Put(fmt.Appendf(nil, "w/%04d", i), fmt.Appendf(nil, "%d", i))
	}
	require.NoError(t, e.Write(ctx, ops), "a batch past the transaction limit is written in chunks")
	assert.Len(t, collect(t, e, kv.Range{Prefix: b("w/")}), n)
}

func testTxnAllOrNothing(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put(b("x"), b("1")), kv.Put(b("y"), b("1"))}))

	ok, err := e.Txn(ctx, []kv.Cond{kv.IfValue(b("x"), b("1")), kv.IfValue(b("y"), b("2"))},
		[]kv.Op{kv.Put(b("x"), b("2")), kv.Put(b("z"), b("new"))})
	require.NoError(t, err)
	assert.False(t, ok, "one failed condition")
	v, _ := e.Get(ctx, b("x"))
	assert.Equal(t, "1", string(v), "nothing written when a condition fails")
	_, err = e.Get(ctx, b("z"))
	require.ErrorIs(t, err, kv.ErrNotFound)

	ok, err = e.Txn(ctx, []kv.Cond{kv.IfValue(b("none"), nil)}, []kv.Op{kv.Put(b("z"), b("1"))})
	require.NoError(t, err)
	assert.False(t, ok, "a value condition on a missing key fails (even for an empty value)")

	ok, err = e.Txn(ctx, []kv.Cond{kv.IfValue(b("x"), b("1")), kv.IfAbsent(b("z"))},
		[]kv.Op{kv.Put(b("x"), b("2")), kv.Delete(b("y")), kv.Put(b("z"), b("new"))})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []string{"x=2", "z=new"}, collect(t, e, kv.Range{}))

	ok, err = e.Txn(ctx, []kv.Cond{kv.IfAbsent(b("z"))}, []kv.Op{kv.Put(b("z"), b("again"))})
	require.NoError(t, err)
	assert.False(t, ok, "absent fails on a present key")

	ok, err = e.Txn(ctx, nil, []kv.Op{kv.Put(b("u"), b("1")), kv.Put(b("u"), b("2"))})
	require.NoError(t, err)
	assert.True(t, ok, "no conditions: always applies; a repeated key: the last write wins")
	v, _ = e.Get(ctx, b("u"))
	assert.Equal(t, "2", string(v))
}

func testTxnTooBig(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	max := e.MaxTxnOps()
	ops := make([]kv.Op, max+1)
	for i := range ops {
		ops[i] = kv.Put(fmt.Appendf(nil, "t/%05d", i), b("v"))
	}
	_, err := e.Txn(ctx, nil, ops)
	require.ErrorIs(t, err, kv.ErrTooBig)
	assert.Empty(t, collect(t, e, kv.Range{Prefix: b("t/")}), "a refused transaction writes nothing")
	ok, err := e.Txn(ctx, nil, ops[:max])
	require.NoError(t, err, "exactly the limit is taken")
	assert.True(t, ok)
	conds := make([]kv.Cond, max+1)
	for i := range conds {
		conds[i] = kv.IfAbsent(fmt.Appendf(nil, "c/%05d", i))
	}
	_, err = e.Txn(ctx, conds, ops[:1])
	require.ErrorIs(t, err, kv.ErrTooBig)
}

// engines returns the engines racers use: two when the engine is shared
// (two daemons), else one.
func engines(t *testing.T, h Harness) []kv.Store {
	e := open(t, h)
	if e.Shared() {
		return []kv.Store{e, open(t, h)}
	}
	return []kv.Store{e}
}

func testTxnRacers(t *testing.T, h Harness) {
	ctx := context.Background()
	es := engines(t, h)
	const racers, rounds = 16, 8
	for round := range rounds {
		key := fmt.Appendf(nil, "v/%d", round)
		require.NoError(t, es[0].Write(ctx, []kv.Op{kv.Put(key, b("base"))}))
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				me := fmt.Appendf(nil, "racer-%d", i)
				ok, err := es[i%len(es)].Txn(ctx, []kv.Cond{kv.IfValue(key, b("base"))}, []kv.Op{kv.Put(key, me)})
				assert.NoError(t, err)
				if ok {
					wins.Add(1)
					winner.Store(string(me))
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "exactly one racer replaces version %d", round)
		v, err := es[len(es)-1].Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, winner.Load(), string(v), "the stored value is the winner's")
	}
}

func testCounter(t *testing.T, h Harness) {
	ctx := context.Background()
	es := engines(t, h)
	const workers, each = 8, 10
	key := b("m/counter")
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			e := es[i%len(es)]
			for range each {
				for {
					cur, err := e.Get(ctx, key)
					var cond kv.Cond
					n := 0
					switch {
					case errors.Is(err, kv.ErrNotFound):
						cond = kv.IfAbsent(key)
					case err != nil:
						assert.NoError(t, err)
						return
					default:
						_, _ = fmt.Sscan(string(cur), &n)
						cond = kv.IfValue(key, cur)
					}
					ok, err := e.Txn(ctx, []kv.Cond{cond}, []kv.Op{kv.Put(key, fmt.Appendf(nil, "%d", n+1))})
					if !assert.NoError(t, err) {
						return
					}
					if ok {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	v, err := es[0].Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(workers*each), string(v), "read-then-CAS increments lose no update")
}

func testDurable(t *testing.T, h Harness) {
	ctx := context.Background()
	e := h.Open(t)
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put(b("d/1"), b("one")), kv.Put(b("d/2"), b("two"))}))
	ok, err := e.Txn(ctx, []kv.Cond{kv.IfAbsent(b("d/3"))}, []kv.Op{kv.Put(b("d/3"), b("three")), kv.Delete(b("d/1"))})
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, e.Sync(ctx))
	require.NoError(t, e.Close())
	_, err = e.Get(ctx, b("d/2"))
	require.ErrorIs(t, err, kv.ErrClosed, "a closed engine says so")
	require.ErrorIs(t, e.Write(ctx, []kv.Op{kv.Put(b("x"), b("y"))}), kv.ErrClosed)
	require.NoError(t, e.Close(), "closing twice is harmless")

	e = open(t, h)
	assert.Equal(t, []string{"d/2=two", "d/3=three"}, collect(t, e, kv.Range{Prefix: b("d/")}))
}

func testUnavailable(t *testing.T, h Harness) {
	ctx := context.Background()
	e := open(t, h)
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put(b("k"), b("v"))}))
	if h.Outage == nil {
		t.Log("the engine has no server to lose: a closed engine stands in")
		require.NoError(t, e.Close())
		_, err := e.Get(ctx, b("k"))
		require.ErrorIs(t, err, kv.ErrClosed)
		_, err = e.Txn(ctx, nil, []kv.Op{kv.Put(b("k"), b("w"))})
		require.ErrorIs(t, err, kv.ErrClosed)
		return
	}
	restore := h.Outage(t)
	_, err := e.Get(ctx, b("k"))
	require.ErrorIs(t, err, kv.ErrUnavailable)
	ok, err := e.Txn(ctx, []kv.Cond{kv.IfValue(b("k"), b("v"))}, []kv.Op{kv.Put(b("k"), b("w"))})
	require.ErrorIs(t, err, kv.ErrUnavailable)
	assert.False(t, ok)
	require.ErrorIs(t, e.Write(ctx, []kv.Op{kv.Put(b("k2"), b("v"))}), kv.ErrUnavailable)
	require.ErrorIs(t, e.Scan(ctx, kv.Range{}, func(kv.Pair) error { return nil }), kv.ErrUnavailable)
	restore()
	// The same engine recovers by itself. The first calls after a restart
	// may still see the old connection fail (the client reconnects), or
	// fail at once for a moment after the last failure.
	var v []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if v, err = e.Get(ctx, b("k")); !errors.Is(err, kv.ErrUnavailable) {
			break
		}
	}
	require.NoError(t, err)
	assert.Equal(t, "v", string(v), "the refused transaction wrote nothing")
	ok, err = e.Txn(ctx, []kv.Cond{kv.IfValue(b("k"), b("v"))}, []kv.Op{kv.Put(b("k"), b("w"))})
	require.NoError(t, err)
	assert.True(t, ok)
}
