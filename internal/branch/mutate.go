package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/patch"
)

// This file holds the branch's mutations: copy-up, records, and the
// provider.FileSystem changes.

// copyUp makes rel's upper file hold the workspace bytes when the branch
// has not changed rel yet, and returns the records a successful change of
// rel must append (its parents and itself, kind file) and an undo for a
// failed change. b.mu is held for writing.
func (b *Branch) copyUp(ctx context.Context, op, rel string) (pending []*entry, undo func(), err error) {
	undo = func() {}
	parents, err := b.parentRecords(ctx, op, rel)
	if err != nil {
		return nil, undo, err
	}
	e, own := lookup(b.entries, rel)
	switch {
	case own && e.Kind == kindFile:
		return parents, undo, nil
	case own && e.Kind == kindDir:
		return nil, undo, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a directory, not a regular file", rel)
	case own: // deleted: a new file over the whiteout keeps the base
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: e.Base}), undo, nil
	case e != nil: // below a deleted or replaced path
		base := BaseAbsent
		if v, ok := e.Manifest[rel]; ok {
			base = v
		}
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: base}), undo, nil
	}
	lt := b.lower.TargetForRel(rel)
	info, err := b.lower.Stat(ctx, lt)
	if err != nil {
		return nil, undo, err
	}
	if info == nil {
		return append(parents, &entry{Path: rel, Kind: kindFile, Base: BaseAbsent}), undo, nil
	}
	if info.Type != provider.TypeFile {
		return nil, undo, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a %s, not a regular file", rel, info.Type)
	}
	data, err := b.lower.ReadBytes(ctx, lt, maxCopyUp)
	if err != nil {
		return nil, undo, err
	}
	mode := os.FileMode(0o644)
	if st, serr := os.Lstat(b.lower.ProcessPath(lt)); serr == nil {
		mode = st.Mode().Perm()
	}
	undoBase, err := b.keepBaseBytes(op, rel, data, mode)
	if err != nil {
		return nil, undo, err
	}
	up := b.upperPath(rel)
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		undoBase()
		return nil, undo, provider.NewError(provider.CodeIOError, op, rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	if err := records.WriteFileAtomic(up, data, false); err != nil {
		undoBase()
		return nil, undo, provider.NewError(provider.CodeIOError, op, rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	_ = os.Chmod(up, mode)
	undo = func() { _ = os.Remove(up); undoBase() }
	return append(parents, &entry{Path: rel, Kind: kindFile, Base: version.OfBytes(data)}), undo, nil
}

// parentRecords returns the directory records a new path rel needs: a
// deleted ancestor is made again (keeping its base), an ancestor the
// workspace lacks is made by the branch. b.mu is held for writing.
func (b *Branch) parentRecords(ctx context.Context, op, rel string) ([]*entry, error) {
	var out []*entry
	var chain []string
	for p := path.Dir(rel); p != "." && p != "/"; p = path.Dir(p) {
		chain = append(chain, p)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		e, own := lookup(b.entries, p)
		switch {
		case own && e.Kind == kindDir:
			continue
		case own && e.Kind == kindFile:
			return nil, provider.NewError(provider.CodeNotDirectory, op, rel, nil, "%s is a file in branch %s, not a directory", p, b.name)
		case own: // deleted
			out = append(out, &entry{Path: p, Kind: kindDir, Base: e.Base, Manifest: e.Manifest})
			continue
		case e != nil: // below a deleted one, made again above
			base := BaseAbsent
			out = append(out, &entry{Path: p, Kind: kindDir, Base: base})
			continue
		}
		info, err := b.lower.Stat(ctx, b.lower.TargetForRel(p))
		if err != nil {
			return nil, err
		}
		if info == nil {
			out = append(out, &entry{Path: p, Kind: kindDir, Base: BaseAbsent})
			continue
		}
		if info.Type != provider.TypeDirectory {
			return nil, provider.NewError(provider.CodeNotDirectory, op, rel, nil, "%s is a %s, not a directory", p, info.Type)
		}
	}
	return out, nil
}

// record appends records and applies them to the in-memory state; b.mu is
// held for writing.
func (b *Branch) record(es ...*entry) error {
	if len(es) == 0 {
		return nil
	}
	if err := b.log.append(es...); err != nil {
		return provider.NewError(provider.CodeIOError, "record", es[0].Path, err, "record the change in branch %s: %v", b.name, err)
	}
	for _, e := range es {
		if e.Kind == "" {
			delete(b.entries, e.Path)
			continue
		}
		if old, ok := b.entries[e.Path]; ok {
			e.Base = old.Base
		}
		b.entries[e.Path] = e
	}
	return nil
}

// upperPath is the host path of rel's upper file.
func (b *Branch) upperPath(rel string) string {
	return filepath.Join(b.dir, "upper", filepath.FromSlash(rel))
}

// mutate runs a change of rel against its upper file. Like the
// workspace's mutations, it holds the target's per-target lock (the
// workspace provider's lock table, under the branch key) from its guard
// to its publication, so a mount's check-then-change of the same branch
// path serialises with it.
func (b *Branch) mutate(ctx context.Context, op string, t provider.Target, change func(ut provider.Target) (provider.Version, error)) error {
	rel, err := b.rel(op, t)
	if err != nil {
		return err
	}
	unlock, err := b.lower.Lock(ctx, t.Key)
	if err != nil {
		return err
	}
	defer unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(op, rel); err != nil {
		return err
	}
	pending, undo, err := b.copyUp(ctx, op, rel)
	if err != nil {
		return err
	}
	v, err := change(b.upper.TargetForRel(rel))
	if err != nil {
		undo()
		return err
	}
	if err := b.record(pending...); err != nil {
		return err
	}
	b.setVersion(rel, v)
	return nil
}

// setVersion caches the version of rel's upper file ("" forgets it).
func (b *Branch) setVersion(rel string, v provider.Version) {
	b.versMu.Lock()
	defer b.versMu.Unlock()
	if b.vers == nil {
		b.vers = map[string]provider.Version{}
	}
	if v == "" {
		delete(b.vers, rel)
		return
	}
	b.vers[rel] = v
}

// upperVersion returns the version of rel's upper file, hashing it once
// after a restart; b.mu is held.
func (b *Branch) upperVersion(rel string) (provider.Version, error) {
	b.versMu.Lock()
	v, ok := b.vers[rel]
	b.versMu.Unlock()
	if ok {
		return v, nil
	}
	info, err := b.upper.Stat(context.Background(), b.upper.TargetForRel(rel))
	if err != nil || info == nil {
		return "", errors.Join(err, fmt.Errorf("branch %s lost its copy of %s", b.name, rel))
	}
	b.setVersion(rel, info.Version)
	return info.Version, nil
}

// WriteText implements provider.FileSystem: the guard is checked against
// the branch's view of the file.
func (b *Branch) WriteText(ctx context.Context, t provider.Target, content string, expected *provider.WriteIntent) (provider.WriteOutcome, error) {
	var out provider.WriteOutcome
	err := b.mutate(ctx, "write", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.WriteText(ctx, ut, content, expected)
		return out.Version, err
	})
	return out, err
}

// EditText implements provider.FileSystem.
func (b *Branch) EditText(ctx context.Context, t provider.Target, edit provider.EditRequest, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	var out provider.EditOutcome
	err := b.mutate(ctx, "edit", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.EditText(ctx, ut, edit, expected)
		return out.Version, err
	})
	return out, err
}

// PatchText implements provider.FileSystem.
func (b *Branch) PatchText(ctx context.Context, t provider.Target, hunks []patch.Hunk, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	var out provider.EditOutcome
	err := b.mutate(ctx, "patch", t, func(ut provider.Target) (_ provider.Version, err error) {
		out, err = b.upper.PatchText(ctx, ut, hunks, expected)
		return out.Version, err
	})
	return out, err
}

// DeleteFile implements provider.FileSystem: the branch records a whiteout.
func (b *Branch) DeleteFile(ctx context.Context, t provider.Target, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	rel, err := b.rel("delete", t)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	unlock, err := b.lower.Lock(ctx, t.Key)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	defer unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("delete", rel); err != nil {
		return provider.DeleteOutcome{}, err
	}
	return b.deleteLocked(ctx, "delete", rel, expected)
}

// deleteLocked removes rel from the branch; b.mu is held for writing.
func (b *Branch) deleteLocked(ctx context.Context, op, rel string, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	switch b.locate(rel) {
	case inUpper:
		out, err := b.upper.DeleteFile(ctx, b.upper.TargetForRel(rel), expected)
		if err != nil {
			return out, err
		}
		b.setVersion(rel, "")
		return out, b.record(&entry{Path: rel, Kind: kindDeleted, Base: b.entries[rel].Base})
	case inLower:
		lt := b.lower.TargetForRel(rel)
		info, err := b.lower.Stat(ctx, lt)
		if err != nil {
			return provider.DeleteOutcome{}, err
		}
		if info == nil {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
				"%s does not exist; read the directory again", rel)
		}
		if info.Type != provider.TypeFile {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a %s, not a regular file", rel, info.Type)
		}
		if expected != nil && expected.Version != info.Version {
			return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
				"%s changed since you read it; read it again", rel)
		}
		var out provider.DeleteOutcome
		if text, terr := b.lower.ReadText(ctx, lt); terr == nil && len(text) <= int(provider.DefaultMaxBasisBytes) {
			lf := eol.ToLF(text)
			out.Before = &lf
		}
		undoBase, err := b.keepBaseFromWorkspace(op, rel, info.Version)
		if err != nil {
			return provider.DeleteOutcome{}, err
		}
		if err := b.record(&entry{Path: rel, Kind: kindDeleted, Base: info.Version}); err != nil {
			undoBase()
			return out, err
		}
		return out, nil
	case inDir:
		return provider.DeleteOutcome{}, provider.NewError(provider.CodeNotRegularFile, op, rel, nil, "%s is a directory, not a regular file", rel)
	}
	return provider.DeleteOutcome{}, provider.NewError(provider.CodeStaleVersion, op, rel, nil,
		"%s does not exist in branch %s; read the directory again", rel, b.name)
}

// MoveFile implements provider.FileSystem: the destination is written (from
// the source's text, patched by opts.Hunks) then the source deleted, both in
// the branch; the destination remembers its source for branch.diff.
func (b *Branch) MoveFile(ctx context.Context, src, dst provider.Target, opts provider.MoveOptions) (provider.MoveOutcome, error) {
	var out provider.MoveOutcome
	sr, err := b.rel("move", src)
	if err != nil {
		return out, err
	}
	dr, err := b.rel("move", dst)
	if err != nil {
		return out, err
	}
	if sr == dr {
		return out, provider.NewError(provider.CodeSameTarget, "move", sr, nil, "source and destination are the same file (%s)", sr)
	}
	unlock, err := b.lower.Lock(ctx, src.Key, dst.Key)
	if err != nil {
		return out, err
	}
	defer unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("move", sr); err != nil {
		return out, err
	}
	var fsys provider.FileSystem = b.lower
	ft := b.lower.TargetForRel(sr)
	switch b.locate(sr) {
	case inUpper:
		fsys, ft = b.upper, b.upper.TargetForRel(sr)
	case inLower:
	case inDir:
		return out, provider.NewError(provider.CodeNotRegularFile, "move", sr, nil, "%s is a directory, not a regular file", sr)
	default:
		return out, provider.NewError(provider.CodeStaleVersion, "move", sr, nil, "%s does not exist in branch %s; read the directory again", sr, b.name)
	}
	text, info, err := readTextVersion(ctx, fsys, ft)
	if err != nil {
		return out, err
	}
	if opts.ExpectedSource != nil && opts.ExpectedSource.Version != info.Version {
		return out, provider.NewError(provider.CodeStaleVersion, "move", sr, nil, "%s changed since you read it; read it again", sr)
	}
	lf := eol.ToLF(text)
	content := text
	if len(opts.Hunks) > 0 {
		after, fail := patch.ApplyHunks(lf, opts.Hunks)
		if fail != nil {
			return out, provider.NewError(provider.CodePatchMismatch, "move", sr, fail, "%s; read the file again and rebuild the hunk", fail.Error())
		}
		content = eol.Restore(after, eol.IsCRLFText(text))
	}
	pending, undo, err := b.copyUp(ctx, "move", dr)
	if err != nil {
		return out, err
	}
	w, err := b.upper.WriteText(ctx, b.upper.TargetForRel(dr), content, opts.ExpectedDestination)
	if err != nil {
		undo()
		return out, err
	}
	if st, serr := os.Stat(fsys.ProcessPath(ft)); serr == nil {
		_ = os.Chmod(b.upperPath(dr), st.Mode().Perm()) // a move keeps the file's mode
	}
	pending[len(pending)-1].From = sr
	if err := b.record(pending...); err != nil {
		return out, err
	}
	b.setVersion(dr, w.Version)
	out.Destination = w
	out.SourceBefore = &lf
	if _, err := b.deleteLocked(ctx, "move", sr, nil); err != nil {
		out.SourceFailure = &provider.SourceFailure{Code: provider.CodeOf(err), Message: provider.MessageOf(err)}
		return out, nil
	}
	out.SourceDeleted = true
	return out, nil
}

// readTextVersion reads text and the version of the same bytes.
func readTextVersion(ctx context.Context, fsys provider.FileSystem, t provider.Target) (string, provider.Info, error) {
	if r, ok := fsys.(provider.TextVersionReader); ok {
		return r.ReadTextVersion(ctx, t)
	}
	info, err := fsys.Stat(ctx, t)
	if err != nil {
		return "", provider.Info{}, err
	}
	if info == nil {
		return "", provider.Info{}, provider.NewError(provider.CodeNotFound, "read", t.DisplayPath, nil, "no such file")
	}
	text, err := fsys.ReadText(ctx, t)
	return text, *info, err
}

// RemoveDir deletes the directory rel and everything below it from the
// branch. The files the branch saw below it are remembered with their
// versions: the commit refuses when the workspace holds anything else
// there by then.
func (b *Branch) RemoveDir(ctx context.Context, rel string) error {
	rel = path.Clean(rel)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("rmdir", rel); err != nil {
		return err
	}
	if rel == "." {
		return provider.NewError(provider.CodeInvalidArgument, "rmdir", rel, nil, "the workspace root cannot be removed")
	}
	w := b.locate(rel)
	if w == inLower {
		info, err := b.lower.Stat(ctx, b.lower.TargetForRel(rel))
		if err != nil {
			return err
		}
		if info == nil {
			return b.notFound("rmdir", rel)
		}
		if info.Type != provider.TypeDirectory {
			return provider.NewError(provider.CodeNotDirectory, "rmdir", rel, nil, "%s is not a directory", rel)
		}
	} else if w != inDir {
		return provider.NewError(provider.CodeNotDirectory, "rmdir", rel, nil, "%s is not a directory in branch %s", rel, b.name)
	}
	manifest := map[string]provider.Version{}
	var records []*entry
	base := BaseDir
	if own, ok := b.entries[rel]; ok {
		base = own.Base
		for p, v := range own.Manifest {
			manifest[p] = v
		}
	}
	// What the branch changed below rel: each change's base joins the
	// manifest (the workspace must still hold it), its record goes.
	for p, e := range b.entries {
		if !isBelow(p, rel) {
			continue
		}
		if e.Kind != kindDir && e.Base != BaseAbsent && e.Base != BaseDir {
			manifest[p] = e.Base
		}
		for k, v := range e.Manifest {
			manifest[k] = v
		}
		records = append(records, &entry{Path: p})
	}
	if w == inLower || (b.entries[rel] != nil && b.entries[rel].Base == BaseAbsent) {
		if err := b.walkLower(ctx, rel, manifest); err != nil {
			return err
		}
	}
	records = append(records, &entry{Path: rel, Kind: kindDeleted, Base: base, Manifest: manifest})
	if err := b.record(records...); err != nil {
		return err
	}
	b.entries[rel].Manifest = manifest // record keeps the first base, not the manifest
	for _, r := range records {
		b.setVersion(r.Path, "")
	}
	_ = os.RemoveAll(b.upperPath(rel))
	return nil
}

// walkLower adds the workspace files below dir that the branch has not
// changed to manifest, with their versions; b.mu is held.
func (b *Branch) walkLower(ctx context.Context, dir string, manifest map[string]provider.Version) error {
	des, err := b.lower.ListDir(ctx, b.lower.TargetForRel(dir))
	if provider.CodeOf(err) == provider.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	for _, de := range des {
		p := joinRel(dir, de.Name)
		if _, own := b.entries[p]; own {
			continue
		}
		host := filepath.Join(b.lower.Root(), filepath.FromSlash(p))
		if st, err := os.Lstat(host); err == nil && st.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(host)
			if err != nil {
				return err
			}
			manifest[p] = linkVersion(target)
			continue
		}
		switch de.Type {
		case provider.TypeDirectory:
			if err := b.walkLower(ctx, p, manifest); err != nil {
				return err
			}
		default:
			v := de.Version
			if v == "" {
				if info, serr := b.lower.Stat(ctx, b.lower.TargetForRel(p)); serr == nil && info != nil {
					v = info.Version
				}
			}
			manifest[p] = v
		}
	}
	return nil
}

// removeUpperTree empties the upper directory (after a commit with keep).
func removeUpperTree(dir string) error {
	up := filepath.Join(dir, "upper")
	if err := os.RemoveAll(up); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty %s: %w", up, err)
	}
	return os.MkdirAll(up, 0o755)
}

// entriesLink returns the target of the link entry rel; b.mu is held.
func (b *Branch) entriesLink(rel string) string {
	if e := b.entries[rel]; e != nil {
		return e.Link
	}
	return ""
}
