package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// Helper processes. The race and hostile tests re-execute the test binary
// as small child processes (a writer bound to a session on the mount, a peer
// running under another uid). The child is recognised in init, before
// TestMain, so it does not rebuild the daemon binary on every start.

// helperEnv selects the helper a re-executed test binary runs.
const helperEnv = "DSH_INTEGRATION_HELPER"

// Helper names for helperEnv.
const (
	helperMountWriter = "mount-writer" // see runMountWriter
	helperPeerConnect = "peer-connect" // see runPeerConnect
)

// helperSocketEnv names the socket the peer-connect helper dials.
const helperSocketEnv = "DSH_INTEGRATION_SOCKET"

func init() {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case helperMountWriter:
		os.Exit(runMountWriter(os.Stdin, os.Stdout))
	case helperPeerConnect:
		os.Exit(runPeerConnect(os.Getenv(helperSocketEnv), os.Stdout))
	case helperGuardOps:
		os.Exit(runGuardOps(os.Stdin, os.Stdout))
	case helperFSX:
		os.Exit(runFSXHelper(os.Stdout))
	case helperPosixBound:
		os.Exit(runPosixBoundHelper())
	case helperMountSuite:
		os.Exit(runMountSuiteHelper())
	default:
		fmt.Fprintf(os.Stderr, "integration helper: unknown %s=%q\n", helperEnv, os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// TestHelperMountWriter is the mount-writer entry point named on the helper's
// command line (-test.run=^TestHelperMountWriter$); init runs the helper
// before the test framework starts, so in a normal run it checks the
// helper's protocol on a plain directory.
func TestHelperMountWriter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o644))
	var out bytes.Buffer
	code := runMountWriter(strings.NewReader(p+"\tnew\n"+filepath.Join(dir, "missing")+"\tx\n"), &out)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	r := parseWriterReply(lines[0])
	assert.True(t, r.OK, lines[0])
	assert.Equal(t, "old\n", r.Read)
	r = parseWriterReply(lines[1])
	assert.False(t, r.OK)
	assert.Equal(t, "read", r.Step)
	assert.Equal(t, syscall.ENOENT, r.Errno)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(got))
}

// runMountWriter reads "PATH\tCONTENT" lines; for each it reads PATH, then
// rewrites it in place with O_TRUNC to CONTENT+"\n", and answers one line:
// "ok\t<quoted content read>" or "err\t<step>\t<errno>\t<message>".
func runMountWriter(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	w := bufio.NewWriter(out)
	for sc.Scan() {
		path, content, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			fmt.Fprintf(w, "err\tparse\t-1\tno tab in %q\n", sc.Text())
		} else {
			fmt.Fprintln(w, mountWriteOnce(path, content+"\n"))
		}
		if err := w.Flush(); err != nil {
			return 1
		}
	}
	return 0
}

// mountWriteOnce is one read-then-rewrite of the mount-writer helper.
func mountWriteOnce(path, content string) string {
	fail := func(step string, err error) string {
		errno := -1
		if en := errnoOf(err); en != 0 {
			errno = int(en)
		}
		return fmt.Sprintf("err\t%s\t%d\t%s", step, errno, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	read, err := os.ReadFile(path)
	if err != nil {
		return fail("read", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fail("open", err)
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return fail("write", err)
	}
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	return "ok\t" + strconv.Quote(string(read))
}

// writerReply is one parsed answer of the mount-writer helper.
type writerReply struct {
	OK    bool
	Read  string        // content read before writing (OK only)
	Step  string        // failing step: read, open, write, close
	Errno syscall.Errno // failing errno (0 when the error had none)
	Line  string        // the raw line
}

func parseWriterReply(line string) writerReply {
	r := writerReply{Line: line}
	f := strings.SplitN(line, "\t", 4)
	if len(f) >= 2 && f[0] == "ok" {
		r.OK = true
		r.Read, _ = strconv.Unquote(f[1])
		return r
	}
	if len(f) == 4 && f[0] == "err" {
		r.Step = f[1]
		if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
			r.Errno = syscall.Errno(n)
		}
	}
	return r
}

// TestHelperPeerConnect is the peer-connect entry point named on the
// helper's command line; in a normal run it checks the helper against a
// listener that answers one line, and against a missing socket.
func TestHelperPeerConnect(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"no"}}`
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = bufio.NewReader(c).ReadString('\n')
		_, _ = c.Write([]byte(answer + "\n"))
	}()
	var out bytes.Buffer
	require.Equal(t, 0, runPeerConnect(sock, &out))
	assert.Equal(t, "line\t"+answer+"\n", out.String())

	out.Reset()
	require.Equal(t, 0, runPeerConnect(filepath.Join(t.TempDir(), "none.sock"), &out))
	assert.True(t, strings.HasPrefix(out.String(), "dial\t"+strconv.Itoa(int(syscall.ENOENT))+"\t"), out.String())
}

// runPeerConnect dials socket, sends daemon.status and prints either
// "dial\t<errno>\t<message>", "line\t<first line answered>" or
// "read\t-1\t<message>" when nothing came back.
func runPeerConnect(socket string, out io.Writer) int {
	nc, err := net.Dial("unix", socket)
	if err != nil {
		errno := -1
		if en := errnoOf(err); en != 0 {
			errno = int(en)
		}
		fmt.Fprintf(out, "dial\t%d\t%s\n", errno, err)
		return 0
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}` + "\n"))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintf(out, "read\t-1\t%s\n", err)
		return 0
	}
	fmt.Fprintf(out, "line\t%s", line)
	if !strings.HasSuffix(line, "\n") {
		fmt.Fprintln(out)
	}
	return 0
}

// testBinary returns the path of the running test binary.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// Raw socket access, for input the typed client refuses to send.

// rawConn is a line-oriented connection to the control socket.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// rawResponse is one decoded response line.
type rawResponse struct {
	ID     json.RawMessage      `json:"id"`
	Result json.RawMessage      `json:"result"`
	Error  *control.ErrorObject `json:"error"`
	Raw    string               `json:"-"`
}

// fsCode returns the FS_… code of an error response, or "".
func (r rawResponse) fsCode() provider.Code {
	if r.Error == nil || r.Error.Data == nil {
		return ""
	}
	return r.Error.Data.Code
}

func dialRaw(t *testing.T, socket string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", socket)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<20)}
}

// call sends one line (a newline is appended) and returns the next response.
func (c *rawConn) call(line []byte) rawResponse {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetWriteDeadline(time.Now().Add(time.Minute)))
	_, err := c.nc.Write(append(append([]byte{}, line...), '\n'))
	require.NoError(c.t, err, "send %q", line)
	return c.recv()
}

// recv reads the next response line.
func (c *rawConn) recv() rawResponse {
	c.t.Helper()
	require.NoError(c.t, c.nc.SetReadDeadline(time.Now().Add(2*time.Minute)))
	line, err := c.r.ReadBytes('\n')
	require.NoError(c.t, err, "reading a response line")
	var r rawResponse
	require.NoError(c.t, json.Unmarshal(line, &r), "response is JSON: %s", line)
	r.Raw = string(line)
	return r
}

// requireAlive checks that the connection still answers daemon.status.
func (c *rawConn) requireAlive() {
	c.t.Helper()
	r := c.call([]byte(`{"jsonrpc":"2.0","id":"alive","method":"daemon.status"}`))
	require.Nil(c.t, r.Error, "daemon.status after hostile input: %s", r.Raw)
	require.NotEmpty(c.t, r.Result)
}

// rpcLine builds a request line; params is raw JSON text, so it can carry
// bytes the encoder would refuse or repair.
func rpcLine(id int, method, params string) []byte {
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
}

// jsonString quotes s as a JSON string.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a Go string always encodes
	}
	return string(b)
}

// Canary trees: files outside the workspace that hostile input tries to
// reach. Their digest must not change.

// makeCanary fills dir with a few files, a subdirectory and a symlink.
func makeCanary(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"secret.txt":      "canary secret\n",
		"existing.txt":    "canary existing\n",
		"doomed.txt":      "canary doomed\n",
		"victim.txt":      "canary victim\n",
		"planted.txt":     "canary planted\n",
		"sub/deeper.txt":  "canary deeper\n",
		"sub/planted.txt": "canary sub planted\n",
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	require.NoError(t, os.Symlink("secret.txt", filepath.Join(dir, "link-to-secret")))
}

// treeDigest describes names, types, modes, sizes, contents and link
// targets of everything under dir (times excluded: reading must not count).
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := fmt.Sprintf("%q %s %d", rel, info.Mode(), info.Size())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Daemon process inspection.

// pid returns the daemon's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// procStatusKiB returns a "kB" field of /proc/PID/status (VmRSS, VmHWM…).
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	kib, ok := statusField(string(b), field)
	require.True(t, ok, "no %s in /proc/%d/status", field, pid)
	return kib
}

// statusField parses "Field:   123 kB" out of a /proc status text.
func statusField(status, field string) (int64, bool) {
	for _, line := range strings.Split(status, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// openFDs counts the daemon's open file descriptors.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return len(entries)
}

// stopAndCheckRaces stops the daemon, leaves it stopped for the cleanup's
// own stop, and fails when its log holds a race report.
func stopAndCheckRaces(t *testing.T, d *daemon) {
	t.Helper()
	d.stop()
	// stop consumes the exit status; put one back so the cleanup's stop
	// sees an exited daemon instead of waiting for it again.
	select {
	case d.exited <- nil:
	default:
	}
	assertNoDataRace(t, d)
}

// assertNoDataRace fails when the daemon's log holds a race report. Call it
// once the daemon has exited so the whole run is covered.
func assertNoDataRace(t *testing.T, d *daemon) {
	t.Helper()
	log := d.log()
	if i := strings.Index(log, "WARNING: DATA RACE"); i >= 0 {
		t.Errorf("the daemon (built with -race) reported a data race:\n%s", log[i:min(len(log), i+6000)])
	}
}

// errnoOf returns the errno inside err, or 0.
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return 0
}
