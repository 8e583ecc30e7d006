package local

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
)

// errNUL and errInvalidUTF8 say why bytes are not text.
var (
	errNUL         = errors.New("is a NUL byte")
	errInvalidUTF8 = errors.New("starts an invalid UTF-8 sequence")
)

// checkText reports why data is not text, or nil. base is the file offset
// of data[0], for the message.
func checkText(data []byte, base int64) error {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return fmt.Errorf("byte %d %w", base+int64(i), errNUL)
	}
	if !utf8.Valid(data) {
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Errorf("byte %d %w", base+int64(i), errInvalidUTF8)
			}
			i += n
		}
	}
	return nil
}

// notText refuses a file that is binary or not UTF-8.
func notText(op, disp string, cause error) *provider.Error {
	return provider.NewError(provider.CodeNotText, op, disp, cause,
		"the file is binary or not UTF-8 text; it cannot be handled as text")
}

// ownedString returns the bytes of b as a string without copying. b must not
// be modified afterwards: callers hand over freshly read buffers only.
func ownedString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// basis is the bounded LF-normalized text of prior content, or nil when it is
// not text or larger than maxBytes.
func basis(data []byte, maxBytes int64) *string {
	if data == nil || int64(len(data)) > maxBytes || checkText(data, 0) != nil {
		return nil
	}
	s := eol.ToLF(ownedString(data))
	return &s
}
