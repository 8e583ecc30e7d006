package fuse

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

func TestGuard_BoundWriteNeedsFreshObservation(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("a.txt", "one\n")
		e.session()

		// never read: refused, file untouched
		err := os.WriteFile(e.m("a.txt"), []byte("two\n"), 0o644)
		require.ErrorIs(t, err, syscall.EACCES)
		got, _ := os.ReadFile(e.b("a.txt"))
		assert.Equal(t, "one\n", string(got))

		// read through the mount, then write: allowed
		got, err = os.ReadFile(e.m("a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "one\n", string(got))
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("two\n"), 0o644))
		got, _ = os.ReadFile(e.b("a.txt"))
		assert.Equal(t, "two\n", string(got))

		// its own write refreshed the observation: it may write again
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("three\n"), 0o644))

		// someone changes the file out of band: stale
		e.put("a.txt", "theirs\n")
		err = os.WriteFile(e.m("a.txt"), []byte("mine\n"), 0o644)
		require.ErrorIs(t, err, syscall.ESTALE)
		got, _ = os.ReadFile(e.b("a.txt"))
		assert.Equal(t, "theirs\n", string(got))

		// reading again makes it fresh
		_, err = os.ReadFile(e.m("a.txt"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("mine\n"), 0o644))
	})
}

// A passthrough handle's RELEASE comes after close() returned. Here the
// open file rides in flight on a unix socket (SCM_RIGHTS), which holds the
// RELEASE back past an out-of-band change; dropping the socket then
// releases the file without a FLUSH. The late record of that change must
// neither credit the session with the new content (unread: ESTALE) nor
// invalidate a read of it made before the RELEASE arrived.
func TestGuard_LateReleaseCreditsNothingAndKeepsFreshReads(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		t.Run("read before release="+strconv.FormatBool(readFirst), func(t *testing.T) {
			eachMode(t, envOptions{}, func(t *testing.T, e *env) {
				e.put("a.txt", "one\n")
				e.session()
				_, err := os.ReadFile(e.m("a.txt"))
				require.NoError(t, err)

				f, err := os.OpenFile(e.m("a.txt"), os.O_RDWR, 0)
				require.NoError(t, err)
				_, err = f.WriteAt([]byte("two\n"), 0)
				require.NoError(t, err)
				pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				require.NoError(t, err)
				require.NoError(t, unix.Sendmsg(pair[0], []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0))
				require.NoError(t, f.Close()) // FLUSH records the write; the message holds RELEASE back

				e.put("a.txt", "theirs\n") // out of band, in place
				if readFirst {
					_, err = os.ReadFile(e.m("a.txt"))
					require.NoError(t, err)
				}
				require.NoError(t, unix.Close(pair[0]))
				require.NoError(t, unix.Close(pair[1])) // the file is dropped: RELEASE
				// A bound writer's handle is never passthrough here: its writes
				// arrived as WRITE requests and were recorded at the FLUSH; what
				// the release may record is not credited (checked below).

				if !readFirst {
					err = os.WriteFile(e.m("a.txt"), []byte("mine\n"), 0o644)
					require.ErrorIs(t, err, syscall.ESTALE)
					got, _ := os.ReadFile(e.b("a.txt"))
					assert.Equal(t, "theirs\n", string(got))
					_, err = os.ReadFile(e.m("a.txt"))
					require.NoError(t, err)
				}
				require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("mine\n"), 0o644))
				got, _ := os.ReadFile(e.b("a.txt"))
				assert.Equal(t, "mine\n", string(got))
			})
		})
	}
}

func TestGuard_BoundMutationsOfUnseenFilesAreRefused(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("unseen.txt", "x")
		e.put("src.txt", "y")
		e.session()

		cases := map[string]func() error{
			"unlink":      func() error { return os.Remove(e.m("unseen.txt")) },
			"truncate":    func() error { return os.Truncate(e.m("unseen.txt"), 0) },
			"open rdwr":   func() error { f, err := os.OpenFile(e.m("unseen.txt"), os.O_RDWR, 0); f.Close(); return err },
			"rename over": func() error { return os.Rename(e.m("src.txt"), e.m("unseen.txt")) },
			"exchange": func() error {
				return unix.Renameat2(unix.AT_FDCWD, e.m("src.txt"), unix.AT_FDCWD, e.m("unseen.txt"), unix.RENAME_EXCHANGE)
			},
		}
		for name, mutate := range cases {
			t.Run(name, func(t *testing.T) {
				assert.ErrorIs(t, mutate(), syscall.EACCES)
			})
		}
		got, _ := os.ReadFile(e.b("unseen.txt"))
		assert.Equal(t, "x", string(got))
		got, _ = os.ReadFile(e.b("src.txt"))
		assert.Equal(t, "y", string(got))

		// creating a new file and moving it to an absent name are allowed,
		// and so is renaming over a file it read
		require.NoError(t, os.WriteFile(e.m("new.txt"), []byte("n"), 0o644))
		require.NoError(t, os.Rename(e.m("new.txt"), e.m("moved.txt")))
		_, err := os.ReadFile(e.m("unseen.txt"))
		require.NoError(t, err)
		require.NoError(t, os.Rename(e.m("moved.txt"), e.m("unseen.txt")))
		got, _ = os.ReadFile(e.b("unseen.txt"))
		assert.Equal(t, "n", string(got))
		// it wrote unseen.txt itself: it may remove it
		require.NoError(t, os.Remove(e.m("unseen.txt")))
	})
}

func TestGuard_ObservedAbsentIsENOENT(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.session()
	target := e.lfs.TargetForRel("later.txt")
	_, _, err := e.engine.Read(context.Background(), a, target)
	require.Equal(t, provider.CodeNotFound, provider.CodeOf(err), "the session reads the file absent: %v", err)

	e.put("later.txt", "someone else's")
	err = os.WriteFile(e.m("later.txt"), []byte("mine"), 0o644)
	require.ErrorIs(t, err, syscall.ENOENT)
	got, _ := os.ReadFile(e.b("later.txt"))
	assert.Equal(t, "someone else's", string(got))
}

func TestGuard_UnboundCallersAreNeverRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("a.txt", "x")
	require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("y"), 0o644))
	require.NoError(t, os.Rename(e.m("a.txt"), e.m("b.txt")))
	require.NoError(t, os.Remove(e.m("b.txt")))
	assert.NoFileExists(t, e.b("a.txt"))
	assert.NoFileExists(t, e.b("b.txt"))
}

func TestGuard_AgentTokenGoesStaleAfterMountWrite(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.put("a.txt", "hello\n")
		s, err := e.store.OpenSession("agent")
		require.NoError(t, err)
		agent := policy.Actor{Session: s.ID, Channel: policy.ChannelSocket}
		target := e.lfs.TargetForRel("a.txt")
		_, _, err = e.engine.Read(ctx, agent, target)
		require.NoError(t, err)

		// a person's editor (unbound) saves the same bytes: nothing changed
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("hello\n"), 0o644))
		require.NoError(t, os.Chmod(e.m("a.txt"), 0o600))
		_, err = e.engine.Edit(ctx, agent, target, provider.EditRequest{OldString: "hello", NewString: "hi"}, policy.Guard{})
		require.NoError(t, err, "identical bytes and a chmod leave the agent's token fresh")

		// a person's editor saves other bytes
		require.NoError(t, os.WriteFile(e.m("a.txt"), []byte("hello there\n"), 0o644))

		_, err = e.engine.Edit(ctx, agent, target, provider.EditRequest{OldString: "hello", NewString: "bye"}, policy.Guard{})
		require.Error(t, err)
		assert.ErrorIs(t, err, provider.ErrStaleVersion)
	})
}
