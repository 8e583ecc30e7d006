package fsx

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// remoteSet is the concurrent remote file set: a writer replaces Dir/remote/rN
// through the Remote again and again, each version numbered; workers read
// the files through the directory.
type remoteSet struct {
	cfg   *Config
	dir   string
	mu    sync.Mutex
	files []remoteFile
}

// remoteFile is the state of one remote file: every version up to
// committed is acknowledged; pending (≥ committed) may be visible already.
type remoteFile struct {
	committed, pending int
}

func newRemoteSet(cfg *Config) *remoteSet {
	return &remoteSet{cfg: cfg, dir: filepath.Join(cfg.Dir, "remote"), files: make([]remoteFile, cfg.RemoteFiles)}
}

func remoteRel(i int) string { return fmt.Sprintf("remote/r%d", i) }

// remoteContent is version seq of file i: a header naming it and a body
// whose length and bytes depend on both.
func remoteContent(seed uint64, i, seq int) string {
	r := rand.New(rand.NewPCG(seed^uint64(i)<<32, uint64(seq)))
	return fmt.Sprintf("remote %d seq %d\n", i, seq) + string(randomText(r, r.IntN(8192)))
}

// parseSeq reads the sequence number from a version's header.
func parseSeq(content string, i int) (int, bool) {
	header, _, ok := strings.Cut(content, "\n")
	if !ok {
		return 0, false
	}
	prefix := fmt.Sprintf("remote %d seq ", i)
	if !strings.HasPrefix(header, prefix) {
		return 0, false
	}
	n, err := strconv.Atoi(header[len(prefix):])
	return n, err == nil
}

// mutate publishes the next version of file i and marks it committed once
// acknowledged. Odd versions are written, even ones edited from the
// previous version.
func (s *remoteSet) mutate(ctx context.Context, i int) error {
	s.mu.Lock()
	prev := s.files[i].committed
	next := prev + 1
	s.files[i].pending = next
	s.mu.Unlock()
	content := remoteContent(s.cfg.Seed, i, next)
	var err error
	if prev == 0 || next%2 == 1 {
		err = s.cfg.Remote.Write(ctx, remoteRel(i), content)
	} else {
		err = s.cfg.Remote.Edit(ctx, remoteRel(i), remoteContent(s.cfg.Seed, i, prev), content)
	}
	if err != nil {
		return fmt.Errorf("remote version %d of %s: %w", next, remoteRel(i), err)
	}
	s.mu.Lock()
	s.files[i].committed = next
	s.mu.Unlock()
	return nil
}

// check reads file i through the directory and returns "" when it is one
// complete version between the one acknowledged before the read and the
// one pending after it, or what is wrong.
func (s *remoteSet) check(i int) string {
	s.mu.Lock()
	lo := s.files[i].committed
	s.mu.Unlock()
	got, err := os.ReadFile(filepath.Join(s.dir, fmt.Sprintf("r%d", i)))
	s.mu.Lock()
	hi := s.files[i].pending
	s.mu.Unlock()
	if err != nil {
		return fmt.Sprintf("reading %s (acknowledged version %d): %v", remoteRel(i), lo, err)
	}
	seq, ok := parseSeq(string(got), i)
	if !ok {
		return fmt.Sprintf("reading %s: not a version of it (acknowledged %d, pending %d): %s",
			remoteRel(i), lo, hi, diff(got, []byte(remoteContent(s.cfg.Seed, i, lo))))
	}
	if seq < lo || seq > hi {
		return fmt.Sprintf("reading %s: version %d, want %d..%d (an acknowledged remote change is not visible)",
			remoteRel(i), seq, lo, hi)
	}
	if want := remoteContent(s.cfg.Seed, i, seq); string(got) != want {
		return fmt.Sprintf("reading %s version %d: %s", remoteRel(i), seq, diff(got, []byte(want)))
	}
	return ""
}

// committed returns the acknowledged version of file i.
func (s *remoteSet) committedOf(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[i].committed
}
