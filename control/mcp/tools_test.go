package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
)

func TestToolsList_EveryToolHasAnInputSchemaAndGuardDocs(t *testing.T) {
	d := startDaemon(t)
	a := d.connect(t, "lister")
	res, err := a.cs.ListTools(context.Background(), nil)
	require.NoError(t, err)

	required := map[string][]string{
		mcp.ToolRead:         {"path"},
		mcp.ToolWrite:        {"path", "content"},
		mcp.ToolEdit:         {"path", "old_string", "new_string"},
		mcp.ToolApplyPatch:   {"patch"},
		mcp.ToolMove:         {"from", "to"},
		mcp.ToolDelete:       {"path"},
		mcp.ToolList:         {"path"},
		mcp.ToolStat:         {"path"},
		mcp.ToolBranchRebase: {"name"},
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		require.NoError(t, json.Unmarshal(b, &schema), tool.Name)
		assert.Equal(t, "object", schema.Type, tool.Name)
		assert.ElementsMatch(t, required[tool.Name], schema.Required, "required arguments of %s", tool.Name)
		for _, r := range required[tool.Name] {
			assert.Contains(t, schema.Properties, r, tool.Name)
		}
		assert.NotNil(t, tool.OutputSchema, "%s has an output schema", tool.Name)
		assert.Contains(t, tool.Description, "FS_STALE_VERSION", "%s explains the codes", tool.Name)
	}
	assert.ElementsMatch(t, mcp.ToolNames, names)
	for _, name := range []string{mcp.ToolWrite, mcp.ToolEdit, mcp.ToolApplyPatch, mcp.ToolMove, mcp.ToolDelete} {
		for _, tool := range res.Tools {
			if tool.Name == name {
				assert.Contains(t, tool.Description, "you must read a file", "%s states the guard", name)
			}
		}
	}
}

func TestRead_NumberedLinesFooterAndWindow(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "src/main.go", "package main\n\nfunc main() {}\n")
	a := d.connect(t, "reader")

	text := a.ok(t, mcp.ToolRead, map[string]any{"path": "src/main.go"})
	assert.Equal(t, "     1\tpackage main\n     2\t\n     3\tfunc main() {}\n(lines 1-3 of 3 in src/main.go; totalLines: 3)", text)

	res := a.call(t, mcp.ToolRead, map[string]any{"path": "src/main.go", "offset": 2, "limit": 1})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, "     2\t\n(lines 2-2 of 3 in src/main.go; totalLines: 3; read on with offset=3)", textOf(res))
	var out mcp.ReadOutput
	structured(t, res, &out)
	assert.Equal(t, mcp.ReadOutput{Path: "src/main.go", Version: out.Version, FirstLine: 2, LastLine: 2, TotalLines: 3}, out)
	assert.NotEmpty(t, out.Version)

	assert.True(t, strings.HasPrefix(a.fail(t, mcp.ToolRead, map[string]any{"path": "missing.txt"}), "FS_NOT_FOUND: "))
}

func TestEdit_AfterReadSucceeds(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\ntwo\nthree\n")
	a := d.connect(t, "editor")

	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	res := a.call(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "two", "new_string": "TWO"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "Edited a.txt: replaced 1 occurrence of old_string.")
	assert.Contains(t, textOf(res), "     2\tTWO\n")
	assert.Equal(t, "one\nTWO\nthree\n", d.readFile(t, "a.txt"))
	var out mcp.EditOutput
	structured(t, res, &out)
	assert.Equal(t, 1, out.Replacements)

	// The edit refreshed the observation: a second edit needs no new read.
	text := a.ok(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "e", "new_string": "E", "replace_all": true})
	assert.Contains(t, text, "replaced 3 occurrences")
	assert.Equal(t, "onE\nTWO\nthrEE\n", d.readFile(t, "a.txt"))
}

func TestEdit_WithoutReadIsNotObserved(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	a := d.connect(t, "editor")

	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	assert.True(t, strings.HasPrefix(text, "FS_NOT_OBSERVED: "), text)
	assert.Equal(t, "one\n", d.readFile(t, "a.txt"))
}

func TestEdit_ObservationsArePerConnection(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	reader, other := d.connect(t, "reader"), d.connect(t, "other")
	require.NotEqual(t, reader.session, other.session)

	reader.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	text := other.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	assert.True(t, strings.HasPrefix(text, "FS_NOT_OBSERVED: "), text)
	reader.ok(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
}

func TestEdit_StaleAfterOutOfBandChangeSaysWhoChangedIt(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, d *testDaemon)
		want   []string
	}{
		{
			name:   "direct write to the backing file",
			change: func(t *testing.T, d *testDaemon) { d.writeFile(t, "a.txt", "one\ntwo changed\n") },
			want:   []string{"by a change outside dshmount"},
		},
		{
			name: "another session over the socket",
			change: func(t *testing.T, d *testDaemon) {
				ctx := context.Background()
				id, err := d.admin.OpenSession(ctx, "other-agent")
				require.NoError(t, err)
				_, err = d.admin.Read(ctx, control.ReadParams{Path: "a.txt", Session: id})
				require.NoError(t, err)
				_, err = d.admin.Edit(ctx, control.EditParams{Path: "a.txt", OldString: "two", NewString: "2", Session: id})
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.admin.CloseSession(ctx, id) })
			},
			want: []string{`by an edit from session `, `("other-agent") over the socket`, "just now"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t)
			d.writeFile(t, "a.txt", "one\ntwo\n")
			a := d.connect(t, "agent")
			a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
			tt.change(t, d)
			changed := d.readFile(t, "a.txt")

			text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
			assert.True(t, strings.HasPrefix(text, "FS_STALE_VERSION: a.txt changed since you read it ("), text)
			for _, w := range tt.want {
				assert.Contains(t, text, w)
			}
			assert.Contains(t, text, "read it again")
			assert.Equal(t, changed, d.readFile(t, "a.txt"), "a refused edit leaves the file alone")

			// Reading again authorizes the edit.
			a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
			a.ok(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
		})
	}
}

func TestEdit_StaleAfterOwnWriteAndOutOfBandChangeIsNotBlamedOnSelf(t *testing.T) {
	d := startDaemon(t)
	a := d.connect(t, "agent")
	a.ok(t, mcp.ToolWrite, map[string]any{"path": "new.txt", "content": "fresh\n"})
	d.writeFile(t, "new.txt", "changed behind our back\n")

	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "new.txt", "old_string": "fresh", "new_string": "x"})
	assert.True(t, strings.HasPrefix(text, "FS_STALE_VERSION: new.txt changed since you read it (by a change outside dshmount"), text)
}

func TestWrite_CreatesUnseenButRefusesToOverwriteUnread(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "exists.txt", "old\n")
	a := d.connect(t, "writer")

	assert.Equal(t, "Created dir/new.txt (2 lines).", a.ok(t, mcp.ToolWrite, map[string]any{"path": "dir/new.txt", "content": "a\nb\n"}))
	assert.Equal(t, "a\nb\n", d.readFile(t, "dir/new.txt"))

	text := a.fail(t, mcp.ToolWrite, map[string]any{"path": "exists.txt", "content": "new\n"})
	assert.True(t, strings.HasPrefix(text, "FS_NOT_OBSERVED: "), text)
	assert.Equal(t, "old\n", d.readFile(t, "exists.txt"))

	a.ok(t, mcp.ToolRead, map[string]any{"path": "exists.txt"})
	assert.Equal(t, "Replaced the content of exists.txt (1 lines, was 1 lines).",
		a.ok(t, mcp.ToolWrite, map[string]any{"path": "exists.txt", "content": "new\n"}))
	assert.Equal(t, "new\n", d.readFile(t, "exists.txt"))
}

func TestStat_DoesNotAuthorizeAnEdit(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	a := d.connect(t, "agent")

	text := a.ok(t, mcp.ToolStat, map[string]any{"path": "a.txt"})
	assert.True(t, strings.HasPrefix(text, "a.txt: file, 4 bytes, version "), text)
	assert.Equal(t, "missing does not exist.", a.ok(t, mcp.ToolStat, map[string]any{"path": "missing"}))

	text = a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	assert.True(t, strings.HasPrefix(text, "FS_NOT_OBSERVED: "), text)
}

func TestMoveDeleteList_FollowTheGuard(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "a\n")
	d.writeFile(t, "b.txt", "b\n")
	d.writeFile(t, "sub/c.txt", "c\n")
	a := d.connect(t, "agent")

	assert.Equal(t, ".: 3 entries\na.txt\t2 bytes\nb.txt\t2 bytes\nsub/", a.ok(t, mcp.ToolList, map[string]any{"path": "."}))

	assert.True(t, strings.HasPrefix(a.fail(t, mcp.ToolMove, map[string]any{"from": "a.txt", "to": "moved.txt"}), "FS_NOT_OBSERVED: "))
	assert.True(t, strings.HasPrefix(a.fail(t, mcp.ToolDelete, map[string]any{"path": "b.txt"}), "FS_NOT_OBSERVED: "))
	assert.True(t, d.exists("a.txt") && d.exists("b.txt"))

	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	a.ok(t, mcp.ToolRead, map[string]any{"path": "b.txt"})
	assert.Equal(t, "Moved a.txt to moved.txt.", a.ok(t, mcp.ToolMove, map[string]any{"from": "a.txt", "to": "moved.txt"}))
	assert.Equal(t, "Deleted b.txt.", a.ok(t, mcp.ToolDelete, map[string]any{"path": "b.txt"}))
	assert.False(t, d.exists("a.txt"))
	assert.False(t, d.exists("b.txt"))
	assert.Equal(t, "a\n", d.readFile(t, "moved.txt"))
	// The moved file was produced by this session, so it can be edited.
	a.ok(t, mcp.ToolEdit, map[string]any{"path": "moved.txt", "old_string": "a", "new_string": "A"})
}

func TestApplyPatch_AddsUpdatesAndMoves(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "alpha\nbeta\n")
	d.writeFile(t, "old/b.txt", "one\ntwo\n")
	d.writeFile(t, "gone.txt", "bye\n")
	a := d.connect(t, "patcher")
	for _, p := range []string{"a.txt", "old/b.txt", "gone.txt"} {
		a.ok(t, mcp.ToolRead, map[string]any{"path": p})
	}
	patch := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: docs/new.md",
		"+hello",
		"*** Update File: a.txt",
		"@@",
		" alpha",
		"-beta",
		"+BETA",
		"*** Update File: old/b.txt",
		"*** Move to: new/b.txt",
		"@@",
		"-one",
		"+ONE",
		"*** Delete File: gone.txt",
		"*** End Patch",
	}, "\n")
	res := a.call(t, mcp.ToolApplyPatch, map[string]any{"patch": patch})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, strings.Join([]string{
		"Patch applied: 4 of 4 operations.",
		"- add docs/new.md: applied",
		"- update a.txt: applied",
		"- move old/b.txt -> new/b.txt (with update): applied",
		"- delete gone.txt: applied",
	}, "\n"), textOf(res))
	var out mcp.PatchOutput
	structured(t, res, &out)
	assert.True(t, out.Complete)
	require.Len(t, out.Operations, 4)

	assert.Equal(t, "hello\n", d.readFile(t, "docs/new.md"))
	assert.Equal(t, "alpha\nBETA\n", d.readFile(t, "a.txt"))
	assert.Equal(t, "ONE\ntwo\n", d.readFile(t, "new/b.txt"))
	assert.False(t, d.exists("old/b.txt"))
	assert.False(t, d.exists("gone.txt"))
}

func TestApplyPatch_RefusalsAppliesNothing(t *testing.T) {
	tests := []struct {
		name     string
		patch    string
		wantCode string
	}{
		{"syntax error", "*** Begin Patch\n*** Frobnicate File: a.txt\n*** End Patch", "FS_INVALID_ARGUMENT"},
		{"update of an unread file", "*** Begin Patch\n*** Add File: n.txt\n+x\n*** Update File: a.txt\n@@\n-one\n+1\n*** End Patch", "FS_NOT_OBSERVED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := startDaemon(t)
			d.writeFile(t, "a.txt", "one\n")
			a := d.connect(t, "patcher")
			text := a.fail(t, mcp.ToolApplyPatch, map[string]any{"patch": tt.patch})
			assert.True(t, strings.HasPrefix(text, tt.wantCode+": "), text)
			assert.Equal(t, "one\n", d.readFile(t, "a.txt"))
			assert.False(t, d.exists("n.txt"), "nothing is applied")
		})
	}
}

func TestBadArguments_AreToolErrorsAndTheServerKeepsServing(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	a := d.connect(t, "clumsy")
	tests := []struct {
		tool string
		args any
		want string
	}{
		{mcp.ToolRead, map[string]any{}, "path"},
		{mcp.ToolRead, map[string]any{"path": 5}, "path"},
		{mcp.ToolRead, map[string]any{"path": "a.txt", "offset": 0}, "offset"},
		{mcp.ToolRead, map[string]any{"path": "a.txt", "limit": "ten"}, "limit"},
		{mcp.ToolRead, map[string]any{"file_path": "a.txt"}, "file_path"},
		{mcp.ToolWrite, map[string]any{"path": "x.txt"}, "content"},
		{mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": 1, "new_string": "x"}, "old_string"},
		{mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "", "new_string": "x"}, "old_string is empty"},
		{mcp.ToolMove, map[string]any{"from": "a.txt"}, "to"},
		{mcp.ToolApplyPatch, map[string]any{"patch": []string{"x"}}, "patch"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.tool, tt.args), func(t *testing.T) {
			text := a.fail(t, tt.tool, tt.args)
			assert.True(t, strings.HasPrefix(text, "FS_INVALID_ARGUMENT: "), text)
			assert.Contains(t, text, tt.want)
			// The server goes on serving this connection.
			assert.Contains(t, a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"}), "     1\tone")
		})
	}
	assert.False(t, d.exists("x.txt"))
	assert.Equal(t, "one\n", d.readFile(t, "a.txt"))
}

func TestSession_ClosesWhenTheClientGoesAway(t *testing.T) {
	d := startDaemon(t)
	before := d.sessionIDs(t)
	a := d.connect(t, "short-lived")
	a.ok(t, mcp.ToolStat, map[string]any{"path": "."})
	assert.Contains(t, d.sessionIDs(t), a.session, "the connection's session is open while it serves")

	a.disconnect(t)
	assert.NotContains(t, d.sessionIDs(t), a.session, "the session is closed before the server returns")
	// The control connection's own implicit session (used by session-less
	// stats) closes when the daemon notices the hang-up.
	assert.Eventually(t, func() bool { return assert.ObjectsAreEqual(before, d.sessionIDs(t)) },
		10*time.Second, 10*time.Millisecond, "no session is left behind")
}

// partialPatch answers fs.patch with a commit that stopped at its second
// operation (the daemon produces this when a file changes between the
// preflight and the commit, which only in-package hooks can time), and
// forwards every other call to the real daemon.
type partialPatch struct {
	*control.Client
	stalePath string
}

func (p partialPatch) Patch(context.Context, control.PatchParams) (*control.PatchResult, error) {
	return &control.PatchResult{Complete: false, Operations: []control.PatchOpResult{
		{Kind: "add", Path: "new.txt", Status: control.PatchApplied, Version: "v1"},
		{Kind: "update", Path: p.stalePath, Status: control.PatchFailed,
			Error: &control.ErrorData{Code: "FS_STALE_VERSION", Path: p.stalePath, Message: "changed"}},
		{Kind: "delete", Path: "old.txt", Status: control.PatchNotRun},
	}}, nil
}

func TestApplyPatch_PartialCommitIsAReportNotAnError(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "b.txt", "b\n")
	a := d.connectVia(t, "patcher", func(c *control.Client) mcp.Daemon { return partialPatch{Client: c, stalePath: "b.txt"} })
	a.ok(t, mcp.ToolRead, map[string]any{"path": "b.txt"})
	d.writeFile(t, "b.txt", "changed elsewhere\n")

	res := a.call(t, mcp.ToolApplyPatch, map[string]any{"patch": "*** Begin Patch\n*** End Patch"})
	require.False(t, res.IsError, "a stopped commit is reported, not failed: %s", textOf(res))
	text := textOf(res)
	assert.True(t, strings.HasPrefix(text, "Patch partly applied: the commit stopped after 1 of 3 operations."), text)
	assert.Contains(t, text, "- add new.txt: applied\n")
	assert.Contains(t, text, "- update b.txt: failed: FS_STALE_VERSION: b.txt changed since you read it (by a change outside dshmount")
	assert.Contains(t, text, "- delete old.txt: not-run")
	var out mcp.PatchOutput
	structured(t, res, &out)
	assert.False(t, out.Complete)
	require.Len(t, out.Operations, 3)
	assert.Equal(t, []string{"applied", "failed", "not-run"},
		[]string{out.Operations[0].Status, out.Operations[1].Status, out.Operations[2].Status})
}

func TestRead_TruncatedByBytesSaysWhereToReadOn(t *testing.T) {
	d := startDaemon(t)
	line := strings.Repeat("x", 199)
	d.writeFile(t, "big.txt", strings.Repeat(line+"\n", 5000))
	a := d.connect(t, "reader")

	res := a.call(t, mcp.ToolRead, map[string]any{"path": "big.txt"})
	require.False(t, res.IsError, textOf(res))
	var out mcp.ReadOutput
	structured(t, res, &out)
	require.True(t, out.TruncatedByBytes)
	require.Less(t, out.LastLine, 2000, "the byte cap cut the default window short")
	assert.Equal(t, 5000, out.TotalLines)
	footer := fmt.Sprintf("(lines 1-%d of 5000 in big.txt; totalLines: 5000; truncated by bytes", out.LastLine)
	assert.Contains(t, textOf(res), footer)
	assert.True(t, strings.HasSuffix(textOf(res), fmt.Sprintf("read on with offset=%d)", out.LastLine+1)), textOf(res))

	text := a.ok(t, mcp.ToolRead, map[string]any{"path": "big.txt", "offset": 5000})
	assert.Equal(t, fmt.Sprintf("%6d\t%s\n(lines 5000-5000 of 5000 in big.txt; totalLines: 5000)", 5000, line), text)
	assert.Equal(t, "(no lines: offset 6000 is past the end of big.txt; totalLines: 5000)",
		a.ok(t, mcp.ToolRead, map[string]any{"path": "big.txt", "offset": 6000}))
	d.writeFile(t, "empty.txt", "")
	assert.Equal(t, "(empty.txt is empty; totalLines: 0)", a.ok(t, mcp.ToolRead, map[string]any{"path": "empty.txt"}))
}

// TestTools_ArgumentErrorsAreForPeople pins the wording of bad arguments:
// no validator internals (reflect values, float formatting).
func TestTools_ArgumentErrorsAreForPeople(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	a := d.connect(t, "clumsy")
	tests := []struct {
		tool string
		args any
		want string
	}{
		{mcp.ToolRead, map[string]any{"path": nil}, `invalid arguments for read: "path" must be a string, not null. Usage: `},
		{mcp.ToolRead, map[string]any{"path": "a.txt", "offset": 0}, `invalid arguments for read: "offset" must be at least 1, not 0. Usage: `},
		{mcp.ToolRead, map[string]any{"path": "a.txt", "limit": "ten"}, `"limit" must be an integer, not the string "ten"`},
		{mcp.ToolRead, map[string]any{}, `"path" is required`},
		{mcp.ToolRead, map[string]any{"file_path": "a.txt"}, `unknown argument "file_path"; the arguments are limit, offset, path`},
	}
	for _, tt := range tests {
		text := a.fail(t, tt.tool, tt.args)
		assert.True(t, strings.HasPrefix(text, "FS_INVALID_ARGUMENT: "), text)
		assert.Contains(t, text, tt.want)
		assert.NotContains(t, text, "reflect")
		assert.NotContains(t, text, ".000000")
	}
}

// TestMCP_StartedInASubdirectoryBlamesTheRightParty: a server started in a
// subdirectory of the workspace (Claude Code starts servers in the project
// directory) names who made the change a stale refusal is about, as one
// started at the root does, and its list tool does not claim "." is the
// workspace root.
func TestMCP_StartedInASubdirectoryBlamesTheRightParty(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "sub/a.txt", "one\ntwo\n")
	d.cwd = "sub"
	a := d.connect(t, "agent")
	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	ctx := context.Background()
	id, err := d.admin.OpenSession(ctx, "other-agent")
	require.NoError(t, err)
	defer func() { _ = d.admin.CloseSession(ctx, id) }()
	_, err = d.admin.Read(ctx, control.ReadParams{Path: "sub/a.txt", Session: id})
	require.NoError(t, err)
	_, err = d.admin.Edit(ctx, control.EditParams{Path: "sub/a.txt", OldString: "two", NewString: "2", Session: id})
	require.NoError(t, err)

	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	assert.True(t, strings.HasPrefix(text, "FS_STALE_VERSION: sub/a.txt changed since you read it ("), text)
	assert.Contains(t, text, `("other-agent") over the socket`)
	assert.NotContains(t, text, "outside dshmount")

	res, err := a.cs.ListTools(ctx, nil)
	require.NoError(t, err)
	for _, tool := range res.Tools {
		assert.NotContains(t, tool.Description, `"." is the workspace root`, tool.Name)
		if tool.Name == mcp.ToolList {
			assert.Contains(t, tool.Description, `"." is sub, the directory this server was started in`)
		}
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "relative to the workspace root", tool.Name)
	}
}
