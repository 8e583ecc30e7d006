package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
	"github.com/dshmount/dshmount/patch"
)

func TestEdit_Outcomes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, content string
		req           provider.EditRequest
		want          string
		code          provider.Code
	}{
		{"single match", "a b c", provider.EditRequest{OldString: "b", NewString: "B"}, "a B c", ""},
		{"deletion", "a b c", provider.EditRequest{OldString: " b", NewString: ""}, "a c", ""},
		{"replace all", "x x x", provider.EditRequest{OldString: "x", NewString: "y", ReplaceAll: true}, "y y y", ""},
		{"ambiguous", "x x", provider.EditRequest{OldString: "x", NewString: "y"}, "", provider.CodeAmbiguousEdit},
		{"not found", "abc", provider.EditRequest{OldString: "zzz", NewString: "y"}, "", provider.CodeEditNotFound},
		{"empty old string", "abc", provider.EditRequest{OldString: "", NewString: "y"}, "", provider.CodeEditNotFound},
		{"CRLF old string matches LF-normalized text", "l1\r\nl2\r\n", provider.EditRequest{OldString: "l1\r\nl2", NewString: "L"}, "L\r\n", ""},
		{"LF old string matches CRLF file", "l1\r\nl2\r\n", provider.EditRequest{OldString: "l1\nl2", NewString: "M1\nM2"}, "M1\r\nM2\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, root := newTestFS(t, Options{})
			put(t, root, "f.txt", tc.content)
			tg := target(t, fs, "f.txt")
			out, err := fs.EditText(ctx, tg, tc.req, nil)
			if tc.code != "" {
				requireCode(t, err, tc.code)
				assert.Equal(t, tc.content, get(t, root, "f.txt"), "a refused edit leaves the file")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, get(t, root, "f.txt"))
			assert.Equal(t, eol.ToLF(tc.content), out.Before)
			assert.Equal(t, eol.ToLF(tc.want), out.After)
			assert.Equal(t, versionOf(t, fs, tg), out.Version)
			assert.Empty(t, tempFiles(t, root))
		})
	}
}

func TestEdit_GuardCheckedBeforeMatch(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "alpha")
	tg := target(t, fs, "f.txt")
	v := versionOf(t, fs, tg)
	put(t, root, "f.txt", "beta gamma")
	// The old string matches neither text, but the stale guard wins.
	_, err := fs.EditText(context.Background(), tg, provider.EditRequest{OldString: "nowhere", NewString: "x"}, &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	// Even a string that still matches is refused at an old version.
	_, err = fs.EditText(context.Background(), tg, provider.EditRequest{OldString: "beta", NewString: "x"}, &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	assert.Equal(t, "beta gamma", get(t, root, "f.txt"))
}

func TestEdit_MissingTargetIsStaleGuardedOrNot(t *testing.T) {
	fs, _ := newTestFS(t, Options{})
	tg := target(t, fs, "gone.txt")
	req := provider.EditRequest{OldString: "a", NewString: "b"}
	_, err := fs.EditText(context.Background(), tg, req, nil)
	requireCode(t, err, provider.CodeStaleVersion)
	_, err = fs.EditText(context.Background(), tg, req, &provider.VersionGuard{Version: "v1-0"})
	requireCode(t, err, provider.CodeStaleVersion)
	_, err = fs.EditText(context.Background(), target(t, fs, "no/dir/gone.txt"), req, nil)
	requireCode(t, err, provider.CodeStaleVersion)
}

func TestEdit_RefusesNonRegularAndNonText(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	put(t, root, "bin", "a\x00b")
	put(t, root, "latin1", "caf\xe9")
	req := provider.EditRequest{OldString: "a", NewString: "b"}
	_, err := fs.EditText(context.Background(), target(t, fs, "d"), req, nil)
	requireCode(t, err, provider.CodeNotRegularFile)
	for _, p := range []string{"bin", "latin1"} {
		_, err = fs.EditText(context.Background(), target(t, fs, p), req, nil)
		requireCode(t, err, provider.CodeNotText)
	}
	assert.Equal(t, "a\x00b", get(t, root, "bin"))
}

func TestEdit_PreAbortLeavesFileUnchanged(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "old")
	_, err := fs.EditText(cancelled(), target(t, fs, "f.txt"), provider.EditRequest{OldString: "old", NewString: "new"}, nil)
	requireCode(t, err, provider.CodeAborted)
	assert.Equal(t, "old", get(t, root, "f.txt"))
}

func TestEdit_VersionRefreshEditToEdit(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "one two three")
	tg := target(t, fs, "f.txt")
	ctx := context.Background()
	v0 := versionOf(t, fs, tg)
	first, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: "one", NewString: "1"}, &provider.VersionGuard{Version: v0})
	require.NoError(t, err)
	assert.NotEqual(t, v0, first.Version)

	// The older version no longer works.
	_, err = fs.EditText(ctx, tg, provider.EditRequest{OldString: "two", NewString: "2"}, &provider.VersionGuard{Version: v0})
	requireCode(t, err, provider.CodeStaleVersion)

	// The version the first edit returned does.
	second, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: "two", NewString: "2"}, &provider.VersionGuard{Version: first.Version})
	require.NoError(t, err)
	assert.Equal(t, "1 2 three", get(t, root, "f.txt"))
	assert.Equal(t, versionOf(t, fs, tg), second.Version)
}

func TestEdit_KeepsModeAndCRLF(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "run.sh", "#!/bin/sh\r\necho hi\r\n")
	require.NoError(t, os.Chmod(filepath.Join(root, "run.sh"), 0o750))
	out, err := fs.EditText(context.Background(), target(t, fs, "run.sh"), provider.EditRequest{OldString: "hi", NewString: "hello\nworld"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "#!/bin/sh\r\necho hello\r\nworld\r\n", get(t, root, "run.sh"))
	assert.Equal(t, "#!/bin/sh\necho hi\n", out.Before)
	assert.Equal(t, "#!/bin/sh\necho hello\nworld\n", out.After)
	st, err := os.Stat(filepath.Join(root, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), st.Mode().Perm())
}

func TestEdit_ThroughSymlinkEditsTheTarget(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "real.txt", "abc")
	require.NoError(t, os.Symlink("real.txt", filepath.Join(root, "link.txt")))
	_, err := fs.EditText(context.Background(), target(t, fs, "link.txt"), provider.EditRequest{OldString: "b", NewString: "B"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "aBc", get(t, root, "real.txt"))
	fi, err := os.Lstat(filepath.Join(root, "link.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "the link itself is kept")
}

func TestPatch_AppliesHunksOnLFText(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a\r\nb\r\nc\r\n")
	require.NoError(t, os.Chmod(filepath.Join(root, "f.txt"), 0o600))
	tg := target(t, fs, "f.txt")
	hunks := []patch.Hunk{{Line: 3, OldLines: []string{"a", "b"}, NewLines: []string{"a", "B"}}}
	out, err := fs.PatchText(context.Background(), tg, hunks, &provider.VersionGuard{Version: versionOf(t, fs, tg)})
	require.NoError(t, err)
	assert.Equal(t, "a\nb\nc\n", out.Before)
	assert.Equal(t, "a\nB\nc\n", out.After)
	assert.Equal(t, "a\r\nB\r\nc\r\n", get(t, root, "f.txt"), "CRLF restored")
	st, err := os.Stat(filepath.Join(root, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Equal(t, versionOf(t, fs, tg), out.Version)
}

func TestPatch_ParsedPatchApplies(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "one\ntwo\nthree\n")
	ops, err := patch.Parse("*** Begin Patch\n*** Update File: f.txt\n@@\n one\n-two\n+2\n*** End Patch\n")
	require.NoError(t, err)
	require.Len(t, ops, 1)
	u, ok := ops[0].(*patch.Update)
	require.True(t, ok)
	_, err = fs.PatchText(context.Background(), target(t, fs, "f.txt"), u.Hunks, nil)
	require.NoError(t, err)
	assert.Equal(t, "one\n2\nthree\n", get(t, root, "f.txt"))
}

func TestPatch_MismatchNamesLineAndStage(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a\nb\n")
	tg := target(t, fs, "f.txt")
	for _, tc := range []struct {
		hunk  patch.Hunk
		stage string
	}{
		{patch.Hunk{Line: 7, OldLines: []string{"zzz"}, NewLines: []string{"y"}}, "old lines"},
		{patch.Hunk{Line: 9, Context: "nope", HasContext: true, OldLines: []string{"a"}, NewLines: []string{"A"}}, "context anchor"},
	} {
		_, err := fs.PatchText(context.Background(), tg, []patch.Hunk{tc.hunk}, nil)
		pe := requireCode(t, err, provider.CodePatchMismatch)
		assert.Contains(t, pe.Message, "patch line")
		assert.Contains(t, pe.Message, tc.stage)
		var failure *patch.HunkFailure
		require.ErrorAs(t, err, &failure)
		assert.Equal(t, tc.hunk.Line, failure.HunkLine)
	}
	assert.Equal(t, "a\nb\n", get(t, root, "f.txt"))
}

func TestPatch_GuardAndMissingTarget(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a\n")
	tg := target(t, fs, "f.txt")
	v := versionOf(t, fs, tg)
	put(t, root, "f.txt", "a\nchanged\n")
	hunks := []patch.Hunk{{Line: 1, OldLines: []string{"nomatch"}, NewLines: []string{"x"}}}
	_, err := fs.PatchText(context.Background(), tg, hunks, &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	_, err = fs.PatchText(context.Background(), target(t, fs, "missing"), hunks, nil)
	requireCode(t, err, provider.CodeStaleVersion)
	_, err = fs.PatchText(cancelled(), tg, hunks, nil)
	requireCode(t, err, provider.CodeAborted)
}
