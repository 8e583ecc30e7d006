package local

import "bytes"

// bytesIndexNUL is the length of an inotify event's NUL-padded name.
func bytesIndexNUL(b []byte) int {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return i
	}
	return len(b)
}
