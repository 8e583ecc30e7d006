package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeCacheFlag_SizesInBytesKiBMiBGiB(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"64KiB", 64 << 10, true},
		{"256MiB", 256 << 20, true},
		{"1GiB", 1 << 30, true},
		{"-1", 0, false},
		{"12MB", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			var b byteSize
			err := b.Set(tc.in)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, int64(b))
		})
	}
}
