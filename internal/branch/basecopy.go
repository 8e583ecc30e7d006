package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// This file holds the branch's base copies: when the branch first takes a
// workspace file (copy-up, deletion), the bytes it starts from are kept at
// base/<rel>, so branch.diff shows what the branch changed even after the
// workspace changed the file since. A copy is written before the record
// that needs it; one no record describes (a kill in between) is removed
// on open. A copy is used only when its bytes still hash to the base its
// record names, so a stale or torn copy can never show in a diff: the
// diff then falls back to the workspace's current bytes and says so.
// Only regular files up to maxDiffBytes are kept; the copy is a copy, not
// a hard link (the workspace file can be changed in place).

// baseDirName is the directory of base copies in a branch directory.
const baseDirName = "base"

// basePath is the host path of rel's base copy.
func (b *Branch) basePath(rel string) string {
	return filepath.Join(b.dir, baseDirName, filepath.FromSlash(rel))
}

// isContentVersion reports whether v names bytes (a hash a base copy can
// be checked against).
func isContentVersion(v provider.Version) bool {
	return v != BaseAbsent && v != BaseDir && v != "" && !strings.HasPrefix(string(v), "link:")
}

// keepBaseBytes writes data as rel's base copy with mode's permission
// bits; a file over maxDiffBytes keeps none. The returned undo removes it.
func (b *Branch) keepBaseBytes(op, rel string, data []byte, mode os.FileMode) (func(), error) {
	if len(data) > maxDiffBytes {
		return func() {}, nil
	}
	bp := b.basePath(rel)
	if err := os.MkdirAll(filepath.Dir(bp), 0o755); err != nil {
		return func() {}, b.baseError(op, rel, err)
	}
	if err := records.WriteFileAtomic(bp, data, false); err != nil {
		return func() {}, b.baseError(op, rel, err)
	}
	_ = os.Chmod(bp, mode.Perm())
	return func() { _ = os.Remove(bp) }, nil
}

// keepBaseFile copies the open regular file src (from its start) as
// rel's base copy with mode's permission bits; a file over maxDiffBytes
// keeps none. want, when a content version, must be the version of the
// bytes read, or nothing is kept (the file changed meanwhile); without
// it the bytes are trusted (the branch's own copy, just hashed) and
// copied in the kernel. The returned undo removes the copy.
func (b *Branch) keepBaseFile(op, rel string, src *os.File, size int64, mode os.FileMode, want provider.Version) (func(), error) {
	none := func() {}
	if size > maxDiffBytes {
		return none, nil
	}
	if isContentVersion(want) {
		data := make([]byte, size)
		n, err := src.ReadAt(data, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return none, b.baseError(op, rel, err)
		}
		if version.OfBytes(data[:n]) != want {
			return none, nil
		}
		return b.keepBaseBytes(op, rel, data[:n], mode)
	}
	bp := b.basePath(rel)
	if err := os.MkdirAll(filepath.Dir(bp), 0o755); err != nil {
		return none, b.baseError(op, rel, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(bp), ".tmp-")
	if err != nil {
		return none, b.baseError(op, rel, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	defer tmp.Close()
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return none, b.baseError(op, rel, err)
	}
	n, err := io.Copy(tmp, io.LimitReader(src, maxDiffBytes+1)) // copy_file_range
	if err != nil {
		return none, b.baseError(op, rel, err)
	}
	if n > maxDiffBytes {
		return none, nil
	}
	if err := tmp.Chmod(mode.Perm()); err != nil {
		return none, b.baseError(op, rel, err)
	}
	if err := os.Rename(tmp.Name(), bp); err != nil {
		return none, b.baseError(op, rel, err)
	}
	return func() { _ = os.Remove(bp) }, nil
}

// keepBaseFromWorkspace copies the workspace's regular file rel as its
// base copy when its bytes are still the version want (a deletion's base).
func (b *Branch) keepBaseFromWorkspace(op, rel string, want provider.Version) (func(), error) {
	none := func() {}
	if !isContentVersion(want) {
		return none, nil
	}
	host := b.lower.ProcessPath(b.lower.TargetForRel(rel))
	src, err := os.OpenFile(host, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return none, nil // nothing to keep: the diff falls back
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return none, nil
	}
	return b.keepBaseFile(op, rel, src, st.Size(), st.Mode(), want)
}

// baseError is the error of a base copy that could not be written.
func (b *Branch) baseError(op, rel string, err error) error {
	return provider.NewError(provider.CodeIOError, op, rel, err, "keep the base of %s in branch %s: %v", rel, b.name, err)
}

// baseVersionOf returns the base the branch started rel from: its own
// record's, or the version a deleted ancestor's manifest remembers; b.mu
// is held.
func (b *Branch) baseVersionOf(rel string) (provider.Version, bool) {
	if e, ok := b.entries[rel]; ok {
		return e.Base, true
	}
	for p := path.Dir(rel); p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if e, ok := b.entries[p]; ok {
			if v, ok := e.Manifest[rel]; ok {
				return v, true
			}
		}
	}
	return "", false
}

// baseSide returns rel's old side from what the branch kept: a link's
// target from its base version, a file's bytes from its base copy (only
// when they still hash to the base). ok is false when nothing was kept.
func (b *Branch) baseSide(rel string) (s side, ok bool) {
	b.mu.RLock()
	want, known := b.baseVersionOf(rel)
	b.mu.RUnlock()
	if !known {
		return side{}, false
	}
	return b.baseSideOf(rel, want)
}

// baseSideOf is baseSide for the base version want, without b.mu.
func (b *Branch) baseSideOf(rel string, want provider.Version) (s side, ok bool) {
	switch {
	case strings.HasPrefix(string(want), "link:"):
		return side{exists: true, mode: "120000", data: []byte(strings.TrimPrefix(string(want), "link:"))}, true
	case !isContentVersion(want):
		return side{}, false
	}
	bp := b.basePath(rel)
	st, err := os.Lstat(bp)
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxDiffBytes {
		return side{}, false
	}
	data, err := os.ReadFile(bp)
	if err != nil || version.OfBytes(data) != want {
		return side{}, false
	}
	return side{exists: true, mode: fileMode(st.Mode()), data: data}, true
}

// removeBaseOrphans deletes base copies no record describes (a kill
// between the copy and its record, or a temp file of one).
func (b *Branch) removeBaseOrphans() {
	root := filepath.Join(b.dir, baseDirName)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, rerr := filepath.Rel(root, p)
		if rerr != nil {
			return nil
		}
		v, known := b.baseVersionOf(filepath.ToSlash(rel))
		if !known || !isContentVersion(v) || strings.HasPrefix(d.Name(), ".tmp-") {
			_ = os.Remove(p)
		}
		return nil
	})
}

// removeBaseTree deletes every base copy of the branch directory dir.
func removeBaseTree(dir string) error {
	bd := filepath.Join(dir, baseDirName)
	if err := os.RemoveAll(bd); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the base copies %s: %w", bd, err)
	}
	return nil
}
