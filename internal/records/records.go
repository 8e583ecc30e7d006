// Package records keeps small named JSON documents in one directory, each
// replaced atomically (temp file, fsync, rename, directory fsync), so a
// kill -9 or a power cut leaves the old document or the new one. Branch
// metadata and commit journals are kept in it; it is the one place to
// move them onto another store. It knows nothing of what the documents
// mean.
package records

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Dir is a directory of records.
type Dir struct{ Path string }

// Put writes v under name atomically and durably.
func (r Dir) Put(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", name, err)
	}
	if err := os.MkdirAll(r.Path, 0o700); err != nil {
		return fmt.Errorf("record directory %s: %w", r.Path, err)
	}
	return WriteFileAtomic(filepath.Join(r.Path, name), b, true)
}

// Get reads name into v; false when there is no such record.
func (r Dir) Get(name string, v any) (bool, error) {
	b, err := os.ReadFile(filepath.Join(r.Path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read record %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode record %s: %w", name, err)
	}
	return true, nil
}

// Del removes name durably; a missing record is not an error.
func (r Dir) Del(name string) error {
	if err := os.Remove(filepath.Join(r.Path, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove record %s: %w", name, err)
	}
	return SyncDir(r.Path)
}

// List returns the record names with suffix, sorted (temp files left by a
// kill are removed).
func (r Dir) List(suffix string) ([]string, error) {
	des, err := os.ReadDir(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list records in %s: %w", r.Path, err)
	}
	var out []string
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, ".tmp-") {
			_ = os.Remove(filepath.Join(r.Path, n))
			continue
		}
		if strings.HasSuffix(n, suffix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// WriteFileAtomic replaces path with data through a temp file in the same
// directory; with durable, the file and the directory are fsynced.
func WriteFileAtomic(path string, data []byte, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("create temp file in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("fsync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	if durable {
		return SyncDir(dir)
	}
	return nil
}

// SyncDir fsyncs a directory.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
