package fsx

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"golang.org/x/sys/unix"
)

// support records the operation kinds the file system turned out not to
// support (mmap's ENODEV, fallocate's EOPNOTSUPP, copy_file_range's EXDEV):
// the first such answer disables the kind for every worker, with the
// reason, and the run goes on without it.
type support struct {
	mu  sync.Mutex
	off map[string]string // kind → why it was disabled
}

// enabled reports whether kind still runs.
func (s *support) enabled(kind string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, off := s.off[kind]
	return !off
}

// disable turns kind off for the rest of the run; the first reason stays.
func (s *support) disable(kind, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, off := s.off[kind]; !off {
		s.off[kind] = reason
	}
}

// reasons returns kind → reason for every disabled kind.
func (s *support) reasons() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.off)
}

// unsupported reports whether err is one of the errnos that say the file
// system does not implement kind; if so the kind is disabled.
func (w *worker) unsupported(kind, what string, err error, errnos ...unix.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) {
			w.sup.disable(kind, fmt.Sprintf("%s: %v", what, err))
			return true
		}
	}
	return false
}
