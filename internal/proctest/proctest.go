// Package proctest lets tests wait for the real state of another process
// or of a FUSE connection instead of sleeping and assuming that a signal or
// a request has taken effect: SIGSTOP is asynchronous (a thread may still
// answer a request after kill(2) returned), and a program's system call on
// a mount may not have reached the daemon yet when a goroutine has started.
//
// It reads /proc/PID/task/*/stat and the kernel's fusectl filesystem
// (/sys/fs/fuse/connections), and knows nothing of dshmount.
package proctest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pollInterval is how often the waits below look again.
const pollInterval = 5 * time.Millisecond

// fusectlDir is where the fusectl filesystem lists FUSE connections, one
// directory per connection named by its device minor.
const fusectlDir = "/sys/fs/fuse/connections"

// fusectlMagic is FUSE_CTL_SUPER_MAGIC (linux/magic.h).
const fusectlMagic = 0x65735543

// ThreadStates returns the scheduler state letter (R, S, D, T, Z, …) of
// every thread of pid, keyed by thread id. A process that is gone has no
// threads: the map is empty.
func ThreadStates(pid int) (map[int]string, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil {
		return nil, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	states := make(map[int]string, len(tasks))
	for _, task := range tasks {
		tid, err := strconv.Atoi(filepath.Base(task))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(task, "stat"))
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("state of thread %d of pid %d: %w", tid, pid, err)
		}
		// "tid (comm) S …": comm may hold spaces and parentheses.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) == 0 {
			return nil, fmt.Errorf("state of thread %d of pid %d: malformed stat %q", tid, pid, s)
		}
		states[tid] = fields[0]
	}
	return states, nil
}

// FormatStates renders states as "tid:state" pairs in thread order, for
// failure messages.
func FormatStates(states map[int]string) string {
	tids := make([]int, 0, len(states))
	for tid := range states {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	parts := make([]string, len(tids))
	for i, tid := range tids {
		parts[i] = fmt.Sprintf("%d:%s", tid, states[tid])
	}
	return strings.Join(parts, " ")
}

// Stop sends SIGSTOP to pid and waits until every thread of it is stopped
// (state T), so none of them can still answer anything. It fails after
// timeout, or when the process is gone.
func Stop(pid int, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		states, err := ThreadStates(pid)
		if err != nil {
			return fmt.Errorf("stop pid %d: %w", pid, err)
		}
		if len(states) == 0 {
			return fmt.Errorf("stop pid %d: the process is gone", pid)
		}
		if allIn(states, "T") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stop pid %d: not every thread stopped within %v: %s", pid, timeout, FormatStates(states))
		}
		time.Sleep(pollInterval)
	}
}

// allIn reports whether every thread is in one of the given states.
func allIn(states map[int]string, allowed ...string) bool {
	for _, s := range states {
		ok := false
		for _, a := range allowed {
			ok = ok || s == a
		}
		if !ok {
			return false
		}
	}
	return true
}

// BlockedInKernel reports whether the live threads of pid are all blocked
// uninterruptibly (state D): what is left of a killed process that cannot
// exit. Exited threads not yet reaped (state Z) are ignored; a process with
// no D thread, or gone, is not blocked.
func BlockedInKernel(pid int) (bool, error) {
	states, err := ThreadStates(pid)
	if err != nil {
		return false, err
	}
	blocked := false
	for _, s := range states {
		switch s {
		case "D":
			blocked = true
		case "Z", "X":
		default:
			return false, nil
		}
	}
	return blocked, nil
}

// FuseWaiting returns how many requests of the FUSE connection of device
// ("major:minor", as in mountinfo) are waiting for the daemon's answer,
// mounting fusectl first when it is not (root only).
func FuseWaiting(device string) (int, error) {
	_, minor, ok := strings.Cut(device, ":")
	if !ok || minor == "" || strings.ContainsAny(minor, "/.") {
		return 0, fmt.Errorf("waiting requests: bad device %q", device)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(fusectlDir, &sfs); err != nil || sfs.Type != fusectlMagic {
		if err := syscall.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil {
			return 0, fmt.Errorf("waiting requests of %s: fusectl is not mounted on %s and mounting it failed: %w", device, fusectlDir, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(fusectlDir, minor, "waiting"))
	if err != nil {
		return 0, fmt.Errorf("waiting requests of %s: %w", device, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("waiting requests of %s: %w", device, err)
	}
	return n, nil
}

// Hang runs probe in a goroutine and returns once it is blocked in a
// request of the FUSE connection of device: the connection's count of
// waiting requests rose above its count before the probe. Use it on a
// connection whose daemon no longer answers (see Stop), with a probe no
// kernel cache can answer, such as a lookup of a name never used before.
// The probe's result arrives on the returned channel once it is released.
// Hang fails if the probe returns first (nothing hangs) or after timeout.
func Hang(device string, probe func() error, timeout time.Duration) (<-chan error, error) {
	base, err := FuseWaiting(device)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- probe() }()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-done:
			return nil, fmt.Errorf("the probe returned (%v) instead of waiting on FUSE connection %s: nothing hangs", err, device)
		default:
		}
		n, err := FuseWaiting(device)
		if err != nil {
			return done, err
		}
		if n > base {
			return done, nil
		}
		if time.Now().After(deadline) {
			return done, fmt.Errorf("the probe did not reach FUSE connection %s within %v (%d requests waiting, %d before)", device, timeout, n, base)
		}
		time.Sleep(pollInterval)
	}
}

// StatusBytes returns a "kB" field of /proc/PID/status (VmRSS, VmHWM…) in
// bytes.
func StatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s of pid %d: %w", field, pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in the status of pid %d", field, pid)
}
