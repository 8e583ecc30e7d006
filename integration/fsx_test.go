package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/integration/fsx"
	"github.com/dshmount/dshmount/internal/provider"
)

// Integrity under random operations (issue 10, item 2): the fsx exerciser
// runs through the mount, with and without passthrough, and mixed with
// socket writes and guarded edits; every read is compared with the model.
//
// DSH_FSX_OPS sets the total number of operations over the three runs
// (default 100000); DSH_FSX_SEED replays a run.

// fsxRuns splits the total operation count over the runs.
var fsxRuns = []struct {
	name   string
	share  int // percent of DSH_FSX_OPS
	args   []string
	remote bool
}{
	{name: "Passthrough", share: 40},
	{name: "DaemonReadWrite", share: 30, args: []string{"--passthrough=false"}},
	{name: "MixedWithSocketEdits", share: 30, remote: true},
}

func TestFSX_RandomOperationsMatchTheModel(t *testing.T) {
	requireFUSE(t)
	total := envInt(t, "DSH_FSX_OPS", 100000)
	seed := fsxSeed(t)
	done, ran := 0, 0
	for _, run := range fsxRuns {
		t.Run(run.name, func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Args: run.args})
			cfg := fsx.Config{
				Dir:     d.m("fsx"),
				Backing: filepath.Join(d.Src, "fsx"),
				Seed:    seed,
				Ops:     total * run.share / 100,
				Mmap:    true,
			}
			remote := &socketRemote{c: d.Client, prefix: "fsx"}
			if run.remote {
				cfg.Remote = remote
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := fsx.Run(ctx, cfg)
			require.NoError(t, err, "seed %d; daemon log:\n%s", seed, lastLines(d.log(), 40))
			fmt.Println(res.String())
			t.Logf("%s (seed %d)", res, seed)
			assert.Equal(t, cfg.Ops, res.Ops)
			assert.Empty(t, res.MmapUnsupported, "mmap reads must work on the mount")
			assert.Empty(t, res.Unsupported, "every operation must work on the mount")
			if run.remote {
				assert.Positive(t, res.Counts["remotemutate"])
				assert.Positive(t, res.RemoteWrites, "the concurrent socket writer made progress")
				t.Logf("guarded socket edits retried %d times after a release record of the mount moved the version", remote.retries.Load())
			}
			done += res.Ops
			ran++
		})
	}
	if ran == len(fsxRuns) {
		assert.GreaterOrEqual(t, done, total*99/100, "operations over all runs")
	}
}

// socketRemote applies fsx's remote mutations through the control socket:
// writes unconditionally, edits guarded by the version a stat just read.
//
// The mount records a passthrough handle opened for writing when the kernel
// releases it, which happens after close(2) has returned; a guarded edit
// right after the worker closed the file can therefore meet a version moved
// by that record (FS_STALE_VERSION, "by a write through the mount") although
// the bytes are unchanged. The edit then stats again and retries, a bounded
// number of times, and counts it.
type socketRemote struct {
	c       *control.Client
	prefix  string
	retries atomic.Int64
}

func (r *socketRemote) Write(ctx context.Context, rel, content string) error {
	_, err := r.c.Write(ctx, control.WriteParams{Path: path.Join(r.prefix, rel), Content: content, Unconditional: true})
	return err
}

func (r *socketRemote) Edit(ctx context.Context, rel, old, new string) error {
	p := path.Join(r.prefix, rel)
	for attempt := 0; ; attempt++ {
		st, err := r.c.Stat(ctx, control.StatParams{Path: p})
		if err != nil {
			return fmt.Errorf("stat before edit: %w", err)
		}
		_, err = r.c.Edit(ctx, control.EditParams{Path: p, OldString: old, NewString: new,
			Expected: &control.VersionExpected{Version: st.Version}})
		if err == nil || attempt == 20 || !errors.Is(err, provider.ErrStaleVersion) || !strings.Contains(err.Error(), "mount") {
			return err
		}
		r.retries.Add(1)
	}
}

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	require.NoError(t, err, "%s must be an integer", name)
	require.Positive(t, v, "%s must be positive", name)
	return v
}

// fsxSeed is DSH_FSX_SEED, or a new seed; it is logged for a replay.
func fsxSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DSH_FSX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "DSH_FSX_SEED must be an unsigned integer")
		seed = v
	}
	t.Logf("fsx seed %d (replay with DSH_FSX_SEED=%d)", seed, seed)
	return seed
}
