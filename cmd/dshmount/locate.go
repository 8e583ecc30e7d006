package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/registry"
)

// noSocketHelp ends the message for a command that found no daemon.
const noSocketHelp = "pass --socket PATH, set $" + envSocket + ", or run it inside a mount or workspace of a running daemon"

// shellDir returns the caller's working directory, absolute ("" when it
// cannot be known).
func shellDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return wd
}

// findDaemon returns the running daemon whose mount or workspace contains
// the working directory, from the registry the daemons write; the error
// says why none was found ("no control socket; …").
func findDaemon() (registry.Place, error) {
	noSocket := errors.New("no control socket; " + noSocketHelp)
	wd := shellDir()
	if wd == "" {
		return registry.Place{}, noSocket
	}
	dir, err := trustedRunDir()
	if err != nil {
		return registry.Place{}, fmt.Errorf("no control socket: %w; %s", err, noSocketHelp)
	}
	p, ok, err := registry.Find(dir, wd)
	switch {
	case err != nil:
		return registry.Place{}, fmt.Errorf("no control socket: %w; %s", err, noSocketHelp)
	case !ok:
		return registry.Place{}, noSocket
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
// root). It looks in the registry first, then asks the daemon.
func shellCwd(ctx context.Context, client *control.Client, socket string) string {
	wd := shellDir()
	if wd == "" {
		return ""
	}
	abs, err := filepath.Abs(socket)
	if err == nil {
		if entries, err := registry.List(registry.DefaultDir()); err == nil { // the socket is the caller's choice; only the place is read
			for _, e := range entries {
				if filepath.Clean(e.Socket) == abs {
					p, _ := registry.Locate(e, wd)
					return p.Rel
				}
			}
		}
	}
	st, err := client.Status(ctx)
	if err != nil {
		return ""
	}
	p, _ := registry.Locate(registry.Entry{Mount: st.Mount, Source: st.Source}, wd)
	return p.Rel
}
