// Package providertest is the conformance suite of the provider.FileSystem
// contract: every backend (the local workspace, the rule view, a branch)
// runs Run from its own tests.
package providertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// Subject is one file system under test and the host directory whose
// contents it shows: files placed under Root out of band (including
// symlinks, which the contract has no call for) are visible through FS.
type Subject struct {
	FS   provider.FileSystem
	Root string
}

// Run runs the conformance suite; newSubject returns a fresh, empty
// subject for each subtest.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newSubject(t))
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, s Subject)
}{
	{"ReadReturnsPlacedText", testRead},
	{"WriteCreatesThenReplacesAtVersion", testWriteVersion},
	{"WriteRefusesStaleVersion", testWriteStale},
	{"CreateIfAbsentRefusesExisting", testCreateExclusive},
	{"EditReplacesOneMatch", testEdit},
	{"EditRefusesStaleVersionAndMissingMatch", testEditErrors},
	{"PatchAppliesHunks", testPatch},
	{"MovePublishesDestinationAndRemovesSource", testMove},
	{"MoveRefusesStaleSource", testMoveStale},
	{"DeleteRemovesFileAndRefusesStale", testDelete},
	{"ListDirReportsNamesInOrderWithSymlinks", testListDir},
	{"MissingFileReadIsNotFoundChangeIsStale", testNotFound},
	{"ReadOfDirectoryIsNotRegularFile", testReadDirectory},
	{"PathsEscapingTheRootAreRefused", testEscape},
	{"CRLFRoundTrips", testCRLF},
}

func ctx() context.Context { return context.Background() }

func put(t *testing.T, s Subject, rel, content string) {
	t.Helper()
	p := filepath.Join(s.Root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func resolve(t *testing.T, s Subject, rel string) provider.Target {
	t.Helper()
	tg, err := s.FS.Resolve(ctx(), rel, provider.ResolveOptions{})
	require.NoError(t, err, "resolve %s", rel)
	return tg
}

func read(t *testing.T, s Subject, rel string) string {
	t.Helper()
	text, err := s.FS.ReadText(ctx(), resolve(t, s, rel))
	require.NoError(t, err, "read %s", rel)
	return text
}

func version(t *testing.T, s Subject, rel string) provider.Version {
	t.Helper()
	info, err := s.FS.Stat(ctx(), resolve(t, s, rel))
	require.NoError(t, err)
	require.NotNil(t, info, "%s must exist", rel)
	require.NotEmpty(t, info.Version)
	return info.Version
}

func absent(t *testing.T, s Subject, rel string) {
	t.Helper()
	info, err := s.FS.Stat(ctx(), resolve(t, s, rel))
	require.NoError(t, err)
	require.Nil(t, info, "%s must be absent", rel)
}

func requireCode(t *testing.T, err error, code provider.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, provider.CodeOf(err), "error: %v", err)
}

func testRead(t *testing.T, s Subject) {
	put(t, s, "a/b.txt", "hello\n")
	require.Equal(t, "hello\n", read(t, s, "a/b.txt"))
	info, err := s.FS.Stat(ctx(), resolve(t, s, "a/b.txt"))
	require.NoError(t, err)
	require.NotNil(t, info)
	require.Equal(t, provider.TypeFile, info.Type)
	require.EqualValues(t, 6, info.Size)
	b, err := s.FS.ReadBytes(ctx(), resolve(t, s, "a/b.txt"), 100)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(b))
	_, err = s.FS.ReadBytes(ctx(), resolve(t, s, "a/b.txt"), 3)
	requireCode(t, err, provider.CodeTooLarge)
}

func testWriteVersion(t *testing.T, s Subject) {
	tg := resolve(t, s, "w.txt")
	out, err := s.FS.WriteText(ctx(), tg, "one\n", nil)
	require.NoError(t, err)
	require.Equal(t, provider.OpCreate, out.Operation)
	require.Nil(t, out.Before)
	require.Equal(t, out.Version, version(t, s, "w.txt"), "the outcome's version is the file's")
	out2, err := s.FS.WriteText(ctx(), tg, "two\n", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: out.Version})
	require.NoError(t, err)
	require.Equal(t, provider.OpUpdate, out2.Operation)
	require.NotNil(t, out2.Before)
	require.Equal(t, "one\n", *out2.Before)
	require.NotEqual(t, out.Version, out2.Version, "other bytes, another version")
	require.Equal(t, "two\n", read(t, s, "w.txt"))
}

func testWriteStale(t *testing.T, s Subject) {
	put(t, s, "w.txt", "one\n")
	v := version(t, s, "w.txt")
	put(t, s, "w.txt", "changed out of band\n")
	_, err := s.FS.WriteText(ctx(), resolve(t, s, "w.txt"), "two\n", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	require.Equal(t, "changed out of band\n", read(t, s, "w.txt"))
	_, err = s.FS.WriteText(ctx(), resolve(t, s, "missing.txt"), "x", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	absent(t, s, "missing.txt")
}

func testCreateExclusive(t *testing.T, s Subject) {
	create := &provider.WriteIntent{Kind: provider.CreateIfAbsent}
	_, err := s.FS.WriteText(ctx(), resolve(t, s, "new.txt"), "first\n", create)
	require.NoError(t, err)
	_, err = s.FS.WriteText(ctx(), resolve(t, s, "new.txt"), "second\n", create)
	requireCode(t, err, provider.CodeNotObserved)
	require.Equal(t, "first\n", read(t, s, "new.txt"))
}

func testEdit(t *testing.T, s Subject) {
	put(t, s, "e.txt", "alpha\nbeta\n")
	v := version(t, s, "e.txt")
	out, err := s.FS.EditText(ctx(), resolve(t, s, "e.txt"), provider.EditRequest{OldString: "beta", NewString: "gamma"}, &provider.VersionGuard{Version: v})
	require.NoError(t, err)
	require.Equal(t, "alpha\nbeta\n", out.Before)
	require.Equal(t, "alpha\ngamma\n", out.After)
	require.Equal(t, out.Version, version(t, s, "e.txt"))
	require.Equal(t, "alpha\ngamma\n", read(t, s, "e.txt"))
}

func testEditErrors(t *testing.T, s Subject) {
	put(t, s, "e.txt", "x\nx\n")
	v := version(t, s, "e.txt")
	tg := resolve(t, s, "e.txt")
	_, err := s.FS.EditText(ctx(), tg, provider.EditRequest{OldString: "x", NewString: "y"}, &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeAmbiguousEdit)
	_, err = s.FS.EditText(ctx(), tg, provider.EditRequest{OldString: "zzz", NewString: "y"}, nil)
	requireCode(t, err, provider.CodeEditNotFound)
	put(t, s, "e.txt", "x\n")
	_, err = s.FS.EditText(ctx(), tg, provider.EditRequest{OldString: "x", NewString: "y"}, &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	require.Equal(t, "x\n", read(t, s, "e.txt"))
}

func testPatch(t *testing.T, s Subject) {
	put(t, s, "p.txt", "a\nb\nc\n")
	hunks := []patch.Hunk{{Line: 1, OldLines: []string{"a", "b", "c"}, NewLines: []string{"a", "B", "c"}}}
	out, err := s.FS.PatchText(ctx(), resolve(t, s, "p.txt"), hunks, &provider.VersionGuard{Version: version(t, s, "p.txt")})
	require.NoError(t, err)
	require.Equal(t, "a\nB\nc\n", out.After)
	require.Equal(t, "a\nB\nc\n", read(t, s, "p.txt"))
}

func testMove(t *testing.T, s Subject) {
	put(t, s, "src.txt", "moved\n")
	out, err := s.FS.MoveFile(ctx(), resolve(t, s, "src.txt"), resolve(t, s, "dir/dst.txt"), provider.MoveOptions{
		ExpectedSource:      &provider.VersionGuard{Version: version(t, s, "src.txt")},
		ExpectedDestination: &provider.WriteIntent{Kind: provider.CreateIfAbsent},
	})
	require.NoError(t, err)
	require.True(t, out.SourceDeleted)
	require.Equal(t, provider.OpCreate, out.Destination.Operation)
	require.Equal(t, "moved\n", read(t, s, "dir/dst.txt"))
	absent(t, s, "src.txt")
	_, err = s.FS.MoveFile(ctx(), resolve(t, s, "dir/dst.txt"), resolve(t, s, "dir/dst.txt"), provider.MoveOptions{})
	requireCode(t, err, provider.CodeSameTarget)
}

func testMoveStale(t *testing.T, s Subject) {
	put(t, s, "src.txt", "one\n")
	v := version(t, s, "src.txt")
	put(t, s, "src.txt", "two\n")
	_, err := s.FS.MoveFile(ctx(), resolve(t, s, "src.txt"), resolve(t, s, "dst.txt"), provider.MoveOptions{
		ExpectedSource: &provider.VersionGuard{Version: v},
	})
	requireCode(t, err, provider.CodeStaleVersion)
	require.Equal(t, "two\n", read(t, s, "src.txt"))
	absent(t, s, "dst.txt")
}

func testDelete(t *testing.T, s Subject) {
	put(t, s, "d.txt", "gone\n")
	v := version(t, s, "d.txt")
	put(t, s, "d.txt", "changed\n")
	_, err := s.FS.DeleteFile(ctx(), resolve(t, s, "d.txt"), &provider.VersionGuard{Version: v})
	requireCode(t, err, provider.CodeStaleVersion)
	out, err := s.FS.DeleteFile(ctx(), resolve(t, s, "d.txt"), &provider.VersionGuard{Version: version(t, s, "d.txt")})
	require.NoError(t, err)
	require.NotNil(t, out.Before)
	require.Equal(t, "changed\n", *out.Before)
	absent(t, s, "d.txt")
	// Changing a file that is no longer there is a stale view, not a
	// missing path: the caller must read the directory again.
	_, err = s.FS.DeleteFile(ctx(), resolve(t, s, "d.txt"), nil)
	requireCode(t, err, provider.CodeStaleVersion)
}

func testListDir(t *testing.T, s Subject) {
	put(t, s, "dir/b.txt", "b\n")
	put(t, s, "dir/a.txt", "a\n")
	require.NoError(t, os.Mkdir(filepath.Join(s.Root, "dir", "sub"), 0o755))
	require.NoError(t, os.Symlink("a.txt", filepath.Join(s.Root, "dir", "link")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(s.Root, "dir", "broken")))
	entries, err := s.FS.ListDir(ctx(), resolve(t, s, "dir"))
	require.NoError(t, err)
	got := map[string]provider.FileType{}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
		got[e.Name] = e.Type
	}
	require.Equal(t, []string{"a.txt", "b.txt", "broken", "link", "sub"}, names, "name order")
	require.Equal(t, provider.TypeFile, got["a.txt"])
	require.Equal(t, provider.TypeDirectory, got["sub"])
	// A symlink entry reports the type of what it points at; a broken one
	// is TypeOther (provider.DirEntry).
	require.Equal(t, provider.TypeFile, got["link"])
	require.Equal(t, provider.TypeOther, got["broken"])
	li, err := s.FS.Lstat(ctx(), "dir/link", provider.ResolveOptions{})
	require.NoError(t, err)
	require.NotNil(t, li)
	require.Equal(t, provider.TypeSymlink, li.Type, "Lstat does not follow a final symlink")
	_, err = s.FS.ListDir(ctx(), resolve(t, s, "dir/a.txt"))
	requireCode(t, err, provider.CodeNotDirectory)
}

func testNotFound(t *testing.T, s Subject) {
	tg := resolve(t, s, "nope.txt")
	_, err := s.FS.ReadText(ctx(), tg)
	requireCode(t, err, provider.CodeNotFound)
	_, err = s.FS.EditText(ctx(), tg, provider.EditRequest{OldString: "a", NewString: "b"}, nil)
	requireCode(t, err, provider.CodeStaleVersion)
	li, err := s.FS.Lstat(ctx(), "nope.txt", provider.ResolveOptions{})
	require.NoError(t, err)
	require.Nil(t, li)
}

func testReadDirectory(t *testing.T, s Subject) {
	require.NoError(t, os.Mkdir(filepath.Join(s.Root, "d"), 0o755))
	_, err := s.FS.ReadText(ctx(), resolve(t, s, "d"))
	requireCode(t, err, provider.CodeNotRegularFile)
}

func testEscape(t *testing.T, s Subject) {
	for _, p := range []string{"../outside.txt", "a/../../outside.txt", "/etc/passwd"} {
		_, err := s.FS.Resolve(ctx(), p, provider.ResolveOptions{})
		requireCode(t, err, provider.CodeSandboxDenied)
	}
}

func testCRLF(t *testing.T, s Subject) {
	put(t, s, "c.txt", "one\r\ntwo\r\n")
	out, err := s.FS.EditText(ctx(), resolve(t, s, "c.txt"), provider.EditRequest{OldString: "one\ntwo", NewString: "uno\ndos"}, nil)
	require.NoError(t, err)
	require.Equal(t, "uno\ndos\n", out.After, "outcomes are LF-normalized")
	raw, err := s.FS.ReadBytes(ctx(), resolve(t, s, "c.txt"), 1<<20)
	require.NoError(t, err)
	require.Equal(t, "uno\r\ndos\r\n", string(raw), "the file keeps its CRLF endings")
}
