package fuse

import (
	"context"
	"syscall"
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRelisting_SeekToStartListsTheDirectoryAgain pins rewinddir on a
// listing made in memory (a branch directory): a seek to 0 shows the
// directory as it is now, a seek elsewhere continues the listing the
// kernel's offsets point into, a seek past the end is EINVAL.
func TestRelisting_SeekToStartListsTheDirectoryAgain(t *testing.T) {
	names := []string{"a", "b", "c"}
	lists := 0
	list := func() ([]gofuse.DirEntry, error) {
		lists++
		var es []gofuse.DirEntry
		for _, n := range names {
			es = append(es, gofuse.DirEntry{Name: n, Mode: syscall.S_IFREG})
		}
		return es, nil
	}
	read := func(r *relisting) []string {
		var got []string
		for {
			de, errno := r.Readdirent(context.Background())
			require.Zero(t, errno)
			if de == nil {
				return got
			}
			got = append(got, de.Name)
		}
	}
	r, err := newRelisting(list)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, read(r))
	names = []string{"a", "c", "d"}
	for _, tc := range []struct {
		name  string
		off   uint64
		want  []string
		errno syscall.Errno
		lists int
	}{
		{"ElsewhereKeepsTheListing", 1, []string{"b", "c"}, 0, 1},
		{"StartListsAgain", 0, []string{"a", "c", "d"}, 0, 2},
		{"PastTheEndIsEINVAL", 4, nil, syscall.EINVAL, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.errno, r.Seekdir(context.Background(), tc.off))
			if tc.errno == 0 {
				assert.Equal(t, tc.want, read(r))
			}
			assert.Equal(t, tc.lists, lists, "listings made")
		})
	}
}
