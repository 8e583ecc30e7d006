package control

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

const statusLine = `{"jsonrpc":"2.0","id":"after","method":"daemon.status"}`

// requireUsable checks that the connection still answers a valid request.
func requireUsable(t *testing.T, rc *rawConn) {
	t.Helper()
	r := rc.call(t, statusLine)
	require.Nil(t, r.Error, "the connection must stay usable")
	assert.JSONEq(t, `"after"`, string(r.ID))
}

func TestBadInput_EachGetsItsErrorAndTheConnectionGoesOn(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "a\n")
	tests := []struct {
		name     string
		line     string
		code     int
		fsCode   provider.Code
		id       string // expected raw id
		contains string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":`, CodeParseError, "", "null", "not valid JSON"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"daemon.status"}]`, CodeInvalidRequest, "", "null", "batch"},
		{"not an object", `"hello"`, CodeInvalidRequest, "", "null", "JSON object"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"daemon.status"}`, CodeInvalidRequest, "", "null", "id must be"},
		{"missing version", `{"id":2,"method":"daemon.status"}`, CodeInvalidRequest, "", "2", `"jsonrpc" must be "2.0"`},
		{"method not a string", `{"jsonrpc":"2.0","id":3,"method":7}`, CodeInvalidRequest, "", "3", "method"},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"fs.frobnicate"}`, CodeMethodNotFound, "", "4", "fs.frobnicate"},
		{"wrong param type", `{"jsonrpc":"2.0","id":5,"method":"fs.read","params":{"path":"a.txt","offset":"one"}}`, CodeInvalidParams, "", "5", "offset must be an integer"},
		{"fractional offset", `{"jsonrpc":"2.0","id":6,"method":"fs.read","params":{"path":"a.txt","offset":1.5}}`, CodeInvalidParams, "", "6", "offset"},
		{"zero limit", `{"jsonrpc":"2.0","id":7,"method":"fs.read","params":{"path":"a.txt","limit":0}}`, CodeInvalidParams, "", "7", "limit"},
		{"params array", `{"jsonrpc":"2.0","id":8,"method":"fs.read","params":["a.txt"]}`, CodeInvalidParams, "", "8", "params must be a JSON object"},
		{"unknown field", `{"jsonrpc":"2.0","id":9,"method":"fs.edit","params":{"path":"a.txt","old_string":"a"}}`, CodeInvalidParams, "", "9", "old_string"},
		{"missing path", `{"jsonrpc":"2.0","id":10,"method":"fs.read","params":{}}`, CodeInvalidParams, provider.CodeInvalidArgument, "10", "path is required"},
		{"NUL in path", `{"jsonrpc":"2.0","id":11,"method":"fs.write","params":{"path":"a\u0000b","content":"x"}}`, CodeInvalidParams, provider.CodeInvalidArgument, "11", "NUL"},
		{"invalid UTF-8 content", "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"fs.write\",\"params\":{\"path\":\"u.txt\",\"content\":\"\xff\xfe\"}}", CodeInvalidParams, "", "12", "invalid UTF-8"},
		{"lone surrogate", `{"jsonrpc":"2.0","id":13,"method":"fs.write","params":{"path":"u.txt","content":"\udc80"}}`, CodeInvalidParams, "", "13", "surrogate"},
		{"outside the workspace", `{"jsonrpc":"2.0","id":14,"method":"fs.read","params":{"path":"../../etc/passwd"}}`, CodeFilesystem, provider.CodeSandboxDenied, "14", ""},
		{"string id", `{"jsonrpc":"2.0","id":"s-1","method":"nope"}`, CodeMethodNotFound, "", `"s-1"`, "nope"},
		{"empty oldString", `{"jsonrpc":"2.0","id":15,"method":"fs.edit","params":{"path":"a.txt","oldString":"","newString":"x"}}`, CodeInvalidParams, "", "15", "oldString"},
		{"negative watch since", `{"jsonrpc":"2.0","id":16,"method":"fs.watch","params":{"since":-5}}`, CodeInvalidParams, provider.CodeInvalidArgument, "16", "since must be"},
	}
	// data.field of the errors about one parameter.
	fields := map[string]string{"wrong param type": "offset", "fractional offset": "offset", "unknown field": "old_string", "negative watch since": "since"}
	rc := env.raw(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rc.call(t, tt.line)
			require.NotNil(t, r.Error, "expected an error")
			assert.Nil(t, r.Result)
			assert.Equal(t, tt.code, r.Error.Code, r.Error.Message)
			assert.JSONEq(t, tt.id, string(r.ID))
			assert.Contains(t, r.Error.Message, tt.contains)
			if tt.fsCode != "" {
				require.NotNil(t, r.Error.Data)
				assert.Equal(t, tt.fsCode, r.Error.Data.Code)
			}
			if tt.code == CodeInvalidParams { // every invalid argument has its FS_ code
				require.NotNil(t, r.Error.Data, "data of %s", r.Error.Message)
				assert.Equal(t, provider.CodeInvalidArgument, r.Error.Data.Code)
				assert.Equal(t, fields[tt.name], r.Error.Data.Field)
			}
			requireUsable(t, rc)
		})
	}
	_, exists := env.content(t, "u.txt")
	assert.False(t, exists, "invalid text never reaches the disk")
}

func TestBadInput_SurrogatePairIsValid(t *testing.T) {
	env := newTestEnv(t)
	rc := env.raw(t)
	r := rc.call(t, `{"jsonrpc":"2.0","id":1,"method":"fs.write","params":{"path":"e.txt","content":"\ud83d\ude00 \\udc80"}}`)
	require.Nil(t, r.Error)
	got, _ := env.content(t, "e.txt")
	assert.Equal(t, "😀 \\udc80", got)
}

func TestBadInput_OversizeLineRefusedConnectionUsable(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.MaxRequestBytes = 4096 })
	rc := env.raw(t)
	big := `{"jsonrpc":"2.0","id":1,"method":"fs.write","params":{"path":"big.txt","content":"` + strings.Repeat("x", 1<<20) + `"}}`
	r := rc.call(t, big)
	require.NotNil(t, r.Error)
	assert.Equal(t, CodeInvalidRequest, r.Error.Code)
	assert.Contains(t, r.Error.Message, "request line exceeds 4096 bytes")
	assert.JSONEq(t, "null", string(r.ID))
	requireUsable(t, rc)
	_, exists := env.content(t, "big.txt")
	assert.False(t, exists)
	// A line exactly at the bound is accepted.
	pad := 4096 - len(`{"jsonrpc":"2.0","id":2,"method":"daemon.status","x":""}`)
	r = rc.call(t, `{"jsonrpc":"2.0","id":2,"method":"daemon.status","x":"`+strings.Repeat("y", pad)+`"}`)
	require.Nil(t, r.Error)
}

func TestBadInput_NotificationGetsNoResponse(t *testing.T) {
	env := newTestEnv(t)
	rc := env.raw(t)
	rc.send(t, `{"jsonrpc":"2.0","method":"fs.frobnicate"}`)
	rc.send(t, `{"jsonrpc":"2.0","method":"session.open","params":{"name":"by-notification"}}`)
	r := rc.call(t, statusLine)
	assert.JSONEq(t, `"after"`, string(r.ID), "the notifications were not answered")
}

func TestBadInput_PanicIsRecovered(t *testing.T) {
	env := newTestEnv(t)
	env.hooks.BeforeCommitOp = func(int) { panic("boom") }
	rc := env.raw(t)
	r := rc.call(t, `{"jsonrpc":"2.0","id":1,"method":"fs.patch","params":{"patch":"*** Begin Patch\n*** Add File: p.txt\n+x\n*** End Patch"}}`)
	require.NotNil(t, r.Error)
	assert.Equal(t, CodeInternalError, r.Error.Code)
	requireUsable(t, rc)
}

func TestPipelined_ResponsesCarryTheirIDs(t *testing.T) {
	env := newTestEnv(t)
	rc := env.raw(t)
	var batch strings.Builder
	for i := range 20 {
		batch.WriteString(`{"jsonrpc":"2.0","id":` + jsonInt(i) + `,"method":"fs.stat","params":{"path":"x` + jsonInt(i) + `"}}` + "\n")
	}
	_, err := rc.c.Write([]byte(batch.String()))
	require.NoError(t, err)
	seen := map[int]bool{}
	for range 20 {
		r := rc.recv(t)
		require.Nil(t, r.Error)
		var id int
		require.NoError(t, json.Unmarshal(r.ID, &id))
		var st StatResult
		require.NoError(t, json.Unmarshal(r.Result, &st))
		assert.Equal(t, "x"+jsonInt(id), st.DisplayPath, "the response matches its request")
		seen[id] = true
	}
	assert.Len(t, seen, 20)
}

func jsonInt(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestCheckPeer_AllowsOwnerRootAndListed(t *testing.T) {
	tests := []struct {
		name  string
		uid   uint32
		allow []uint32
		ok    bool
	}{
		{"daemon's uid", 1000, nil, true},
		{"root", 0, nil, true},
		{"stranger", 1001, nil, false},
		{"listed", 1001, []uint32{7, 1001}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPeer(&unix.Ucred{Pid: 99, Uid: tt.uid}, 1000, tt.allow)
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "uid 1001 (pid 99) may not use this control socket")
			assert.Contains(t, err.Error(), "--allow-uid 1001")
		})
	}
	assert.Error(t, checkPeer(nil, 1000, nil))
}

func TestClient_RefusesInvalidUTF8BeforeSending(t *testing.T) {
	env := newTestEnv(t)
	_, err := env.client(t).Write(context.Background(), WriteParams{Path: "bad.txt", Content: "ok\xff"})
	require.ErrorIs(t, err, provider.ErrNotText)
	_, exists := env.content(t, "bad.txt")
	assert.False(t, exists)
}

func TestLineReader_Frames(t *testing.T) {
	lr := newLineReader(strings.NewReader("a\n\nbbbbbbbbbb\ncc\ndd"), 4)
	var got []string
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			break
		}
		if tooLong {
			got = append(got, "<too long>")
			continue
		}
		got = append(got, string(line))
	}
	assert.Equal(t, []string{"a", "", "<too long>", "cc", "dd"}, got)
}
