package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"fmt"
	"os"
	"path/filepath"
)

// Mount returns the directory the branch is to be served at as a FUSE
// mount, as recorded by SetMount ("" when none). The daemon mounts it there
// again when it starts.
func (b *Branch) Mount() string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mount
}

// SetMount records dir ("" forgets it) as the branch's mount directory in
// its branch.json, replaced atomically and durably (temp file, fsync,
// rename), so a kill -9 leaves the old record or the new one. A branch that
// was committed or discarded is FS_NOT_FOUND.
func (b *Branch) SetMount(dir string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("mount", ""); err != nil {
		return err
	}
	if dir == b.mount {
		return nil
	}
	if err := (records.Dir{Path: b.dir}).Put("branch.json", meta{Name: b.name, Created: b.created, Mount: dir, Owner: b.owner}); err != nil {
		return fmt.Errorf("record the mount directory of branch %s: %w", b.name, err)
	}
	b.mount = dir
	return nil
}

// StateDir returns the state directory the branches are kept in; a branch
// mount must not lie inside it (the daemon would serve its own backing
// files through itself).
func (m *Manager) StateDir() string { return filepath.Dir(m.dir) }

// Shadows reports whether the branch decides rel itself (it changed rel or
// a directory above it), so that workspace changes of rel do not show in
// the branch.
func (b *Branch) Shadows(rel string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, _ := lookup(b.entries, rel)
	return e != nil
}

// RecordedMounts returns the mount directories recorded for the branches
// kept under stateDir, read without opening them (for a daemon that must
// free a killed predecessor's mounts before it opens the branches).
func RecordedMounts(stateDir string) []string {
	des, err := os.ReadDir(filepath.Join(stateDir, "branches"))
	if err != nil {
		return nil
	}
	var out []string
	for _, de := range des {
		if !de.IsDir() || ValidateName(de.Name()) != nil {
			continue
		}
		var md meta
		if ok, err := (records.Dir{Path: filepath.Join(stateDir, "branches", de.Name())}).Get("branch.json", &md); ok && err == nil && md.Mount != "" {
			out = append(out, md.Mount)
		}
	}
	return out
}
