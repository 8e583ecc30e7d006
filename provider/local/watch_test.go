package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/provider"
)

// watchEvents starts a watch and returns its event channel.
func watchEvents(t *testing.T, fs *FS, tg provider.Target) (<-chan error, func()) {
	t.Helper()
	events := make(chan error, 64)
	w, err := fs.Watch(context.Background(), tg, func(err error) {
		select {
		case events <- err:
		default:
		}
	})
	require.NoError(t, err)
	return events, func() { require.NoError(t, w.Close()) }
}

// waitEvent waits for one notification; the bound only keeps a broken
// watcher from hanging the test.
func waitEvent(t *testing.T, events <-chan error) error {
	t.Helper()
	select {
	case err := <-events:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no change notification")
		return nil
	}
}

// drain empties the channel.
func drain(events <-chan error) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

func TestWatch_FileChangesAndAtomicReplace(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a")
	put(t, root, "other.txt", "a")
	tg := target(t, fs, "f.txt")
	events, stop := watchEvents(t, fs, tg)
	defer stop()

	_, err := fs.WriteText(context.Background(), tg, "b", nil) // atomic replace
	require.NoError(t, err)
	require.NoError(t, waitEvent(t, events))
	drain(events)

	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("in place"), 0o644))
	require.NoError(t, waitEvent(t, events))
	drain(events)

	require.NoError(t, os.Remove(filepath.Join(root, "f.txt")))
	require.NoError(t, waitEvent(t, events))
}

func TestWatch_MatchEventsFiltersSiblings(t *testing.T) {
	event := func(mask uint32, name string) []byte {
		padded := 0
		if name != "" {
			padded = (len(name) + 1 + 15) / 16 * 16
		}
		buf := make([]byte, unix.SizeofInotifyEvent+padded)
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		ev.Mask, ev.Len = mask, uint32(padded)
		copy(buf[unix.SizeofInotifyEvent:], name)
		return buf
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name      string
		buf       []byte
		filter    string
		hit, gone bool
	}{
		{"sibling only", event(unix.IN_MODIFY, "sibling.txt"), "f.txt", false, false},
		{"name prefix is not a match", event(unix.IN_CREATE, "f.txt~"), "f.txt", false, false},
		{"target among siblings", cat(event(unix.IN_MODIFY, "a"), event(unix.IN_MOVED_TO, "f.txt")), "f.txt", true, false},
		{"any child of a watched directory", event(unix.IN_CREATE, "new"), "", true, false},
		{"directory itself deleted", event(unix.IN_DELETE_SELF, ""), "f.txt", true, false},
		{"overflow", event(unix.IN_Q_OVERFLOW, ""), "f.txt", true, false},
		{"watch removed", event(unix.IN_IGNORED, ""), "f.txt", false, true},
	} {
		hit, gone := matchEvents(tc.buf, tc.filter)
		assert.Equal(t, tc.hit, hit, tc.name)
		assert.Equal(t, tc.gone, gone, tc.name)
	}
}

func TestWatch_MissingFileSeesCreation(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	tg := target(t, fs, "later.txt")
	events, stop := watchEvents(t, fs, tg)
	defer stop()
	put(t, root, "later.txt", "now")
	require.NoError(t, waitEvent(t, events))
}

func TestWatch_DirectoryEntries(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	events, stop := watchEvents(t, fs, target(t, fs, "d"))
	defer stop()
	put(t, root, "d/new.txt", "x")
	require.NoError(t, waitEvent(t, events))
}

func TestWatch_DirectoryRemovedReportsError(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	events, stop := watchEvents(t, fs, target(t, fs, "d"))
	defer stop()
	require.NoError(t, os.Remove(filepath.Join(root, "d")))
	for {
		if err := waitEvent(t, events); err != nil {
			requireCode(t, err, provider.CodeNotFound)
			return
		}
	}
}

func TestWatch_Errors(t *testing.T) {
	fs, _ := newTestFS(t, Options{})
	_, err := fs.Watch(context.Background(), target(t, fs, "no/such/file"), func(error) {})
	requireCode(t, err, provider.CodeNotFound)
	_, err = fs.Watch(cancelled(), target(t, fs, "x"), func(error) {})
	requireCode(t, err, provider.CodeAborted)
	_, err = fs.Watch(context.Background(), provider.Target{Key: "/etc/x", DisplayPath: "x"}, func(error) {})
	requireCode(t, err, provider.CodeSandboxDenied)
}

func TestWatch_CloseStopsAndIsIdempotent(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a")
	calls := make(chan error, 64)
	w, err := fs.Watch(context.Background(), target(t, fs, "f.txt"), func(err error) { calls <- err })
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.NoError(t, w.Close())
	put(t, root, "f.txt", "b")
	// Close waited for the goroutine, so no callback can run any more.
	assert.Empty(t, calls)
}
