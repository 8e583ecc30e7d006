package procbind

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Lifecycle is where a process stands between its start and its reaping, as
// far as the resources it holds (open files, locks, FUSE connections) go.
type Lifecycle int

const (
	// Gone: no such process, another process reusing the pid, or a zombie
	// whose threads have all exited (its files are closed).
	Gone Lifecycle = iota
	// Running: alive and not being killed.
	Running
	// Dying: killed (SIGKILL pending, or the thread-group leader already
	// exited) while some thread has not exited yet, typically because it is
	// blocked uninterruptibly in the kernel. It still holds its files.
	Dying
)

// String names the state for messages.
func (l Lifecycle) String() string {
	switch l {
	case Gone:
		return "gone"
	case Running:
		return "running"
	case Dying:
		return "dying"
	}
	return "Lifecycle(" + strconv.Itoa(int(l)) + ")"
}

// sigkillBit is SIGKILL's bit in the SigPnd/ShdPnd masks of /proc status.
const sigkillBit = 1 << (9 - 1)

// StartTime returns the start time of process pid in clock ticks since boot,
// which together with the pid identifies the process across pid reuse.
func StartTime(pid int) (uint64, error) {
	info, err := (procFS{root: "/proc"}).Info(pid)
	if err != nil {
		return 0, err
	}
	return info.Start, nil
}

// TaskStart returns the start time of task (thread or process) tid in
// clock ticks since boot, from one read of /proc/TID/stat: with the tid it
// identifies the task across tid reuse. It is on the path of every guarded
// FUSE request, so it reads into a stack buffer without allocating.
func TaskStart(tid int) (uint64, error) {
	if tid <= 0 {
		return 0, fmt.Errorf("tid %d: %w", tid, errNoProcess)
	}
	var pathBuf [32]byte
	path := strconv.AppendInt(append(pathBuf[:0], "/proc/"...), int64(tid), 10)
	path = append(path, "/stat"...)
	fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("start time of tid %d: %w", tid, err)
	}
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil {
		return 0, fmt.Errorf("start time of tid %d: %w", tid, err)
	}
	start, ok := statStart(buf[:max(n, 0)])
	if !ok {
		return 0, fmt.Errorf("start time of tid %d: malformed /proc/%d/stat", tid, tid)
	}
	return start, nil
}

// statStart is parseStat's start time (field 22) without allocating.
func statStart(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	b = b[i+1:]
	for field := 2; ; {
		b = bytes.TrimLeft(b, " ")
		field++
		end := bytes.IndexByte(b, ' ')
		if end < 0 {
			end = len(b)
		}
		if field == 22 {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(b[:end])), 10, 64)
			return v, err == nil
		}
		if end == len(b) {
			return 0, false
		}
		b = b[end:]
	}
}

// LifecycleOf reports where the process pid that started at start (see
// StartTime) stands.
func LifecycleOf(pid int, start uint64) (Lifecycle, error) {
	return lifecycleOf("/proc", pid, start)
}

// lifecycleOf is LifecycleOf on a /proc tree at root.
func lifecycleOf(root string, pid int, start uint64) (Lifecycle, error) {
	info, err := (procFS{root: root}).Info(pid)
	switch {
	case errors.Is(err, errNoProcess):
		return Gone, nil
	case err != nil:
		return Gone, err
	case info.Start != start:
		return Gone, nil
	}
	tasks, err := filepath.Glob(filepath.Join(root, strconv.Itoa(pid), "task", "*"))
	if err != nil {
		return Gone, fmt.Errorf("threads of pid %d: %w", pid, err)
	}
	live, killed := 0, false
	for _, task := range tasks {
		status, err := os.ReadFile(filepath.Join(task, "status"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		exited := taskExited(status)
		if !exited {
			live++
		}
		if hexField(status, "SigPnd:")&sigkillBit != 0 || hexField(status, "ShdPnd:")&sigkillBit != 0 {
			killed = true
		}
		if exited && filepath.Base(task) == strconv.Itoa(pid) {
			killed = true // the leader exited before its threads: a group exit
		}
	}
	switch {
	case live == 0:
		return Gone, nil
	case killed:
		return Dying, nil
	}
	return Running, nil
}

// taskExited reports whether a task's status says zombie or dead.
func taskExited(status []byte) bool {
	for line := range bytes.SplitSeq(status, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("State:")); ok {
			rest = bytes.TrimSpace(rest)
			return len(rest) > 0 && (rest[0] == 'Z' || rest[0] == 'X')
		}
	}
	return false
}

// hexField returns the hexadecimal value of a "Name:\tvalue" line of
// /proc/PID/status (0 when absent or malformed).
func hexField(b []byte, name string) uint64 {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 16, 64)
			if err != nil {
				return 0
			}
			return v
		}
	}
	return 0
}
