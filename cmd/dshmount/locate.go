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

// noSocketHelp ends the message for a command that found no daemon.
const noSocketHelp = "pass --socket PATH, set $" + envSocket + ", or run it inside a mount or workspace of a running daemon"

// shellDir returns the caller's working directory, absolute, or a
// FS_NOT_FOUND usage error when it cannot be known (getcwd fails: the
// directory was removed or renamed): relative paths and the daemon to ask
// are found from it, and guessing would change files elsewhere.
func shellDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", &usageError{code: provider.CodeNotFound, msg: fmt.Sprintf(
			"the working directory cannot be found (%v): it was removed or renamed; cd to it again or pass --cwd DIR (and --socket PATH)", err)}
	}
	return wd, nil
}

// findDaemon returns the running daemon whose mount or workspace contains
// the working directory, from the registry the daemons write; the error
// is shellDir's, or a usage error that says why none was found ("no
// control socket; …").
func findDaemon() (registry.Place, error) {
	wd, err := shellDir()
	if err != nil {
		return registry.Place{}, err
	}
	dir, err := trustedRunDir()
	if err != nil {
		return registry.Place{}, &usageError{msg: fmt.Sprintf("no control socket: %v; %s", err, noSocketHelp)}
	}
	p, ok, err := registry.Find(dir, wd)
	switch {
	case err != nil:
		return registry.Place{}, &usageError{msg: fmt.Sprintf("no control socket: %v; %s", err, noSocketHelp)}
	case !ok:
		return registry.Place{}, &usageError{msg: "no control socket; " + noSocketHelp}
	}
	return p, nil
}

// trustedRunDir is this user's run directory, checked (registry.CheckDir)
// unless $DSH_RUN_DIR names it.
func trustedRunDir() (string, error) {
	dir := registry.DefaultDir()
	if os.Getenv(registry.EnvRunDir) != "" {
		return dir, nil
	}
	return dir, registry.CheckDir(dir, os.Getuid())
}

// shellCwd returns the workspace-relative directory of the working
// directory when it is inside the mount or the workspace of the daemon
// behind socket ("" otherwise: relative paths then start at the workspace
// root). It looks in the registry first, then asks the daemon. The error
// is shellDir's.
func shellCwd(ctx context.Context, client *control.Client, socket string) (string, error) {
	wd, err := shellDir()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(socket)
	if err == nil {
		if entries, err := registry.List(registry.DefaultDir()); err == nil { // the socket is the caller's choice; only the place is read
			for _, e := range entries {
				if filepath.Clean(e.Socket) == abs {
					p, _ := registry.Locate(e, wd)
					return p.Rel, nil
				}
			}
		}
	}
	st, err := client.Status(ctx)
	if err != nil {
		return "", nil
	}
	p, _ := registry.Locate(registry.Entry{Mount: st.Mount, Source: st.Source}, wd)
	return p.Rel, nil
}
