package service

import (
	"github.com/dshmount/dshmount/internal/provider"
)

// Read window defaults and caps.
const (
	DefaultReadLimit    = 2000      // lines per read
	DefaultReadMaxBytes = 256 << 10 // bytes of returned text per read
	// MaxReadMaxBytes caps the text one fs.read answer carries (maxBytes).
	MaxReadMaxBytes = 4 << 20
	// MaxReadLimit caps the lines one fs.read answer carries (limit). With
	// MaxReadMaxBytes it bounds what a read keeps: at most 4 MiB of text
	// in at most 1 Mi lines (24 bytes of bookkeeping each), whatever the
	// file's size.
	MaxReadLimit = 1 << 20
)

// readWindow checks fs.read's window parameters (nil: the default) and
// returns the window. Values below 1 are FS_INVALID_ARGUMENT; a window over
// the caps is FS_TOO_LARGE, pointing to offset and limit.
func readWindow(path string, offset, limit *int, maxBytes *int64) (provider.TextWindow, error) {
	w := provider.TextWindow{Offset: 1, Limit: DefaultReadLimit, MaxBytes: DefaultReadMaxBytes}
	if offset != nil {
		if *offset < 1 {
			return w, invalidParams("offset is the 1-based first line; it must be at least 1, not %d", *offset)
		}
		w.Offset = *offset
	}
	if limit != nil {
		if *limit < 1 {
			return w, invalidParams("limit is a number of lines; it must be at least 1, not %d", *limit)
		}
		w.Limit = *limit
	}
	if maxBytes != nil {
		if *maxBytes < 1 {
			return w, invalidParams("maxBytes must be at least 1, not %d", *maxBytes)
		}
		w.MaxBytes = *maxBytes
	}
	if w.Limit > MaxReadLimit || w.MaxBytes > MaxReadMaxBytes {
		return w, provider.NewError(provider.CodeTooLarge, "read", path, nil,
			"one read answers at most %d lines and %d bytes of text, not limit %d and maxBytes %d; "+
				"page through the file with offset and limit (offset %d limit %d, then offset %d)",
			MaxReadLimit, MaxReadMaxBytes, w.Limit, w.MaxBytes, w.Offset, DefaultReadLimit, w.Offset+DefaultReadLimit)
	}
	return w, nil
}
