package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/registry"
)

// branchWorkDir returns where 'exec --branch' starts the command: in the
// branch's mount, at the current directory's path relative to the
// workspace's mount, the workspace or a branch's mount when it is inside
// one of them (or the nearest directory above it the branch has), else at
// the mount's root. A
// branch that does not exist or has no mount is an error saying what to
// do.
func branchWorkDir(ctx context.Context, client *control.Client, name string, sio stdio) (string, error) {
	ls, err := client.BranchList(ctx)
	if err != nil {
		return "", err
	}
	mount, found := "", false
	for _, b := range ls.Branches {
		if b.Name == name {
			mount, found = b.Mount, true
		}
	}
	if !found {
		return "", &fsFailure{code: provider.CodeNotFound,
			msg: fmt.Sprintf("no branch named %s; create it with 'dshmount branch create %s --mount DIR'", name, name)}
	}
	if mount == "" {
		return "", &fsFailure{code: provider.CodeInvalidArgument,
			msg: fmt.Sprintf("branch %s is not mounted, so a command cannot run in it; mount it first: dshmount branch mount %s DIR", name, name)}
	}
	st, err := client.Status(ctx)
	if err != nil {
		return "", err
	}
	rel := "."
	wd, err := shellDir()
	if err != nil {
		return "", err
	}
	if p, ok := registry.Locate(registry.Entry{Mount: st.Mount, Source: st.Source}, wd); ok {
		rel = p.Rel
	} else {
		for _, b := range ls.Branches { // inside a branch's mount: the same place in this one
			if p, ok := registry.Locate(registry.Entry{Mount: b.Mount}, wd); ok && b.Mount != "" {
				rel = p.Rel
				break
			}
		}
	}
	for dir := filepath.Join(mount, filepath.FromSlash(rel)); ; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			if dir != filepath.Join(mount, filepath.FromSlash(rel)) {
				fmt.Fprintf(sio.err, "dshmount exec: branch %s has no directory %s; starting in %s\n", name, rel, dir)
			}
			return dir, nil
		}
		if dir == mount || len(dir) < len(mount) {
			return "", &fsFailure{code: provider.CodeIOError, path: mount,
				msg: fmt.Sprintf("the mount of branch %s at %s cannot be entered; unmount and mount it again (dshmount branch unmount %s)", name, mount, name)}
		}
	}
}
