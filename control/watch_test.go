package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/provider"
)

// waitEvent waits for an event matching ok.
func waitEvent(t *testing.T, w *Watch, ok func(ChangeEvent) bool) ChangeEvent {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, open := <-w.C:
			require.True(t, open, "the watch channel closed")
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatal("no matching change notification")
		}
	}
}

func TestWatch_NotifiesChangesAndRemoval(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "w.txt", "one\n")
	watcher, writer := env.client(t), env.client(t)
	ctx := context.Background()
	w, err := watcher.Watch(ctx, WatchParams{Path: "w.txt"})
	require.NoError(t, err)
	require.NotEmpty(t, w.ID)

	_, err = writer.Read(ctx, ReadParams{Path: "w.txt"})
	require.NoError(t, err)
	out, err := writer.Write(ctx, WriteParams{Path: "w.txt", Content: "two\n"})
	require.NoError(t, err)
	ev := waitEvent(t, w, func(ev ChangeEvent) bool { return ev.Version == out.Version })
	require.Equal(t, ChangeModified, ev.Kind)
	require.Equal(t, "w.txt", ev.Path)
	require.Equal(t, w.ID, ev.Watch)

	_, err = writer.Delete(ctx, DeleteParams{Path: "w.txt"})
	require.NoError(t, err)
	waitEvent(t, w, func(ev ChangeEvent) bool { return ev.Kind == ChangeRemoved })

	require.NoError(t, w.Close(ctx))
	_, open := <-w.C
	for open {
		_, open = <-w.C
	}
	// The watch is gone on the daemon too.
	err = watcher.Call(ctx, MethodUnwatch, UnwatchParams{Watch: w.ID}, nil)
	var re *RPCError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CodeInvalidParams, re.RPCCode)
}

func TestWatch_MissingDirectoryFails(t *testing.T) {
	env := newTestEnv(t)
	_, err := env.client(t).Watch(context.Background(), WatchParams{Path: "no/such/dir/file"})
	require.Error(t, err)
	require.NotEmpty(t, provider.CodeOf(err), "a filesystem error: %v", err)
}
