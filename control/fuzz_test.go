package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// socketPair returns the server end of a connected Unix socket pair; the
// other end is drained and closed at cleanup.
func socketPair(t testing.TB) *net.UnixConn {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		nc, err := net.FileConn(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		conns[i] = nc.(*net.UnixConn)
	}
	go func() { _, _ = io.Copy(io.Discard, conns[1]) }()
	t.Cleanup(func() { _ = conns[0].Close(); _ = conns[1].Close() })
	return conns[0]
}

// FuzzDispatch feeds arbitrary lines to the decoder and dispatcher: no
// panic, and exactly one well-formed response line for every line that is
// not a valid notification.
func FuzzDispatch(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`,
		`{"jsonrpc":"2.0","id":"x","method":"fs.read","params":{"path":"a.txt","offset":2,"limit":1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"fs.write","params":{"path":"b.txt","content":"hi\n"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"fs.edit","params":{"path":"a.txt","oldString":"a","newString":"b"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"fs.patch","params":{"patch":"*** Begin Patch\n*** Add File: c.txt\n+c\n*** End Patch"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"fs.move","params":{"from":"a.txt","to":"d.txt"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"fs.list","params":{"path":"."}}`,
		`{"jsonrpc":"2.0","id":7,"method":"fs.log","params":{"limit":3}}`,
		`{"jsonrpc":"2.0","id":8,"method":"session.open","params":{"name":"n"}}`,
		`{"jsonrpc":"2.0","method":"fs.stat","params":{"path":"a.txt"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"fs.stat","params":{"path":"\u0000"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"fs.read","params":{"path":"\udc80"}}`,
		`[1,2]`, `{`, `null`, `{"id":[]}`, "\xff", `{"jsonrpc":"2.0","id":1e400,"method":"x"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	env := newTestEnv(f)
	env.file(f, "a.txt", "a\nb\n")
	c := newConn(env.srv, socketPair(f), 1)
	f.Cleanup(c.finish)
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") || len(bytes.TrimSpace(line)) == 0 {
			return // the framing layer splits and skips these
		}
		if bytes.Contains(line, []byte("fs.watch")) {
			return // watches outlive the call; covered by the watch tests
		}
		out, _ := env.srv.handleLine(context.Background(), c, line)
		if out == nil {
			var fields map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(line, &fields), "only a valid notification goes unanswered: %q", line)
			_, hasID := fields["id"]
			require.False(t, hasID, "a request with an id must be answered: %q", line)
			return
		}
		require.NotContains(t, string(out), "\n", "one line per response")
		var r map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(out, &r), "response is JSON: %s", out)
		require.JSONEq(t, `"2.0"`, string(r["jsonrpc"]))
		_, hasID := r["id"]
		require.True(t, hasID, "response carries an id: %s", out)
		_, hasResult := r["result"]
		_, hasError := r["error"]
		require.True(t, hasResult != hasError, "exactly one of result and error: %s", out)
	})
}
