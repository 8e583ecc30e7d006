package fsx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Run performs cfg.Ops random operations with cfg.Workers workers under
// cfg.Dir and checks every read against the model, then checks every file
// once more at the end (through Dir and through Backing). The first
// mismatch is returned as a *MismatchError; ctx bounds the run.
func Run(ctx context.Context, config Config) (Result, error) {
	cfg := config.withDefaults()
	var res Result
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return res, fmt.Errorf("creating %s: %w", cfg.Dir, err)
	}
	sup := &support{off: map[string]string{}}
	var shared *remoteSet
	if cfg.Remote != nil {
		shared = newRemoteSet(&cfg)
		for i := range shared.files {
			if err := shared.mutate(ctx, i); err != nil {
				return res, fmt.Errorf("creating the remote file set: %w", err)
			}
		}
	}
	workers := make([]*worker, cfg.Workers)
	for i := range workers {
		w, err := newWorker(ctx, &cfg, i, shared, sup)
		if err != nil {
			return res, err
		}
		workers[i] = w
	}

	stopRemote, remoteDone := make(chan struct{}), make(chan error, 1)
	if shared != nil {
		go func() { remoteDone <- shared.writeLoop(ctx, stopRemote, &res.RemoteWrites) }()
	} else {
		remoteDone <- nil
	}

	start := time.Now()
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		n := cfg.Ops / cfg.Workers
		if i < cfg.Ops%cfg.Workers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(n)
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	close(stopRemote)
	remoteErr := <-remoteDone

	res.Counts, res.Skipped = map[string]int{}, map[string]int{}
	for _, w := range workers {
		res.Ops += w.op
		for k, v := range w.counts {
			res.Counts[k] += v
		}
		for k, v := range w.skipped {
			res.Skipped[k] += v
		}
	}
	res.Unsupported = sup.reasons()
	res.MmapUnsupported = res.Unsupported["mmapread"]
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	if remoteErr != nil {
		return res, &MismatchError{Seed: cfg.Seed, Worker: -1, Detail: remoteErr.Error()}
	}
	return res, finalCheck(&cfg, workers, shared)
}

// writeLoop mutates random remote files until stop closes.
func (s *remoteSet) writeLoop(ctx context.Context, stop <-chan struct{}, count *int) error {
	r := rand.New(rand.NewPCG(s.cfg.Seed, 0))
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		if err := s.mutate(ctx, r.IntN(len(s.files))); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		*count++
	}
}

// finalCheck compares every worker file with its model through Dir and
// Backing, and checks that no other names exist.
func finalCheck(cfg *Config, workers []*worker, shared *remoteSet) error {
	roots := []string{cfg.Dir}
	if cfg.Backing != "" {
		roots = append(roots, cfg.Backing)
	}
	fail := func(format string, args ...any) error {
		return &MismatchError{Seed: cfg.Seed, Worker: -1, Detail: "final check: " + fmt.Sprintf(format, args...)}
	}
	for _, root := range roots {
		for _, w := range workers {
			var want []string
			for _, n := range w.names {
				m := w.model[n]
				p := filepath.Join(root, w.rel, n)
				got, err := os.ReadFile(p)
				switch {
				case !m.exists && !errors.Is(err, os.ErrNotExist):
					return fail("%s: the model says absent, got %d bytes, %v", p, len(got), err)
				case !m.exists:
					continue
				case err != nil:
					return fail("%s: %v", p, err)
				case !bytes.Equal(got, m.data):
					return fail("%s: %s\nlast operations of worker %d:\n%v", p, diff(got, m.data), w.id, w.log.snapshot())
				}
				want = append(want, n)
			}
			if err := sameNames(filepath.Join(root, w.rel), want); err != nil {
				return fail("%v", err)
			}
		}
		if shared == nil {
			continue
		}
		var want []string
		for i := range shared.files {
			p := filepath.Join(root, remoteRel(i))
			got, err := os.ReadFile(p)
			seq := shared.committedOf(i)
			if err != nil {
				return fail("%s: %v", p, err)
			}
			if wantC := remoteContent(cfg.Seed, i, seq); string(got) != wantC {
				return fail("%s (acknowledged version %d): %s", p, seq, diff(got, []byte(wantC)))
			}
			want = append(want, filepath.Base(p))
		}
		if err := sameNames(filepath.Join(root, "remote"), want); err != nil {
			return fail("%v", err)
		}
	}
	return nil
}

// sameNames checks that dir holds exactly the names in want (no temp files
// left behind, no lost files).
func sameNames(dir string, want []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	got := make([]string, 0, len(entries))
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s holds %q, want %q", dir, got, want)
	}
	return nil
}
