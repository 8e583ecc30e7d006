// Command dshmount mounts a guarded view of a workspace with FUSE and serves
// the control socket that agents use (serve), and talks to a running daemon
// (the client verbs).
//
// Exit status: 0 success, 1 a filesystem error (its FS_… code on stderr),
// 2 a usage or connection error.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every command.
const (
	exitOK    = 0
	exitFS    = 1
	exitUsage = 2
)

// stdio is the process's standard streams, passed explicitly so commands can
// be tested.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one dshmount verb.
type command struct {
	name    string
	summary string
	// run executes the verb with the arguments after its name and returns
	// the exit status.
	run func(ctx context.Context, args []string, io stdio) int
}

// commands lists every verb: the daemon side (serve, unmount, exec) and the
// client verbs that talk to a running daemon.
func commands() []command {
	var all []command
	all = append(all, daemonCommands()...)
	all = append(all, clientCommands()...)
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// run dispatches args to a verb.
func run(ctx context.Context, args []string, io stdio) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(io.out)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintf(io.out, "dshmount %s\n", buildVersion())
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], io)
		}
	}
	fmt.Fprintf(io.err, "dshmount: unknown command %q; run 'dshmount --help' for the list\n", args[0])
	return exitUsage
}

// usage prints the top-level help.
func usage(w io.Writer) {
	fmt.Fprint(w, `dshmount: a guarded workspace filesystem for coding agents.

A FUSE daemon mounts a view of a workspace directory; people use it with their
own editors and tools, and an agent edits the same files through a control
socket with version-guarded requests. A change prepared against content that
has changed since is refused with FS_STALE_VERSION.

Usage: dshmount COMMAND [flags] [args]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'dshmount COMMAND --help' for the flags of one command, 'dshmount --version'
for the version.
Exit status: 0 success, 1 filesystem error (code on stderr), 2 usage or connection error.
`)
}
