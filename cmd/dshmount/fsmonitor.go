package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/fsmonitor"
	"github.com/dshmount/dshmount/internal/registry"
)

// fsmonitorTimeout bounds one hook call: git waits for it.
const fsmonitorTimeout = 20 * time.Second

// fsmonitorCommand is git's core.fsmonitor hook.
func fsmonitorCommand() command {
	return command{
		name:    "fsmonitor",
		summary: "git's core.fsmonitor hook: what changed in this worktree since git last asked",
		run:     runFsmonitor,
	}
}

// runFsmonitor answers git's hook protocol version 2: `dshmount fsmonitor
// 2 TOKEN` in the root of a worktree on a mount or on the workspace
// directory of a running daemon prints the new token, a NUL, then every
// path changed since TOKEN (NUL-terminated, relative to the worktree), or
// "/" when the daemon cannot vouch for TOKEN. Where no running daemon
// serves the worktree (outside any mount, the daemon is down) it answers
// "/" without a word: git then scans by itself, and every git command
// would otherwise print the same error. A daemon that fails to answer
// gets one line on stderr, and "/" too.
func runFsmonitor(ctx context.Context, args []string, sio stdio) int {
	fs := flag.NewFlagSet("fsmonitor", flag.ContinueOnError)
	fs.SetOutput(sio.err)
	socket := fs.String("socket", "", "control socket of the daemon (default $"+envSocket+", else the daemon whose mount or workspace holds the working directory)")
	noSync := fs.Bool("no-sync", false, "do not wait for the daemon's watcher to catch up first: faster, but a change made in the workspace\ndirectory in the last few milliseconds may be reported only by the next call")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount fsmonitor [--socket PATH] [--no-sync] 2 TOKEN

git's core.fsmonitor hook (protocol version 2), served by the daemon of the
mount or workspace the worktree lies in. git runs it in the worktree's root;
it prints a new token, a NUL, then every path changed since TOKEN relative to
the worktree (directories also with a trailing slash), each NUL-terminated, or
"/" (rescan everything) when TOKEN is empty, of another daemon run, or older
than the daemon can vouch for, and quietly when no running daemon serves the
worktree. The daemon must run with --watch, else every answer is "/". Set it
up in a repository with:

  git config core.fsmonitor "dshmount fsmonitor"
  git config core.fsmonitorHookVersion 2
  git config core.untrackedCache true

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, sio, func() error { return fs.Parse(args) }); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	if v := fs.Arg(0); v != fsmonitor.HookVersion {
		fmt.Fprintf(sio.err, "dshmount fsmonitor: hook protocol version %q is not supported, only %s (git then scans itself; set core.fsmonitorHookVersion to %s)\n",
			v, fsmonitor.HookVersion, fsmonitor.HookVersion)
		return exitFS
	}
	token := fs.Arg(1)
	ctx, cancel := context.WithTimeout(ctx, fsmonitorTimeout)
	defer cancel()
	everything := func() int {
		if _, err := sio.out.Write(fsmonitor.EverythingResponse(fsmonitor.NoDaemonToken)); err != nil {
			return exitFS
		}
		return exitOK
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount fsmonitor: working directory: %v (git scans the worktree itself)\n", err)
		return everything()
	}
	if *socket == "" {
		*socket = os.Getenv(envSocket)
	}
	place, client, err := hookDaemon(ctx, wd, *socket)
	if err != nil {
		return everything() // no daemon serves the worktree
	}
	defer client.Close()
	_, onMount := registry.Locate(registry.Entry{Mount: place.Mount}, wd)
	p := control.ChangesParams{Since: control.ChangesCursor(token), Path: place.Rel, Sync: !*noSync, Workspace: !onMount}
	res, err := client.Changes(ctx, p)
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount fsmonitor: ask the daemon at %s what changed: %v (git scans the worktree itself)\n", place.Socket, err)
		return everything()
	}
	if _, err := sio.out.Write(fsmonitor.Response(res, place.Rel)); err != nil {
		return exitFS
	}
	return exitOK
}

// hookDaemon finds the daemon serving wd and connects to it: the one
// behind socket when given, else the one whose mount or workspace
// directory holds wd in the registry of this user or of root (git runs the
// hook as the user, the daemon often runs as root).
func hookDaemon(ctx context.Context, wd, socket string) (registry.Place, *control.Client, error) {
	dirs, refused := hookRegistryDirs()
	if socket == "" {
		for _, dir := range dirs {
			p, ok, err := registry.Find(dir, wd)
			if err == nil && ok {
				client, err := control.DialContext(ctx, p.Socket)
				if err != nil {
					return registry.Place{}, nil, err
				}
				return p, client, nil
			}
			if err != nil {
				refused = append(refused, err)
			}
		}
		return registry.Place{}, nil, fmt.Errorf("%s is not inside the mount or workspace of a running dshmount daemon (none in %v%s); pass --socket or set $%s",
			wd, dirs, refusedNote(refused), envSocket)
	}
	client, err := control.DialContext(ctx, socket)
	if err != nil {
		return registry.Place{}, nil, err
	}
	abs, _ := filepath.Abs(socket)
	for _, dir := range dirs {
		entries, _ := registry.List(dir)
		for _, e := range entries {
			if filepath.Clean(e.Socket) != abs {
				continue
			}
			if p, ok := registry.Locate(e, wd); ok {
				return p, client, nil
			}
		}
	}
	st, err := client.Status(ctx)
	if err != nil {
		_ = client.Close()
		return registry.Place{}, nil, err
	}
	e := registry.Entry{Mount: st.Mount, Source: st.Source, Socket: abs}
	p, ok := registry.Locate(e, wd)
	if !ok {
		_ = client.Close()
		return registry.Place{}, nil, fmt.Errorf("%s is outside the mount (%s) and the workspace (%s) of the daemon at %s", wd, st.Mount, st.Source, socket)
	}
	return p, client, nil
}

// hookRegistryDirs are the registries the hook looks in: this user's, then
// root's ($DSH_RUN_DIR alone when set); those registry.CheckDir refuses are
// left out, and refused says why.
func hookRegistryDirs() (dirs []string, refused []error) {
	own := registry.DefaultDir()
	if os.Getenv(registry.EnvRunDir) != "" {
		return []string{own}, nil
	}
	candidates := []string{own}
	if root := registry.Dir(func(string) string { return "" }, 0); root != own {
		candidates = append(candidates, root)
	}
	for _, d := range candidates {
		if err := registry.CheckDir(d, os.Getuid()); err != nil {
			refused = append(refused, err)
			continue
		}
		dirs = append(dirs, d)
	}
	return dirs, refused
}

// refusedNote lists why registries or entries were not trusted ("" when
// none was refused).
func refusedNote(refused []error) string {
	if len(refused) == 0 {
		return ""
	}
	return "; not trusted: " + errors.Join(refused...).Error()
}
