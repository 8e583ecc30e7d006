package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// mountSetup: one file, two daemons, a session bound on A that read it
// through A's mount, and an agent session on B that read it too.
func mountSetup(t *testing.T, optsB Options) (a, b daemon, bound, agent Actor, tg provider.Target, v provider.Version) {
	t.Helper()
	srv := startEtcd(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("one\n"), 0o644))
	a, b = newDaemon(t, srv, root, quietOptions()), newDaemon(t, srv, root, optsB)
	sa, err := a.store.OpenSession("bound on A")
	require.NoError(t, err)
	sb, err := b.store.OpenSession("agent on B")
	require.NoError(t, err)
	bound = Actor{Session: sa.ID, Channel: ChannelMount}
	agent = Actor{Session: sb.ID, Channel: ChannelSocket}
	tg = a.fs.TargetForRel("f.txt")
	v = version.OfBytes([]byte("one\n"))
	require.NoError(t, a.e.ObserveMount(bound, tg, Present(v)))
	_, _, err = b.e.Read(context.Background(), agent, b.fs.TargetForRel("f.txt"))
	require.NoError(t, err)
	return a, b, bound, agent, tg, v
}

// An agent on B is publishing a new version (it holds the file's claim):
// a process bound on A that read the old version and now writes through
// mount A is refused FS_STALE_VERSION, though A's view of the bytes still
// matches its observation.
func TestShared_MountWriteRefusedWhileAnotherDaemonPublishes(t *testing.T) {
	a, b, bound, _, tg, v := mountSetup(t, quietOptions())
	c, err := b.store.Claim(context.Background(), "edit", "f.txt", b.fs.TargetForRel("f.txt").Key)
	require.NoError(t, err)
	err = a.e.CheckMount(bound, OpWrite, tg, &v)
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "got %v", err)
	c.Release(map[provider.Key]provider.Version{b.fs.TargetForRel("f.txt").Key: "v-from-B"})
	require.NoError(t, a.e.CheckMount(bound, OpWrite, tg, &v), "B is done: A's bytes decide again")
}

// A bound process's change through mount A holds the file's claim until it
// is recorded: an agent on B cannot publish over it meanwhile, and once it
// is recorded B's agent, who read the old bytes, is stale.
func TestShared_MountWriteHoldsClaimUntilRecorded(t *testing.T) {
	a, b, bound, agent, tg, v := mountSetup(t, quietOptions().WithClaimWait(50*time.Millisecond))
	ctx := context.Background()
	require.NoError(t, a.e.CheckMount(bound, OpWrite, tg, &v))
	_, err := b.e.Edit(ctx, agent, b.fs.TargetForRel("f.txt"), provider.EditRequest{OldString: "one", NewString: "B"}, Guard{})
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "B waits for A's claim, then gives up: %v", err)

	require.NoError(t, os.WriteFile(filepath.Join(a.fs.Root(), "f.txt"), []byte("bound\n"), 0o644)) // the process's write
	after := version.OfBytes([]byte("bound\n"))
	require.NoError(t, a.e.RecordMount(ctx, bound, OpWrite, tg, v, after, nil))
	val, err := b.store.db.Get(ctx, versionKey("./f.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(val), string(after), "released with the version the mount wrote")
	assert.NotContains(t, string(val), "owner")
	_, err = b.e.Edit(ctx, agent, b.fs.TargetForRel("f.txt"), provider.EditRequest{OldString: "one", NewString: "B"}, Guard{})
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "got %v", err)
}
