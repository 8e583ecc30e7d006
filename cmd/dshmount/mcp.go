package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
)

// mcpCommand is `dshmount mcp`: the guarded workspace as an MCP server on
// stdin/stdout, one policy session per connection.
func mcpCommand() command {
	return command{
		name:    "mcp",
		summary: "serve the workspace as an MCP server on stdin/stdout (one session per client)",
		run:     runMCP,
	}
}

// runMCP parses the flags, dials the daemon and serves MCP until stdin
// closes. stdout carries only the protocol; logs go to stderr.
func runMCP(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(std.err)
	socket := fs.String("socket", "", "control socket of the daemon (default $DSH_SOCKET, else the daemon whose mount or workspace holds the current directory)")
	session := fs.String("session", "", "an existing session to act for, by id or by name; otherwise the name of the session opened for this client (default \"mcp (pid N)\")")
	cwd := fs.String("cwd", "", "workspace-relative base directory for relative paths (default: the directory it was started in when that is inside the mount or the workspace, else the workspace root)")
	branchName := fs.String("branch", "", "make every tool act in this branch (see 'dshmount branch') instead of the workspace")
	verbose := fs.Bool("v", false, "log each request to stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount mcp [--socket PATH] [--session ID|NAME] [--cwd DIR] [--branch NAME]

Serve the guarded workspace as a Model Context Protocol server on stdin and
stdout, for an agent client (Claude Code, Codex, ...). The tools are read,
write, edit, apply_patch, move, delete, list and stat. The connection is one
policy session: the agent must read a file before changing it, and a change
to a file that changed since is refused with FS_STALE_VERSION. The session
closes when stdin closes. With --session naming an existing session (its id,
or a name exactly one session has) the tools act for that session, which
stays open; any other --session value names the session opened here.

Register it, for example:
  claude mcp add dshmount -- dshmount mcp --socket /path/to/control.sock

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, std, func() error { return fs.Parse(args) }); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(std.err, "dshmount mcp: unexpected argument %q; see 'dshmount mcp --help'\n", fs.Arg(0))
		return exitUsage
	}
	if *socket == "" {
		*socket = os.Getenv(envSocket)
	}
	cwdSet := false
	fs.Visit(func(f *flag.Flag) { cwdSet = cwdSet || f.Name == "cwd" })
	placed := false
	if *socket == "" {
		p, err := findDaemon()
		if err != nil {
			fmt.Fprintf(std.err, "dshmount mcp: %v\n", err)
			return exitUsage
		}
		*socket = p.Socket
		if !cwdSet {
			*cwd, placed = p.Rel, true
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: level}))
	name := *session
	if name == "" {
		name = fmt.Sprintf("mcp (pid %d)", os.Getpid())
	}

	client, err := control.DialContext(ctx, *socket)
	if err != nil {
		fmt.Fprintf(std.err, "dshmount mcp: %v\n", err)
		return exitUsage
	}
	defer client.Close()
	if !cwdSet && !placed {
		if *cwd, err = shellCwd(ctx, client, *socket); err != nil {
			fmt.Fprintf(std.err, "dshmount mcp: %v\n", err)
			return exitUsage
		}
	}
	// --session names an existing session (its id, or a name one session
	// has) to join, or else the name of the session opened for this client.
	joined, known, err := resolveSession(ctx, client, *session)
	if err != nil {
		fmt.Fprintf(std.err, "dshmount mcp: %v\n", err)
		return exitUsage
	}
	if !known {
		joined = ""
	}
	transport := mcp.StdioTransport(std.in, std.out)
	err = mcp.Run(ctx, mcp.Config{Daemon: client, SessionName: name, Session: joined, Cwd: *cwd, Branch: *branchName, Logger: logger, Version: buildVersion()}, transport)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(std.err, "dshmount mcp: %v\n", err)
		return exitUsage
	}
	return exitOK
}
