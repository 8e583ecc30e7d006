package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/policy"
)

// execer replaces the process image; tests substitute it.
type execer struct {
	lookPath func(file string) (string, error)
	exec     func(path string, argv, env []string) error
	pid      func() int
}

// osExecer returns the real one.
func osExecer() execer {
	return execer{lookPath: exec.LookPath, exec: syscall.Exec, pid: os.Getpid}
}

// runExec implements 'dshmount exec'.
func runExec(ctx context.Context, args []string, sio stdio) int {
	return execWith(ctx, args, sio, osExecer())
}

// execWith binds the current pid to a session, then execs the command, so
// the command and its descendants are guarded on the mount.
func execWith(ctx context.Context, args []string, sio stdio, ex execer) int {
	fs := flag.NewFlagSet("dshmount exec", flag.ContinueOnError)
	fs.SetOutput(sio.err)
	socket := fs.String("socket", os.Getenv(envSocket), "control socket of the daemon (default $"+envSocket+")")
	session := fs.String("session", os.Getenv(envSession), "session to act for (default $"+envSession+"; empty: open a new one)")
	name := fs.String("name", "", "name of the new session when --session is empty")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount exec [--socket S] [--session ID] -- CMD [ARGS...]

Binds this process to a session, then replaces it with CMD (looked up in PATH). CMD and
every process it starts act for the session on the mount: opening a file for reading
records an observation, and writing, truncating, renaming over or removing a file needs
a fresh one (EACCES when unseen, ESTALE when stale). Without --session a new session is
opened and its id printed on stderr. CMD gets DSH_SOCKET and DSH_SESSION in its
environment, so dshmount verbs it runs act for the same session.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(sio.err, "dshmount exec: no command; usage: dshmount exec --session ID -- CMD [ARGS...]")
		return exitUsage
	}
	if *socket == "" {
		fmt.Fprintf(sio.err, "dshmount exec: no control socket; pass --socket PATH or set $%s\n", envSocket)
		return exitUsage
	}
	path, err := ex.lookPath(argv[0])
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: %v\n", err)
		return exitUsage
	}
	client, err := control.DialContext(ctx, *socket)
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: %v\n", err)
		return exitUsage
	}
	id := policy.SessionID(*session)
	if id == "" {
		if id, err = client.OpenSession(ctx, *name); err != nil {
			client.Close()
			return reportError("exec", err, sio.err)
		}
		fmt.Fprintf(sio.err, "dshmount exec: session %s\n", id)
	}
	err = client.BindSession(ctx, id, ex.pid())
	client.Close()
	if err != nil {
		return reportError("exec", err, sio.err)
	}
	env := append(os.Environ(), envSocket+"="+*socket, envSession+"="+string(id))
	if err := ex.exec(path, argv, env); err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: run %s: %v\n", argv[0], err)
		return exitUsage
	}
	return exitOK // only a test execer returns
}
