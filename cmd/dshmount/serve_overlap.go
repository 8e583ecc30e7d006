package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ownDir is a directory the daemon keeps its own files in: what it is and
// the flag that moves it.
type ownDir struct {
	what, path, flag string
}

// checkOwnDirsOutside refuses a state directory, socket or run directory
// inside the workspace or the mount (symlinks resolved, as far as the path
// exists): there the database, branch layers, journals and socket would be
// readable and writable through the mount and the socket. stateDefaulted
// says the state directory is the default one (the workspace is then
// typically a home directory) and the message says which --state to pass.
func checkOwnDirsOutside(c serveConfig, runDir string, stateDefaulted bool) error {
	stateFlag := "--state"
	if stateDefaulted {
		stateFlag = fmt.Sprintf("--state DIR outside it (for example --state /var/lib/dshmount/%s as root, or a directory under /var/tmp), or set XDG_STATE_HOME outside it; the default state directory comes from $XDG_STATE_HOME or ~/.local/state",
			filepath.Base(c.StateDir))
	}
	own := []ownDir{
		{"state directory", c.StateDir, stateFlag},
		{"socket", c.Socket, "--socket"},
		{"run directory", runDir, "DSH_RUN_DIR (or XDG_RUNTIME_DIR)"},
	}
	areas := []ownDir{{"workspace", c.Source, ""}, {"mount", c.Mountpoint, ""}}
	for _, o := range own {
		if o.path == "" {
			continue
		}
		p, err := resolveExisting(o.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.what, o.path, err)
		}
		for _, a := range areas {
			ap, err := resolveExisting(a.path)
			if err != nil {
				return fmt.Errorf("%s %s: %w", a.what, a.path, err)
			}
			if p == ap || within(p, ap) {
				return fmt.Errorf("the %s %s is inside the %s %s (resolved: %s in %s): the daemon's own files would be reachable through the mount and the socket; pass %s",
					o.what, o.path, a.what, a.path, p, ap, o.flag)
			}
		}
	}
	return nil
}

// resolveExisting makes p absolute and resolves the symbolic links of its
// longest existing prefix; the rest is appended as it is.
func resolveExisting(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest), nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
