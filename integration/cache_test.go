package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without the watcher (--watch=false), out-of-band changes to the backing
// directory (another program, a git checkout there) are not seen by the
// daemon; the kernel's caches expire
// them after the entry / attribute timeout. These tests pin that the mount
// shows them once the timeout has passed, for each way a file can change.

// cacheTimeout is the timeout the tests mount with; visibility is checked
// within a generous multiple of it (the bound is the property, not a speed).
const cacheTimeout = 300 * time.Millisecond

func TestCache_OutOfBandChangeVisibleAfterTimeout(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, src string)
		check  func(mnt string) bool
	}{
		{"rewrite in place", func(t *testing.T, src string) {
			f, err := os.OpenFile(filepath.Join(src, "a.txt"), os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString("rewritten out of band\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, func(mnt string) bool {
			b, err := os.ReadFile(filepath.Join(mnt, "a.txt"))
			return err == nil && string(b) == "rewritten out of band\n"
		}},
		{"replace by rename", func(t *testing.T, src string) {
			tmp := filepath.Join(src, ".a.tmp")
			require.NoError(t, os.WriteFile(tmp, []byte("replaced\n"), 0o644))
			require.NoError(t, os.Rename(tmp, filepath.Join(src, "a.txt")))
		}, func(mnt string) bool {
			b, err := os.ReadFile(filepath.Join(mnt, "a.txt"))
			return err == nil && string(b) == "replaced\n"
		}},
		{"new file", func(t *testing.T, src string) {
			require.NoError(t, os.WriteFile(filepath.Join(src, "new.txt"), []byte("new\n"), 0o644))
		}, func(mnt string) bool {
			b, err := os.ReadFile(filepath.Join(mnt, "new.txt"))
			return err == nil && string(b) == "new\n"
		}},
		{"deleted file", func(t *testing.T, src string) {
			require.NoError(t, os.Remove(filepath.Join(src, "gone.txt")))
		}, func(mnt string) bool {
			_, err := os.Stat(filepath.Join(mnt, "gone.txt"))
			return os.IsNotExist(err)
		}},
		{"mode change", func(t *testing.T, src string) {
			require.NoError(t, os.Chmod(filepath.Join(src, "a.txt"), 0o600))
		}, func(mnt string) bool {
			st, err := os.Stat(filepath.Join(mnt, "a.txt"))
			return err == nil && st.Mode().Perm() == 0o600
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, daemonOptions{
				Args:  []string{"--watch=false", "--entry-timeout", cacheTimeout.String(), "--attr-timeout", cacheTimeout.String()},
				Files: map[string]string{"a.txt": "original\n", "gone.txt": "soon gone\n"},
			})
			// Warm the kernel's caches: names, attributes and pages.
			for _, name := range []string{"a.txt", "gone.txt"} {
				_, err := os.ReadFile(d.m(name))
				require.NoError(t, err)
			}
			_, err := os.Stat(d.m("new.txt"))
			require.True(t, os.IsNotExist(err), "new.txt does not exist yet")

			tc.change(t, d.Src)
			assert.Eventually(t, func() bool { return tc.check(d.Mnt) }, 20*cacheTimeout, 20*time.Millisecond,
				"the out-of-band change shows through the mount once the cache timeout has passed")
		})
	}
}
