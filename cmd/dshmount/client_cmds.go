package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/provider"
)

// clientCommands returns the verbs that talk to a running daemon.
func clientCommands() []command {
	verbs := clientVerbs()
	cmds := make([]command, 0, len(verbs)+1)
	for _, v := range verbs {
		cmds = append(cmds, command{name: v.name, summary: v.summary, run: v.command})
	}
	cmds = append(cmds, mcpCommand())
	cmds = append(cmds, command{name: "exec", summary: "run a command whose processes act for a session on the mount", run: runExec})
	return cmds
}

// Environment variables the client verbs read.
const (
	envSocket  = "DSH_SOCKET"  // default --socket
	envSession = "DSH_SESSION" // default --session
)

// guardFlags says which guard flags a verb takes.
type guardFlags int

const (
	noGuard      guardFlags = iota
	versionOnly             // --version V (edit, rm, patch: --unconditional only)
	writeGuard              // --version V or --create
	unconditOnly            // --unconditional only
)

// clientVerb is one client verb: its flags, its synopsis and its action.
type clientVerb struct {
	name, summary string
	synopsis      string // arguments after the verb
	help          string // longer explanation
	guard         guardFlags
	minArgs       int
	maxArgs       int // -1: any
	flags         func(fs *flag.FlagSet, o *verbOpts)
	do            func(ctx context.Context, e *clientEnv) error
}

// verbOpts holds every verb-specific flag value.
type verbOpts struct {
	name         string
	offset       int
	limit        int
	maxBytes     int64
	old, new     string
	all          bool
	file         string
	limitLog     int
	refused      bool
	since        uint64
	sessionSet   bool // --session was given on the command line
	hasOffset    bool
	hasLimit     bool
	hasMaxBytes  bool
	expectedDest string
	createDest   bool
}

// clientEnv is what a verb's action works with.
type clientEnv struct {
	client        *control.Client
	io            stdio
	args          []string
	socket        string
	session       policy.SessionID
	cwd           string
	json          bool
	version       string
	create        bool
	unconditional bool
	opts          verbOpts
}

// usageError is a bad invocation (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// command parses flags, connects and runs the verb, mapping errors to exit
// codes.
func (v clientVerb) command(ctx context.Context, args []string, sio stdio) int {
	fs := flag.NewFlagSet("dshmount "+v.name, flag.ContinueOnError)
	fs.SetOutput(sio.err)
	e := &clientEnv{io: sio}
	fs.StringVar(&e.socket, "socket", os.Getenv(envSocket), "control socket of the daemon (default $"+envSocket+")")
	var session string
	fs.StringVar(&session, "session", os.Getenv(envSession), "session to act for (default $"+envSession+"; empty: a session private to this one call)")
	fs.StringVar(&e.cwd, "cwd", "", "workspace-relative directory that relative paths resolve against")
	fs.BoolVar(&e.json, "json", false, "print the raw JSON result")
	switch v.guard {
	case versionOnly:
		fs.StringVar(&e.version, "version", "", "explicit guard: act only if the file is still at version `V`")
		fs.BoolVar(&e.unconditional, "unconditional", false, "skip the guard (audited)")
	case writeGuard:
		fs.StringVar(&e.version, "version", "", "explicit guard: replace only if the file is still at version `V`")
		fs.BoolVar(&e.create, "create", false, "explicit guard: create only if the file does not exist")
		fs.BoolVar(&e.unconditional, "unconditional", false, "skip the guard (audited)")
	case unconditOnly:
		fs.BoolVar(&e.unconditional, "unconditional", false, "skip the guards (audited)")
	}
	if v.flags != nil {
		v.flags(fs, &e.opts)
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: dshmount %s [flags] %s\n\n%s\n", v.name, v.synopsis, strings.TrimSpace(v.help))
		fmt.Fprintf(out, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(out, "\nExit status: 0 success, 1 filesystem error (code on stderr), 2 usage or connection error.\n")
	}
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		return exitUsage // flag has printed the error and usage
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "offset":
			e.opts.hasOffset = true
		case "limit":
			e.opts.hasLimit = true
		case "max-bytes":
			e.opts.hasMaxBytes = true
		case "session":
			e.opts.sessionSet = true
		}
	})
	e.args = pos
	e.session = policy.SessionID(session)
	if len(pos) < v.minArgs || (v.maxArgs >= 0 && len(pos) > v.maxArgs) {
		fmt.Fprintf(sio.err, "dshmount %s: expected %s; run 'dshmount %s --help'\n", v.name, v.synopsis, v.name)
		return exitUsage
	}
	if (e.version != "" || e.create) && e.unconditional {
		fmt.Fprintf(sio.err, "dshmount %s: --unconditional excludes --version and --create\n", v.name)
		return exitUsage
	}
	if e.version != "" && e.create {
		fmt.Fprintf(sio.err, "dshmount %s: --version and --create exclude each other\n", v.name)
		return exitUsage
	}
	if e.socket == "" {
		fmt.Fprintf(sio.err, "dshmount %s: no control socket; pass --socket PATH or set $%s\n", v.name, envSocket)
		return exitUsage
	}
	client, err := control.DialContext(ctx, e.socket)
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount %s: %v\n", v.name, err)
		return exitUsage
	}
	defer client.Close()
	e.client = client
	return reportError(v.name, v.do(ctx, e), sio.err)
}

// reportError prints err and returns the exit status it maps to.
func reportError(verb string, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "dshmount %s: %s\n", verb, ue.msg)
		return exitUsage
	}
	var re *control.RPCError
	if errors.As(err, &re) {
		if re.RPCCode == control.CodeFilesystem && re.Code != "" {
			fmt.Fprintf(stderr, "%s: %s\n", re.Code, re.Message)
			return exitFS
		}
		fmt.Fprintf(stderr, "dshmount %s: %s\n", verb, re.Message)
		return exitUsage
	}
	var fe *fsFailure
	if errors.As(err, &fe) {
		fmt.Fprintf(stderr, "%s: %s\n", fe.code, fe.msg)
		return exitFS
	}
	if errors.Is(err, context.Canceled) {
		return exitOK
	}
	fmt.Fprintf(stderr, "dshmount %s: %v\n", verb, err)
	return exitUsage
}

// fsFailure is a filesystem failure reported inside a successful result
// (an incomplete patch).
type fsFailure struct {
	code provider.Code
	msg  string
}

func (e *fsFailure) Error() string { return string(e.code) + ": " + e.msg }

// parseInterspersed parses flags that may follow positional arguments; "--"
// ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// emit prints the raw JSON result when --json is set, else runs human.
func (e *clientEnv) emit(result any, human func(w io.Writer)) error {
	if e.json {
		enc := json.NewEncoder(e.io.out)
		enc.SetIndent("", "  ")
		return enc.Encode(result)
	}
	human(e.io.out)
	return nil
}

// writeExpected builds a write's explicit guard from the flags.
func (e *clientEnv) writeExpected() *control.WriteExpected {
	switch {
	case e.create:
		return &control.WriteExpected{Kind: provider.CreateIfAbsent}
	case e.version != "":
		return &control.WriteExpected{Kind: provider.ReplaceIfVersion, Version: provider.Version(e.version)}
	}
	return nil
}

// versionExpected builds an edit/delete/move-source explicit guard.
func (e *clientEnv) versionExpected() *control.VersionExpected {
	if e.version == "" {
		return nil
	}
	return &control.VersionExpected{Version: provider.Version(e.version)}
}
