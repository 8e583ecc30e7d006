package etcdkv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv/etcdtest"
	"github.com/dshmount/dshmount/internal/policy/kv/kvtest"
)

// One embedded etcd (default limits: 128 operations a transaction) serves
// every subtest; each gets its own key prefix.
func TestConformance(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	kvtest.Run(t, func(t *testing.T) kvtest.Harness {
		cfg := etcdkv.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/dsh/" + t.Name() + "/", OpTimeout: time.Second}
		return kvtest.Harness{
			Open: func(t *testing.T) kv.Store {
				e, err := etcdkv.Open(context.Background(), cfg)
				require.NoError(t, err)
				return e
			},
			Outage: func(t *testing.T) func() {
				srv.Stop()
				return func() { require.NoError(t, srv.Restart()) }
			},
		}
	})
}

func TestOpen_UnreachableIsUnavailable(t *testing.T) {
	_, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond})
	require.ErrorIs(t, err, kv.ErrUnavailable)
}

func TestPrefix_SeparatesWorkspaces(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	open := func(prefix string) kv.Store {
		e, err := etcdkv.Open(ctx, etcdkv.Config{Endpoints: []string{srv.Endpoint()}, Prefix: prefix})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a, b := open("/ws/a/"), open("/ws/b/")
	require.NoError(t, a.Write(ctx, []kv.Op{kv.Put([]byte("k"), []byte("a"))}))
	_, err = b.Get(ctx, []byte("k"))
	require.ErrorIs(t, err, kv.ErrNotFound)
	n := 0
	require.NoError(t, b.Scan(ctx, kv.Range{}, func(kv.Pair) error { n++; return nil }))
	require.Zero(t, n, "a scan of everything stays inside the prefix")
}

// The server's limit is real and invisible to the client: an engine told a
// larger limit than the server's gets the server's refusal as ErrTooBig, and
// writes nothing.
func TestTxn_ServerLimitIsErrTooBig(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	e, err := etcdkv.Open(ctx, etcdkv.Config{Endpoints: []string{srv.Endpoint()}, MaxTxnOps: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ops := make([]kv.Op, 129)
	for i := range ops {
		ops[i] = kv.Put(fmt.Appendf(nil, "k/%03d", i), []byte("v"))
	}
	_, err = e.Txn(ctx, nil, ops)
	require.ErrorIs(t, err, kv.ErrTooBig)
	_, err = e.Get(ctx, []byte("k/000"))
	require.ErrorIs(t, err, kv.ErrNotFound)
	_, err = e.Txn(ctx, nil, ops[:128])
	require.NoError(t, err, "128 operations: the server's default limit")
}

// While the cluster is down a call waits OpTimeout once; the calls of the
// next RetryAfter fail at once with that failure, and a call after it asks
// the cluster again (and succeeds once it is back).
func TestOutage_LaterCallsFailAtOnceThenAskAgain(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	const opTimeout, retryAfter = 800 * time.Millisecond, 1500 * time.Millisecond
	e, err := etcdkv.Open(ctx, etcdkv.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/o/", OpTimeout: opTimeout, RetryAfter: retryAfter})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	require.NoError(t, e.Write(ctx, []kv.Op{kv.Put([]byte("k"), []byte("v"))}))

	srv.Stop()
	timed := func(call func() error) (time.Duration, error) {
		start := time.Now()
		err := call()
		return time.Since(start), err
	}
	get := func() error { _, err := e.Get(ctx, []byte("k")); return err }
	took, err := timed(get)
	require.ErrorIs(t, err, kv.ErrUnavailable)
	require.GreaterOrEqual(t, took, opTimeout/2, "the first call waits for the cluster")
	for _, call := range []func() error{get, func() error { return e.Write(ctx, []kv.Op{kv.Put([]byte("k"), []byte("w"))}) }} {
		took, err = timed(call)
		require.ErrorIs(t, err, kv.ErrUnavailable)
		require.Less(t, took, 100*time.Millisecond, "a call right after fails at once: %v", err)
		require.ErrorContains(t, err, "not asked again")
	}

	require.NoError(t, srv.Restart())
	time.Sleep(retryAfter)
	require.Eventually(t, func() bool { return get() == nil }, 20*time.Second, 50*time.Millisecond, "asked again, and back")
}
