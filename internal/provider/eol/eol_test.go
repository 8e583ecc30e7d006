package eol

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRoundTrip_TextIsLFInsideAndKeepsTheFileStyleOutside(t *testing.T) {
	tests := []struct {
		name   string
		stored string
		crlf   bool
		lf     string
	}{
		{"empty", "", false, ""},
		{"lf file", "a\nb\n", false, "a\nb\n"},
		{"crlf file", "a\r\nb\r\n", true, "a\nb\n"},
		{"crlf without final newline", "a\r\nb", true, "a\nb"},
		{"lone cr is not a line ending", "a\rb\n", false, "a\rb\n"},
		{"one crlf makes the file crlf", "a\r\nb\n", true, "a\nb\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.crlf, IsCRLF([]byte(tt.stored)))
			assert.Equal(t, tt.crlf, IsCRLFText(tt.stored))
			lf := ToLF(tt.stored)
			assert.Equal(t, tt.lf, lf)
			back := Restore(lf, tt.crlf)
			if tt.name == "one crlf makes the file crlf" {
				assert.Equal(t, "a\r\nb\r\n", back, "a mixed file is stored back all CRLF")
				return
			}
			assert.Equal(t, tt.stored, back)
		})
	}
}

func TestToLF_DoesNotCopyTextWithoutCRLF(t *testing.T) {
	s := "no carriage returns\n"
	allocs := testing.AllocsPerRun(100, func() { _ = ToLF(s) })
	assert.Zero(t, allocs)
}
