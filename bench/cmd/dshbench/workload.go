package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// fsConfig is the workload set of one `dshbench fs` run.
type fsConfig struct {
	Dir      string
	Target   string
	Reps     int
	SeqMiB   int
	RandTime time.Duration
	Files    int
	Tar      string // tar of the Go source tree; "" skips the tree workloads
}

// runFS is `dshbench fs`: every file-system workload in a directory, each
// repeated, as a JSON report on stdout.
func runFS(args []string) error {
	var c fsConfig
	f := flag.NewFlagSet("fs", flag.ContinueOnError)
	f.StringVar(&c.Dir, "dir", "", "directory to work in (must exist)")
	f.StringVar(&c.Target, "target", "", "name of the target, for the report")
	f.IntVar(&c.Reps, "reps", 3, "repetitions of every workload")
	f.IntVar(&c.SeqMiB, "seq-mib", 1024, "size of the sequential file in MiB")
	f.DurationVar(&c.RandTime, "rand-time", 5*time.Second, "duration of the 4 KiB random-read run")
	f.IntVar(&c.Files, "files", 10000, "number of small files")
	f.StringVar(&c.Tar, "tar", "", "tar of the Go source tree (src/...)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if c.Dir == "" {
		return fmt.Errorf("fs: --dir is required")
	}
	r := &Report{Target: c.Target, Dir: c.Dir}
	steps := []func(*fsConfig, *Report, int) error{seqWorkload, smallFilesWorkload, treeWorkload}
	for rep := range c.Reps {
		for _, step := range steps {
			if err := step(&c, r, rep); err != nil {
				return err
			}
		}
	}
	return r.write(os.Stdout)
}

// dropCaches asks the kernel to drop clean page-cache pages; it reports
// whether it could.
func dropCaches() bool {
	syncAll()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0) == nil
}

// syncAll flushes dirty data so a previous workload's writeback does not
// land in the next one's time.
func syncAll() { _ = exec.Command("sync").Run() }

// seqWorkload writes a file of SeqMiB MiB in 1 MiB blocks with a final
// fsync, reads it back cold, then reads 4 KiB blocks at random offsets.
func seqWorkload(c *fsConfig, r *Report, rep int) error {
	p := filepath.Join(c.Dir, fmt.Sprintf("seq-%d.bin", rep))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + rep)
	}
	syncAll()
	start := time.Now()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("seq write: %w", err)
	}
	for range c.SeqMiB {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("seq write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("seq write fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("seq write close: %w", err)
	}
	mib := float64(c.SeqMiB)
	r.add("seq_write_1MiB_blocks", "MiB/s", true, mib/time.Since(start).Seconds())

	if dropCaches() {
		r.note("sequential read: page cache dropped before each read (/proc/sys/vm/drop_caches)")
	} else {
		r.note("sequential read: /proc/sys/vm/drop_caches not writable; reads may be served from the page cache")
	}
	start = time.Now()
	f, err = os.Open(p)
	if err != nil {
		return fmt.Errorf("seq read: %w", err)
	}
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("seq read: %w", err)
		}
	}
	r.add("seq_read_1MiB_blocks", "MiB/s", true, mib/time.Since(start).Seconds())

	// Random reads on the file just read (warm: its pages are cached).
	blocks := int64(c.SeqMiB) * 256
	rng := rand.New(rand.NewPCG(uint64(rep), 42))
	small := buf[:4096]
	n := 0
	start = time.Now()
	for time.Since(start) < c.RandTime {
		for range 256 {
			if _, err := f.ReadAt(small, rng.Int64N(blocks)*4096); err != nil {
				f.Close()
				return fmt.Errorf("random read: %w", err)
			}
			n++
		}
	}
	r.add("rand_read_4KiB", "reads/s", true, float64(n)/time.Since(start).Seconds())
	r.note("random reads: 4 KiB preads at random aligned offsets of the sequential file, page cache warm")
	f.Close()
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("seq cleanup: %w", err)
	}
	return nil
}

// timed runs fn and records its duration in seconds under name.
func timed(r *Report, name string, fn func() error) error {
	start := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.add(name, "s", false, time.Since(start).Seconds())
	return nil
}

// smallFilesWorkload creates, stats, reads, lists and deletes Files files
// of 4 KiB in one directory.
func smallFilesWorkload(c *fsConfig, r *Report, rep int) error {
	dir := filepath.Join(c.Dir, fmt.Sprintf("small-%d", rep))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("small files: %w", err)
	}
	data := bytes.Repeat([]byte("x"), 4096)
	names := make([]string, c.Files)
	for i := range names {
		names[i] = filepath.Join(dir, "f"+strconv.Itoa(i))
	}
	syncAll()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"files_create_10k", func() error {
			for _, p := range names {
				if err := os.WriteFile(p, data, 0o644); err != nil {
					return err
				}
			}
			return nil
		}},
		{"files_stat_10k", func() error {
			for _, p := range names {
				if _, err := os.Lstat(p); err != nil {
					return err
				}
			}
			return nil
		}},
		{"files_stat_cold_10k", func() error {
			// The kernel's names and attributes dropped: every stat is
			// a lookup (on a mount, a request to the daemon).
			if !dropCaches() {
				r.note("cold stat: /proc/sys/vm/drop_caches not writable; names may still be cached")
			}
			for _, p := range names {
				if _, err := os.Lstat(p); err != nil {
					return err
				}
			}
			return nil
		}},
		{"files_read_10k", func() error {
			for _, p := range names {
				if _, err := os.ReadFile(p); err != nil {
					return err
				}
			}
			return nil
		}},
		{"files_readdir_10k", func() error {
			ents, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			if len(ents) != len(names) {
				return fmt.Errorf("listed %d entries, want %d", len(ents), len(names))
			}
			return nil
		}},
		{"files_delete_10k", func() error {
			for _, p := range names {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := timed(r, s.name, s.fn); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// run runs a command in dir, its output discarded unless it fails.
func run(dir string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w: %s", name, args, err, bytes.TrimSpace(out))
	}
	return nil
}

// treeWorkload extracts the Go source tree, walks it, commits it to git and
// asks git for its status.
func treeWorkload(c *fsConfig, r *Report, rep int) error {
	if c.Tar == "" {
		return nil
	}
	dir := filepath.Join(c.Dir, fmt.Sprintf("tree-%d", rep))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("tree: %w", err)
	}
	src := filepath.Join(dir, "src")
	syncAll()
	if err := timed(r, "gosrc_tar_x", func() error { return run(dir, "tar", "-xf", c.Tar) }); err != nil {
		return err
	}
	if err := run(src, "sh", "-c", "find . | wc -l"); err != nil { // warm-up
		return err
	}
	if err := timed(r, "gosrc_find_warm", func() error { return run(src, "sh", "-c", "find . | wc -l") }); err != nil {
		return err
	}
	// No background `git gc --auto`: it would outlive the timed command.
	if err := run(src, "sh", "-c", "git init -q && git config gc.auto 0 && git config maintenance.auto false"); err != nil {
		return err
	}
	syncAll()
	if err := timed(r, "gosrc_git_add_commit", func() error {
		return run(src, "sh", "-c", "git add -A && git commit -q -m bench")
	}); err != nil {
		return err
	}
	if err := timed(r, "gosrc_git_status", func() error { return run(src, "git", "status", "--porcelain") }); err != nil {
		return err
	}
	start := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("tree cleanup: %w", err)
	}
	r.add("gosrc_rm_rf", "s", false, time.Since(start).Seconds())
	return nil
}
