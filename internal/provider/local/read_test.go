package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestStat_TypesSizesAndAbsence(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "12345")
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	require.NoError(t, os.Symlink("f.txt", filepath.Join(root, "link")))
	ctx := context.Background()
	for _, tc := range []struct {
		path string
		typ  provider.FileType
		size int64
	}{
		{"f.txt", provider.TypeFile, 5},
		{"link", provider.TypeFile, 5},
		{"d", provider.TypeDirectory, 0},
		{"fifo", provider.TypeOther, 0},
	} {
		info, err := fs.Stat(ctx, target(t, fs, tc.path))
		require.NoError(t, err, tc.path)
		require.NotNil(t, info, tc.path)
		assert.Equal(t, tc.typ, info.Type, tc.path)
		assert.Equal(t, tc.size, info.Size, tc.path)
		want := "m1-" // no bytes to hash: a metadata version
		if tc.typ == provider.TypeFile {
			want = "c1-"
		}
		assert.True(t, strings.HasPrefix(string(info.Version), want), info.Version)
	}
	info, err := fs.Stat(ctx, target(t, fs, "missing"))
	require.NoError(t, err)
	assert.Nil(t, info)
}

func TestReadText_RefusesNonText(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "ok.txt", "héllo\r\nwörld\n")
	put(t, root, "nul.bin", "abc\x00def")
	put(t, root, "latin1.txt", "caf\xe9")
	put(t, root, "truncated.txt", "ab\xe2\x82")
	require.NoError(t, os.Mkdir(filepath.Join(root, "dir"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	ctx := context.Background()

	text, err := fs.ReadText(ctx, target(t, fs, "ok.txt"))
	require.NoError(t, err)
	assert.Equal(t, "héllo\r\nwörld\n", text, "ReadText returns the stored text")

	for _, tc := range []struct {
		path string
		code provider.Code
	}{
		{"nul.bin", provider.CodeNotText},
		{"latin1.txt", provider.CodeNotText},
		{"truncated.txt", provider.CodeNotText},
		{"dir", provider.CodeNotRegularFile},
		{"fifo", provider.CodeNotRegularFile},
		{"missing.txt", provider.CodeNotFound},
	} {
		_, err := fs.ReadText(ctx, target(t, fs, tc.path))
		pe := requireCode(t, err, tc.code)
		assert.Equal(t, tc.path, pe.Path)
		assert.Equal(t, "read", pe.Op)
	}
	_, err = fs.ReadText(cancelled(), target(t, fs, "ok.txt"))
	requireCode(t, err, provider.CodeAborted)
}

func TestReadText_SymlinkSwappedAfterResolveCannotEscape(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, filepath.Dir(root), "secret.txt", "secret")
	put(t, root, "f.txt", "mine")
	tg := target(t, fs, "f.txt")
	// After resolution, the file is replaced by a link to the outside.
	require.NoError(t, os.Remove(filepath.Join(root, "f.txt")))
	require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(root), "secret.txt"), filepath.Join(root, "f.txt")))
	_, err := fs.ReadText(context.Background(), tg)
	requireCode(t, err, provider.CodeSandboxDenied)
	_, err = fs.Stat(context.Background(), tg)
	requireCode(t, err, provider.CodeSandboxDenied)
	// A forged key outside the root is refused too.
	_, err = fs.ReadText(context.Background(), provider.Target{Key: "/etc/passwd", DisplayPath: "x"})
	requireCode(t, err, provider.CodeSandboxDenied)
	_, err = fs.ReadText(context.Background(), provider.Target{Key: provider.Key(root + "/../ws2/x"), DisplayPath: "x"})
	requireCode(t, err, provider.CodeSandboxDenied)
}

// collect drains a stream into its chunks and final error.
func collect(seq func(func(string, error) bool)) ([]string, error) {
	var chunks []string
	for chunk, err := range seq {
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, chunk)
	}
	return chunks, nil
}

func TestStreamText_ChunkBoundaryInsideMultibyteRune(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	text := strings.Repeat("aé€😀", 50) // 1-, 2-, 3- and 4-byte runes
	put(t, root, "u.txt", text)
	for _, chunk := range []int{1, 2, 3, 5, 7, 64} {
		fs.chunk = chunk
		seq, err := fs.StreamText(context.Background(), target(t, fs, "u.txt"))
		require.NoError(t, err)
		chunks, err := collect(seq)
		require.NoError(t, err, "chunk %d", chunk)
		assert.Equal(t, text, strings.Join(chunks, ""), "chunk %d", chunk)
		for _, c := range chunks {
			assert.True(t, len(c) > 0 && strings.ToValidUTF8(c, "?") == c, "chunk %q is not whole UTF-8", c)
		}
	}
}

func TestStreamText_RefusesNonText(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	fs.chunk = 4
	put(t, root, "nul.txt", "abcdefgh\x00")
	put(t, root, "cut.txt", "abcdefg\xe2\x82")
	for _, p := range []string{"nul.txt", "cut.txt"} {
		seq, err := fs.StreamText(context.Background(), target(t, fs, p))
		require.NoError(t, err)
		chunks, err := collect(seq)
		requireCode(t, err, provider.CodeNotText)
		assert.Equal(t, "abcdefg", strings.Join(chunks, "")[:7], p)
	}
	_, err := fs.StreamText(context.Background(), target(t, fs, "missing"))
	requireCode(t, err, provider.CodeNotFound)
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	_, err = fs.StreamText(context.Background(), target(t, fs, "d"))
	requireCode(t, err, provider.CodeNotRegularFile)
}

func TestStreamText_MidStreamAbort(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	fs.chunk = 8
	put(t, root, "big.txt", strings.Repeat("x", 100))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seq, err := fs.StreamText(ctx, target(t, fs, "big.txt"))
	require.NoError(t, err)
	var got []string
	var last error
	for chunk, err := range seq {
		if err != nil {
			last = err
			break
		}
		got = append(got, chunk)
		cancel() // abort after the first chunk
	}
	assert.Equal(t, []string{"xxxxxxxx"}, got)
	requireCode(t, last, provider.CodeAborted)

	// The sequence is single-use.
	chunks, err := collect(seq)
	assert.Empty(t, chunks)
	requireCode(t, err, provider.CodeInvalidArgument)
}

func TestReadBytes_CapNeverTruncates(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "b.bin", "\x00\x01\x02\x03\x04")
	tg := target(t, fs, "b.bin")
	ctx := context.Background()
	data, err := fs.ReadBytes(ctx, tg, 5)
	require.NoError(t, err)
	assert.Equal(t, []byte("\x00\x01\x02\x03\x04"), data)
	data, err = fs.ReadBytes(ctx, tg, 100)
	require.NoError(t, err)
	assert.Len(t, data, 5)
	data, err = fs.ReadBytes(ctx, tg, 4)
	requireCode(t, err, provider.CodeTooLarge)
	assert.Nil(t, data)
	_, err = fs.ReadBytes(ctx, tg, -1)
	requireCode(t, err, provider.CodeInvalidArgument)
	put(t, root, "empty", "")
	data, err = fs.ReadBytes(ctx, target(t, fs, "empty"), 0)
	require.NoError(t, err)
	assert.Empty(t, data)
}

func TestReadBytes_NeverReadsPastMaxPlusOne(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "grow.bin", "abc")
	f, st, err := fs.openRegular(context.Background(), "readBytes", target(t, fs, "grow.bin"))
	require.NoError(t, err)
	defer f.Close()
	// The file grows after the size check: the bounded read notices.
	put(t, root, "grow.bin", "abcdefgh")
	data, err := readAll(context.Background(), f, st.Size, 6)
	require.NoError(t, err)
	assert.Equal(t, "abcdef", string(data), "reads stop at the limit (max+1)")
}

func TestReadByteRange_Windows(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "r.bin", "0123456789")
	tg := target(t, fs, "r.bin")
	ctx := context.Background()
	for _, tc := range []struct {
		r    provider.ByteRange
		want string
	}{
		{provider.ByteRange{Offset: 0, Length: 3}, "012"},
		{provider.ByteRange{Offset: 8, Length: 5}, "89"},
		{provider.ByteRange{Offset: 10, Length: 5}, ""},
		{provider.ByteRange{Offset: 50, Length: 5}, ""},
		{provider.ByteRange{Offset: 3, Length: 0}, ""},
	} {
		data, err := fs.ReadByteRange(ctx, tg, tc.r)
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(data), "%+v", tc.r)
	}
	_, err := fs.ReadByteRange(ctx, tg, provider.ByteRange{Offset: -1, Length: 1})
	requireCode(t, err, provider.CodeInvalidArgument)
}

func TestListDir_NameOrderMetadataAndBrokenChildren(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/b.txt", "bb")
	put(t, root, "d/a.txt", "a")
	put(t, root, "d/sub/x", "x")
	require.NoError(t, os.Symlink("a.txt", filepath.Join(root, "d/c-link")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(root, "d/z-broken")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "d/y-escape")))
	entries, err := fs.ListDir(context.Background(), target(t, fs, "d"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"a.txt", "b.txt", "c-link", "sub", "y-escape", "z-broken"}, names)

	byName := map[string]provider.DirEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	a := byName["a.txt"]
	assert.Equal(t, provider.TypeFile, a.Type)
	assert.Equal(t, int64(1), a.Size)
	assert.Equal(t, target(t, fs, "d/a.txt"), a.Target)
	assert.Equal(t, versionOf(t, fs, a.Target), a.Version)
	assert.Equal(t, int64(2), byName["b.txt"].Size)
	link := byName["c-link"]
	assert.Equal(t, provider.TypeFile, link.Type)
	assert.Equal(t, a.Target, link.Target, "a link child resolves to its target")
	assert.Equal(t, provider.TypeDirectory, byName["sub"].Type)
	for _, n := range []string{"z-broken", "y-escape"} {
		e := byName[n]
		assert.Equal(t, provider.TypeOther, e.Type, n)
		assert.Empty(t, e.Version, n)
		assert.Zero(t, e.Size, n)
	}
}

func TestListDir_Errors(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "x")
	_, err := fs.ListDir(context.Background(), target(t, fs, "f.txt"))
	requireCode(t, err, provider.CodeNotDirectory)
	_, err = fs.ListDir(context.Background(), target(t, fs, "missing"))
	requireCode(t, err, provider.CodeNotFound)
	_, err = fs.ListDir(cancelled(), target(t, fs, "."))
	requireCode(t, err, provider.CodeAborted)
}
