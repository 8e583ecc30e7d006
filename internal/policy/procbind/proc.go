package procbind

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// procInfo is what the registry needs to know about one task.
type procInfo struct {
	PPID  int    // parent process id (of the thread group)
	TGID  int    // thread group id: the process a thread belongs to
	Start uint64 // start time in clock ticks since boot (stat field 22)
}

// procReader reads task information; the real one reads /proc, tests use a
// fake to simulate pid reuse.
type procReader interface {
	// Info returns the task's parent, thread group and start time; an error
	// wrapping os.ErrNotExist when the task does not exist.
	Info(pid int) (procInfo, error)
}

// errNoProcess reports a task that does not exist (any more).
var errNoProcess = errors.New("no such process")

// procFS reads /proc/PID/stat and /proc/PID/status.
type procFS struct{ root string }

// Info implements procReader. pid may be a thread id, as FUSE reports the
// calling thread.
func (p procFS) Info(pid int) (procInfo, error) {
	if pid <= 0 {
		return procInfo{}, fmt.Errorf("pid %d: %w", pid, errNoProcess)
	}
	dir := p.root + "/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return procInfo{}, fmt.Errorf("pid %d: %w", pid, errNoProcess)
		}
		return procInfo{}, fmt.Errorf("read %s/stat: %w", dir, err)
	}
	info, err := parseStat(stat)
	if err != nil {
		return procInfo{}, fmt.Errorf("parse %s/stat: %w", dir, err)
	}
	info.TGID = pid
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return procInfo{}, fmt.Errorf("pid %d: %w", pid, errNoProcess)
		}
		return procInfo{}, fmt.Errorf("read %s/status: %w", dir, err)
	}
	if tgid, ok := statusField(status, "Tgid:"); ok {
		info.TGID = tgid
	}
	return info, nil
}

// parseStat extracts ppid (field 4) and starttime (field 22) from the
// contents of /proc/PID/stat. The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(b []byte) (procInfo, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procInfo{}, errors.New("no command name")
	}
	fields := bytes.Fields(b[end+1:])
	// fields[0] is field 3 (state): field N is fields[N-3].
	if len(fields) < 20 {
		return procInfo{}, fmt.Errorf("only %d fields after the command name", len(fields))
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return procInfo{}, fmt.Errorf("ppid %q: %w", fields[1], err)
	}
	start, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("starttime %q: %w", fields[19], err)
	}
	return procInfo{PPID: ppid, Start: start}, nil
}

// statusField returns the integer value of a "Name:\tvalue" line of
// /proc/PID/status.
func statusField(b []byte, name string) (int, bool) {
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok {
			continue
		}
		v, err := strconv.Atoi(string(bytes.TrimSpace(rest)))
		return v, err == nil
	}
	return 0, false
}
