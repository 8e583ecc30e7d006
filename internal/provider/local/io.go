package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// fstat stats an open descriptor.
func fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := retryEINTR0(func() error { return unix.Fstat(int(f.Fd()), &st) })
	if err != nil {
		return st, pathErr("fstat", f.Name(), err)
	}
	return st, nil
}
