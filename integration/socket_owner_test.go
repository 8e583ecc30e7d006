package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// peerCallsEnv makes the test binary a socket peer: it dials the socket
// named by helperSocketEnv and, for each stdin line, either sends it as a
// request and prints "line\t<response>" (notifications skipped), or, for
// "mount-read PATH", reads PATH and prints "mount\t<errno>" (0: read).
const peerCallsEnv = "DSH_INTEGRATION_PEER_CALLS"

func init() {
	if os.Getenv(peerCallsEnv) == "" {
		return
	}
	os.Exit(runPeerCalls(os.Getenv(helperSocketEnv), os.Stdin, os.Stdout))
}

func runPeerCalls(socket string, in io.Reader, out io.Writer) int {
	nc, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(out, "dial\t%d\t%s\n", int(errnoOf(err)), err)
		return 0
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 1<<20)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if path, ok := strings.CutPrefix(line, "mount-read "); ok {
			_, err := os.ReadFile(path)
			fmt.Fprintf(out, "mount\t%d\n", int(errnoOf(err)))
			continue
		}
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			fmt.Fprintf(out, "write\t%s\n", err)
			return 0
		}
		for {
			resp, err := r.ReadString('\n')
			if err != nil {
				fmt.Fprintf(out, "read\t%s\n", err)
				return 0
			}
			if strings.Contains(resp, `"method":"fs.changed"`) {
				continue
			}
			fmt.Fprintf(out, "line\t%s", resp)
			break
		}
	}
	return 0
}

// ownerDaemon starts a daemon that serves uid 65534 (--allow-uid) with
// the mount open to other users, in directories that uid can reach.
func ownerDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("serving another uid needs a root daemon")
	}
	base, err := os.MkdirTemp("", "dsh-owner-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) }) // after the daemon's own cleanup
	require.NoError(t, os.Chmod(base, 0o755))
	dirs := &daemonDirs{Src: filepath.Join(base, "src"), Mnt: filepath.Join(base, "mnt"), State: filepath.Join(base, "state")}
	require.NoError(t, os.Mkdir(dirs.Src, 0o755))
	require.NoError(t, os.Mkdir(dirs.Mnt, 0o755))
	args := append([]string{"--allow-uid", "65534", "--allow-other"}, extra...)
	return startDaemon(t, daemonOptions{Dirs: dirs, Args: args})
}

// peer runs the test binary as uid 65534 (gid 65534, no other groups) to
// send lines; it returns one output line per input line.
func peer(t *testing.T, socket string, lines ...string) []string {
	t.Helper()
	binDir, err := os.MkdirTemp("", "dsh-peer-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	bin := filepath.Join(binDir, "peer")
	exe, err := os.ReadFile(testBinary(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, exe, 0o755))
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{peerCallsEnv + "=1", helperSocketEnv + "=" + socket, "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "peer: %s", out)
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, got, len(lines), "one answer per line: %s", out)
	return got
}

// answer decodes a "line\t…" output of the peer.
func answer(t *testing.T, out string) rawResponse {
	t.Helper()
	rest, ok := strings.CutPrefix(out, "line\t")
	require.True(t, ok, "the peer got an answer: %q", out)
	var r rawResponse
	require.NoError(t, json.Unmarshal([]byte(rest), &r), rest)
	r.Raw = rest
	return r
}

// requirePeerDenied checks an FS_PERMISSION_DENIED answer.
func requirePeerDenied(t *testing.T, out, what string) {
	t.Helper()
	r := answer(t, out)
	require.NotNil(t, r.Error, "%s must be refused: %s", what, r.Raw)
	assert.Equal(t, provider.CodePermissionDenied, r.fsCode(), "%s: %s", what, r.Raw)
}

// TestSocketOwner_AnotherUIDCannotTouchAnotherUIDsSession is case 7 of
// issue 14: an allowed uid can neither list, use, close nor bind root's
// session, nor bind pid 1 to its own; root's shell keeps writing.
func TestSocketOwner_AnotherUIDCannotTouchAnotherUIDsSession(t *testing.T) {
	d := ownerDaemon(t)
	ctx := testCtx(t)
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "f.txt"), []byte("root's\n"), 0o666))
	sess, err := d.Client.OpenSession(ctx, "root-agent")
	require.NoError(t, err)
	_, err = d.Client.Read(ctx, control.ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)

	s := jsonString(string(sess))
	out := peer(t, d.Socket,
		string(rpcLine(1, "daemon.status", "{}")),
		string(rpcLine(2, "fs.read", `{"path":"f.txt","session":`+s+`}`)),
		string(rpcLine(3, "fs.write", `{"path":"f.txt","content":"EVIL\n","session":`+s+`}`)),
		string(rpcLine(4, "session.bind", `{"session":`+s+`,"pid":1}`)),
		string(rpcLine(5, "session.close", `{"session":`+s+`}`)),
		string(rpcLine(6, "session.open", `{"name":"mine"}`)),
	)
	st := answer(t, out[0])
	require.Nil(t, st.Error, st.Raw)
	assert.NotContains(t, st.Raw, string(sess), "root's session is not listed to another uid")
	requirePeerDenied(t, out[1], "reading with root's session")
	requirePeerDenied(t, out[2], "writing with root's session")
	requirePeerDenied(t, out[3], "binding pid 1 to root's session")
	requirePeerDenied(t, out[4], "closing root's session")
	var opened control.SessionOpenResult
	r := answer(t, out[5])
	require.Nil(t, r.Error, r.Raw)
	require.NoError(t, json.Unmarshal(r.Result, &opened))

	out = peer(t, d.Socket, string(rpcLine(1, "session.bind", `{"session":`+jsonString(string(opened.Session))+`,"pid":1}`)))
	requirePeerDenied(t, out[0], "binding pid 1 (root's) to the peer's own session")

	status, err := d.Client.Status(ctx)
	require.NoError(t, err)
	owners := map[string]uint32{}
	for _, si := range status.Sessions {
		owners[string(si.ID)] = si.Owner
	}
	assert.Equal(t, uint32(0), owners[string(sess)], "root's session is still open")
	assert.Equal(t, uint32(65534), owners[string(opened.Session)], "root lists the peer's session with its owner")
	require.NoError(t, os.WriteFile(d.m("f.txt"), []byte("root's shell\n"), 0o666), "root's shell (pid 1's descendant) is not bound")
	got, err := os.ReadFile(filepath.Join(d.Src, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "root's shell\n", string(got))
	stopAndCheckRaces(t, d)
}

// TestSocketOwner_PeerGetsNoMoreThanTheMount is the socket part of case 7:
// a root-only file the mount refuses uid 65534 is refused over the socket
// too, and what the peer creates is its own.
func TestSocketOwner_PeerGetsNoMoreThanTheMount(t *testing.T) {
	d := ownerDaemon(t)
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "secret.txt"), []byte("root only\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "open.txt"), []byte("anyone\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(d.Src, "shared"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(d.Src, "shared"), 0o777))

	out := peer(t, d.Socket,
		"mount-read "+d.m("secret.txt"),
		string(rpcLine(1, "fs.read", `{"path":"secret.txt"}`)),
		"mount-read "+d.m("open.txt"),
		string(rpcLine(2, "fs.read", `{"path":"open.txt"}`)),
		string(rpcLine(3, "fs.write", `{"path":"secret.txt","content":"EVIL\n","unconditional":true}`)),
		string(rpcLine(4, "fs.delete", `{"path":"open.txt","unconditional":true}`)),
		string(rpcLine(5, "fs.write", `{"path":"shared/mine.txt","content":"peer\n"}`)),
	)
	assert.Equal(t, fmt.Sprintf("mount\t%d", int(syscall.EACCES)), out[0], "the mount refuses uid 65534 the 0600 file")
	requirePeerDenied(t, out[1], "reading the 0600 root file over the socket")
	assert.Equal(t, "mount\t0", out[2], "the mount lets uid 65534 read a 0644 file")
	r := answer(t, out[3])
	assert.Nil(t, r.Error, "and so does the socket: %s", r.Raw)
	requirePeerDenied(t, out[4], "replacing a root file in a root directory")
	requirePeerDenied(t, out[5], "deleting from a root directory")
	r = answer(t, out[6])
	require.Nil(t, r.Error, "creating in a directory open to all: %s", r.Raw)

	got, err := os.ReadFile(filepath.Join(d.Src, "secret.txt"))
	require.NoError(t, err)
	assert.Equal(t, "root only\n", string(got))
	_, err = os.Stat(filepath.Join(d.Src, "open.txt"))
	assert.NoError(t, err)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(d.Src, "shared", "mine.txt"), &st))
	assert.Equal(t, uint32(65534), st.Uid, "the file the peer created is the peer's")
	stopAndCheckRaces(t, d)
}
