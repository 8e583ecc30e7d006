package policy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// crashHelperEnv names the state directory the helper process loads.
const crashHelperEnv = "DSHMOUNT_POLICY_CRASH_HELPER"

// TestMain runs the crash helper instead of the tests when the test binary
// is re-executed by TestCrash_KillDuringLoadOnlyMakesGuardsStricter.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		os.Exit(crashHelper(dir))
	}
	os.Exit(m.Run())
}

// crashHelper opens the store and loops bumping, recording and auditing,
// printing every acknowledged item on stdout, until it is killed:
//
//	session <id>          the session is open and flushed
//	digest <ino> <n>      RememberDigest stored digestFor(FileID{1, ino}, n)
//	flushed <i>           every observation and audit entry up to i is in Badger
func crashHelper(dir string) int {
	s, err := openDir(dir, quietOptions().WithLeaseBandwidth(100))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sess, err := s.OpenSession("crash")
	if err == nil {
		err = s.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintf(os.Stdout, "session %s\n", sess.ID)
	for i := 0; ; i++ {
		ino := uint64(i % 50)
		d := digestFor(provider.FileID{Dev: 1, Ino: ino}, i)
		s.RememberDigest(provider.FileID{Dev: 1, Ino: ino}, d)
		fmt.Fprintf(os.Stdout, "digest %d %d\n", ino, i)
		key := provider.Key(fmt.Sprintf("/ws/f%d", i))
		if err := s.Record(sess.ID, key, Present(d.Version)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := s.AppendAudit(AuditEntry{Key: key, Path: fmt.Sprintf("f%d", i), Op: OpWrite}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if i%100 == 99 {
			if err := s.Flush(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			fmt.Fprintf(os.Stdout, "flushed %d\n", i)
		}
	}
}

func TestCrash_KillDuringLoadOnlyMakesGuardsStricter(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	var sessionID SessionID
	reported := make(map[uint64]map[int]bool) // ino → digests the child remembered
	gens, lastFlushed, flushes := 0, -1, 0
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "session":
			sessionID = SessionID(f[1])
		case "digest":
			ino, _ := strconv.ParseUint(f[1], 10, 64)
			n, _ := strconv.Atoi(f[2])
			if reported[ino] == nil {
				reported[ino] = make(map[int]bool)
			}
			reported[ino][n] = true
			gens++
		case "flushed":
			lastFlushed, _ = strconv.Atoi(f[1])
			flushes++
		}
		// Kill mid-load: well after several flushes, between two of them.
		if !killed && flushes >= 5 && gens%100 == 37 {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			killed = true
		}
	}
	_ = cmd.Wait()
	require.True(t, killed, "the helper stopped before it could be killed: %s", stderr.String())
	require.NotEmpty(t, sessionID)

	s := openStore(t, dir, quietOptions())
	assert.True(t, s.Recovered(), "a killed daemon must be seen as an unclean shutdown")

	_, ok := s.Session(sessionID)
	assert.True(t, ok, "the flushed session survives")
	for i := 0; i <= lastFlushed; i++ {
		obs, ok := s.Observation(sessionID, provider.Key(fmt.Sprintf("/ws/f%d", i)))
		if !assert.True(t, ok, "flushed observation %d lost", i) {
			break
		}
		assert.Equal(t, ObservedPresent, obs.Kind)
	}
	entries, err := s.Audit(AuditQuery{Limit: 1 << 30})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(entries), lastFlushed+1, "flushed audit entries survive")

	// A cached digest after the crash is absent or exactly one the child
	// remembered for that identity: never torn, never another file's.
	found := 0
	for ino, ns := range reported {
		id := provider.FileID{Dev: 1, Ino: ino}
		got, ok := s.Digest(id)
		if !ok {
			continue
		}
		found++
		n := int(got.Key.Size)
		require.True(t, ns[n], "ino %d: digest %d was never remembered for it", ino, n)
		require.Equal(t, digestFor(id, n), got)
	}
	assert.NotZero(t, found, "flushed digests survive the crash")

	// A later clean restart is clean.
	require.NoError(t, s.Close())
	r := openStore(t, dir, quietOptions())
	assert.False(t, r.Recovered())
}
