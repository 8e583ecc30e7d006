// Package mountinfo reads the kernel's table of mounts
// (/proc/self/mountinfo, proc(5)): which mount is visible at a path and
// its filesystem type, with the table's octal escapes undone.
package mountinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Entry is one line of the table: the fields dshmount uses.
type Entry struct {
	Root       string // the path of the filesystem mounted at MountPoint
	MountPoint string
	Device     string // major:minor
	FSType     string // after the " - " separator ("fuse.dshmount", "cgroup2", …)
}

// Parse reads every entry of a mountinfo table in order.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if e, ok := parseLine(sc.Bytes()); ok {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// parseLine parses "id parent major:minor root mountpoint options
// [optional...] - fstype source superoptions".
func parseLine(line []byte) (Entry, bool) {
	pre, post, _ := bytes.Cut(line, []byte(" - "))
	f := bytes.Fields(pre)
	if len(f) < 5 {
		return Entry{}, false
	}
	e := Entry{Device: string(f[2]), Root: Unescape(string(f[3])), MountPoint: Unescape(string(f[4]))}
	if t := bytes.Fields(post); len(t) > 0 {
		e.FSType = string(t[0])
	}
	return e, true
}

// Find returns the visible mount at mountpoint (the last one listed on
// that path) from /proc/self/mountinfo, and false when nothing is mounted
// there.
func Find(mountpoint string) (Entry, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Entry{}, false, fmt.Errorf("mounts: %w", err)
	}
	defer f.Close()
	entries, err := Parse(f)
	if err != nil {
		return Entry{}, false, err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].MountPoint == mountpoint {
			return entries[i], true, nil
		}
	}
	return Entry{}, false, nil
}

// Unescape undoes the octal escapes (\040 for a space, \011, \012, \134)
// the kernel writes for path fields.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ErrDetachedLazily is wrapped by an unmount that found the mount busy
// (open files, working directories) and detached it lazily: its name is
// gone, and the processes still in it keep the old mount until they leave.
var ErrDetachedLazily = errors.New("the mount was busy and was detached lazily")
