// Package etcdkv is the shared kv.Store: the records live in etcd under a
// key prefix, so every daemon that names the same etcd cluster and prefix
// sees the same sessions, observations, claims and audit log. It speaks
// the etcd v3 client API only (go.etcd.io/etcd/client/v3) and assumes
// nothing of the server beyond its defaults: transactions of at most
// MaxTxnOps operations (128 unless the server was started with another
// --max-txn-ops) and requests of at most 1.5 MiB.
//
// Every call is bounded by Config.OpTimeout. Any failure to reach the
// cluster (stopped, partitioned, slow, refused credentials) is an error
// wrapping kv.ErrUnavailable, and so are the calls of the next
// Config.RetryAfter, at once; the client reconnects by itself, so a call
// after etcd is back (and RetryAfter has passed) succeeds.
package etcdkv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// Defaults of Config.
const (
	DefaultDialTimeout = 5 * time.Second
	// DefaultOpTimeout leaves a request that waited for an unreachable
	// cluster a second to answer within 3 s.
	DefaultOpTimeout = 2 * time.Second
	// DefaultRetryAfter is Config.RetryAfter's default.
	DefaultRetryAfter = time.Second
	// DefaultMaxTxnOps is etcd's default --max-txn-ops.
	DefaultMaxTxnOps = 128
	// DefaultMaxTxnBytes keeps one request well under etcd's default
	// --max-request-bytes (1.5 MiB).
	DefaultMaxTxnBytes = 1 << 20
	// scanPage is how many keys one range request of a Scan reads.
	scanPage = 512
)

// Config names the cluster and how to reach it.
type Config struct {
	// Endpoints are the client URLs or host:port pairs of the cluster.
	Endpoints []string
	// Prefix is prepended to every key ("/dshmount/team-a/"): one etcd
	// can hold several workspaces.
	Prefix string
	// TLS, when set, is used for every connection.
	TLS *tls.Config
	// Username and Password authenticate when Username is set.
	Username, Password string
	// DialTimeout bounds Open's first contact (default 5 s).
	DialTimeout time.Duration
	// OpTimeout bounds every call (default 2 s).
	OpTimeout time.Duration
	// RetryAfter is how long after a call found the cluster unreachable
	// further calls fail at once instead of waiting OpTimeout each (default
	// 1 s): a request that needs several calls waits for a cluster that is
	// down once, not once per call.
	RetryAfter time.Duration
	// MaxTxnOps is the server's --max-txn-ops (default 128).
	MaxTxnOps int
	// MaxTxnBytes bounds the bytes of one chunk of Write (default 1 MiB).
	MaxTxnBytes int
}

// Store is a kv.Store on etcd.
type Store struct {
	cli    *clientv3.Client
	kv     clientv3.KV
	watch  clientv3.Watcher
	cfg    Config
	closed atomic.Bool
	down   atomic.Pointer[outage] // the last failure to reach the cluster
}

// outage is a failure to reach the cluster, and until when calls fail at
// once because of it.
type outage struct {
	at, until time.Time
	err       error
}

var (
	_ kv.Store   = (*Store)(nil)
	_ kv.Watcher = (*Store)(nil)
)

// Open connects to the cluster and checks that it answers (a failure wraps
// kv.ErrUnavailable).
func Open(ctx context.Context, c Config) (*Store, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.MaxTxnBytes <= 0 {
		c.MaxTxnBytes = DefaultMaxTxnBytes
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		TLS:         c.TLS,
		Username:    c.Username,
		Password:    c.Password,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
		// Reconnect within a second of the cluster's return (gRPC's
		// default backoff grows to minutes).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %s: %w: %w", strings.Join(c.Endpoints, ","), kv.ErrUnavailable, err)
	}
	e := &Store{cli: cli, kv: namespace.NewKV(cli.KV, c.Prefix), watch: namespace.NewWatcher(cli.Watcher, c.Prefix), cfg: c}
	cctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	if _, err := e.kv.Get(cctx, "m/", clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("reach etcd %s: %w: %w", strings.Join(c.Endpoints, ","), kv.ErrUnavailable, err)
	}
	return e, nil
}

// Client returns the etcd client (for watches and leases of a caller that
// needs more than kv.Store).
func (e *Store) Client() *clientv3.Client { return e.cli }

// op bounds a call by OpTimeout. Within RetryAfter of a failure to reach
// the cluster it fails at once with that failure.
func (e *Store) op(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if e.closed.Load() {
		return nil, nil, kv.ErrClosed
	}
	if o := e.down.Load(); o != nil && time.Now().Before(o.until) {
		return nil, nil, fmt.Errorf("%w (%v ago; not asked again for %v)", o.err,
			time.Since(o.at).Round(time.Millisecond), e.cfg.RetryAfter)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.OpTimeout)
	return ctx, cancel, nil
}

// wrap classifies an etcd client error: too many operations is
// kv.ErrTooBig, a closed client kv.ErrClosed, everything else (no leader,
// deadline, connection refused, auth) kv.ErrUnavailable, which also makes
// the calls of the next RetryAfter fail at once (see op).
func (e *Store) wrap(op string, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrGRPCTooManyOps),
		errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		return fmt.Errorf("etcd %s: %w: %w", op, kv.ErrTooBig, err)
	case e.closed.Load():
		return fmt.Errorf("etcd %s: %w: %w", op, kv.ErrClosed, err)
	}
	err = fmt.Errorf("etcd %s at %s: %w: %w", op, strings.Join(e.cfg.Endpoints, ","), kv.ErrUnavailable, err)
	if !errors.Is(err, context.Canceled) { // the caller gave up, not the cluster
		now := time.Now()
		e.down.Store(&outage{at: now, until: now.Add(e.cfg.RetryAfter), err: err})
	}
	return err
}

// Get implements kv.Store.
func (e *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	ctx, cancel, err := e.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := e.kv.Get(ctx, string(key))
	if err != nil {
		return nil, e.wrap("get", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("get %q: %w", key, kv.ErrNotFound)
	}
	return resp.Kvs[0].Value, nil
}

// Scan implements kv.Store: pages of range requests, all at the revision
// of the first page.
func (e *Store) Scan(ctx context.Context, r kv.Range, fn func(kv.Pair) error) error {
	end := kv.PrefixEnd(r.Prefix)
	from, upto := r.Prefix, end // [from, upto); upto nil: to the end
	if !r.Reverse && bytes.Compare(r.Start, from) > 0 {
		from = r.Start
	}
	if r.Reverse && r.Start != nil && (end == nil || bytes.Compare(r.Start, end) < 0) {
		upto = append(bytes.Clone(r.Start), 0)
	}
	var rev int64
	n := 0
	for {
		page := scanPage
		if r.Limit > 0 {
			page = min(page, r.Limit-n)
			if page <= 0 {
				return nil
			}
		}
		opts := []clientv3.OpOption{clientv3.WithLimit(int64(page))}
		if upto == nil {
			opts = append(opts, clientv3.WithFromKey())
		} else {
			opts = append(opts, clientv3.WithRange(string(upto)))
		}
		if r.Reverse {
			opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		key := string(from)
		if key == "" {
			key = "\x00" // the whole namespace: from its first key
		}
		cctx, cancel, err := e.op(ctx)
		if err != nil {
			return err
		}
		resp, err := e.kv.Get(cctx, key, opts...)
		cancel()
		if err != nil {
			return e.wrap("scan", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, p := range resp.Kvs {
			n++
			if err := fn(kv.Pair{Key: p.Key, Value: p.Value}); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		last := resp.Kvs[len(resp.Kvs)-1].Key
		if r.Reverse {
			upto = last
		} else {
			from = append(bytes.Clone(last), 0)
		}
	}
}

func toOp(op kv.Op) clientv3.Op {
	if op.Delete {
		return clientv3.OpDelete(string(op.Key))
	}
	return clientv3.OpPut(string(op.Key), string(op.Value))
}

// Write implements kv.Store: one etcd transaction per chunk of at most
// MaxTxnOps writes and MaxTxnBytes bytes.
func (e *Store) Write(ctx context.Context, ops []kv.Op) error {
	ops = kv.Dedupe(ops)
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < e.cfg.MaxTxnOps {
			sz := len(ops[n].Key) + len(ops[n].Value) + 16
			if n > 0 && size+sz > e.cfg.MaxTxnBytes {
				break
			}
			size += sz
			n++
		}
		then := make([]clientv3.Op, n)
		for i := range n {
			then[i] = toOp(ops[i])
		}
		cctx, cancel, err := e.op(ctx)
		if err != nil {
			return err
		}
		_, err = e.kv.Txn(cctx).Then(then...).Commit()
		cancel()
		if err != nil {
			return e.wrap(fmt.Sprintf("write %d records", n), err)
		}
		ops = ops[n:]
	}
	return nil
}

// Txn implements kv.Store with one etcd transaction: If(conds).Then(ops).
func (e *Store) Txn(ctx context.Context, conds []kv.Cond, ops []kv.Op) (bool, error) {
	if len(conds) > e.cfg.MaxTxnOps || len(ops) > e.cfg.MaxTxnOps {
		return false, fmt.Errorf("txn of %d conditions and %d writes (at most %d each): %w", len(conds), len(ops), e.cfg.MaxTxnOps, kv.ErrTooBig)
	}
	ctx, cancel, err := e.op(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	cmps := make([]clientv3.Cmp, len(conds))
	for i, c := range conds {
		if c.Absent {
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(string(c.Key)), "=", 0)
		} else {
			cmps[i] = clientv3.Compare(clientv3.Value(string(c.Key)), "=", string(c.Value))
		}
	}
	ops = kv.Dedupe(ops)
	then := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		then[i] = toOp(op)
	}
	resp, err := e.kv.Txn(ctx).If(cmps...).Then(then...).Commit()
	if err != nil {
		return false, e.wrap("txn", err)
	}
	return resp.Succeeded, nil
}

// WatchPuts implements kv.Watcher with an etcd watch from the revision
// current when it starts; after an interruption (no leader, a restarted
// member) it watches again from the revision after the last it delivered.
// A compacted revision ends it with kv.ErrUnavailable.
func (e *Store) WatchPuts(ctx context.Context, prefix []byte, fn func(kv.Pair)) error {
	cctx, cancel, err := e.op(ctx)
	if err != nil {
		return err
	}
	resp, err := e.kv.Get(cctx, string(prefix), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return e.wrap("watch", err)
	}
	next := resp.Header.Revision + 1
	for {
		wctx, stop := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := e.watch.Watch(wctx, string(prefix), clientv3.WithPrefix(), clientv3.WithRev(next))
		var werr error
		for wr := range wch {
			if werr = wr.Err(); werr != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					fn(kv.Pair{Key: ev.Kv.Key, Value: ev.Kv.Value})
				}
				next = ev.Kv.ModRevision + 1
			}
		}
		stop()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(werr, rpctypes.ErrCompacted):
			return e.wrap("watch", werr)
		case e.closed.Load():
			return kv.ErrClosed
		}
		select { // no leader or a broken stream: watch again shortly
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MaxTxnOps implements kv.Store.
func (e *Store) MaxTxnOps() int { return e.cfg.MaxTxnOps }

// Sync implements kv.Store: etcd acknowledges a write once a quorum has it
// on disk, so there is nothing left to do.
func (e *Store) Sync(context.Context) error {
	if e.closed.Load() {
		return kv.ErrClosed
	}
	return nil
}

// Shared implements kv.Store: every daemon with the same cluster and
// prefix sees these records.
func (e *Store) Shared() bool { return true }

// Close implements kv.Store.
func (e *Store) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	if err := e.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}

// Scheme is the store URL scheme of etcd:
// etcd://HOST:PORT[,HOST:PORT…][/PREFIX].
const Scheme = "etcd"

// DefaultPrefix is the key prefix of a URL without a path.
const DefaultPrefix = "/dshmount/"

// Register adds the etcd://HOST:PORT[,HOST:PORT…][/PREFIX] scheme to r;
// every engine it opens takes base's credentials, TLS and timeouts, with the
// URL's endpoints and prefix.
func Register(r *kv.Registry, base Config) {
	r.Register(Scheme, func(ctx context.Context, rest string) (kv.Store, error) {
		c := base
		var err error
		if c.Endpoints, c.Prefix, err = ParseURL(rest); err != nil {
			return nil, err
		}
		return Open(ctx, c)
	}, func(rest string) error { _, _, err := ParseURL(rest); return err })
}

// ParseURL splits an etcd URL's rest (what follows "etcd://") into its
// endpoints and its key prefix ("/P/", DefaultPrefix when there is no path).
func ParseURL(rest string) (endpoints []string, prefix string, err error) {
	hosts, prefix, _ := strings.Cut(rest, "/")
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return nil, "", fmt.Errorf("%w: %q is not HOST:PORT; want etcd://HOST:PORT[,HOST:PORT…]/PREFIX", kv.ErrBadURL, h)
		}
		endpoints = append(endpoints, h)
	}
	prefix = "/" + strings.Trim(prefix, "/") + "/"
	if prefix == "//" {
		prefix = DefaultPrefix
	}
	return endpoints, prefix, nil
}
