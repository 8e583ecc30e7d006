package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
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
	maxArgs       int  // -1: any
	paths         bool // takes workspace paths, resolved against the shell's directory
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
	merge        bool // write, edit: merge a stale change
	file         string
	limitLog     int
	refused      bool
	since        uint64
	sessionSet   bool // --session was given on the command line
	hasNew       bool // --new was given (possibly empty)
	cwdSet       bool // --cwd was given
	under        stringList
	exclude      stringList
	git          bool
	strict       bool
	hasOffset    bool
	hasLimit     bool
	hasMaxBytes  bool
	expectedDest string
	createDest   bool
	recursive    bool        // watch -r
	watchSince   optionalSeq // watch --since
	atomic       bool        // patch: one journaled commit
	stat         bool        // branch diff: a summary per file
	asPatch      bool        // branch diff: an apply_patch text
	keep         bool        // branch commit: keep the branch, empty
	rebase       bool        // branch commit: rebase first
	markers      bool        // branch rebase: conflict markers instead of a refusal
	mountDir     string      // branch create: mount it there
}

// clientEnv is what a verb's action works with.
type clientEnv struct {
	client        *control.Client
	io            stdio
	args          []string
	socket        string
	session       control.SessionID
	cwd           string
	json          bool
	version       string
	create        bool
	unconditional bool
	branch        string // --branch: act in this branch
	opts          verbOpts
	pathArgs      bool // args are paths (clientVerb.paths): a failure without one names args[0]
}

// usageError is a bad invocation (exit 2).
type usageError struct {
	msg  string
	code provider.Code // reported with --json; "" means FS_INVALID_ARGUMENT
}

func (e *usageError) Error() string { return e.msg }

// command parses flags, connects and runs the verb, mapping errors to exit
// codes.
func (v clientVerb) command(ctx context.Context, args []string, sio stdio) int {
	fs := flag.NewFlagSet("dshmount "+v.name, flag.ContinueOnError)
	fs.SetOutput(sio.err)
	e := &clientEnv{io: sio, pathArgs: v.paths}
	fs.StringVar(&e.socket, "socket", "", "control socket of the daemon (default $"+envSocket+", else the daemon whose mount or workspace holds the shell's directory)")
	var session string
	sessionHelp := "session to act for, by id or by name (default $" + envSession + "; empty: a session private to this one call)"
	if v.name == "log" {
		sessionHelp = "only this session's entries, by id or by name (only when given here: $" + envSession + " does not apply to log)"
	}
	fs.StringVar(&session, "session", "", sessionHelp)
	fs.StringVar(&e.cwd, "cwd", "", "workspace-relative directory that relative paths resolve against (default: the shell's directory when it is inside the mount or the workspace, else the workspace root)")
	if v.paths && v.name != "log" {
		fs.StringVar(&e.branch, "branch", "", "act in this branch (see 'dshmount branch') instead of the workspace")
	}
	fs.BoolVar(&e.json, "json", false, "print the raw JSON result; on failure the object {code, message, path} (stdout, as well as the line on stderr)")
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
	var pos []string
	err := parseFlags(fs, sio, func() (err error) { pos, err = parseInterspersed(fs, args); return err })
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
		case "new":
			e.opts.hasNew = true
		case "cwd":
			e.opts.cwdSet = true
		}
	})
	e.args = pos
	if !e.opts.sessionSet {
		session = os.Getenv(envSession)
	}
	if e.socket == "" {
		e.socket = os.Getenv(envSocket)
	}
	e.session = control.SessionID(session)
	if len(pos) < v.minArgs || (v.maxArgs >= 0 && len(pos) > v.maxArgs) {
		return e.report(v.name, &usageError{msg: fmt.Sprintf("expected %s; run 'dshmount %s --help'", v.synopsis, v.name)})
	}
	if (e.version != "" || e.create) && e.unconditional {
		return e.report(v.name, &usageError{msg: "--unconditional excludes --version and --create"})
	}
	if e.version != "" && e.create {
		return e.report(v.name, &usageError{msg: "--version and --create exclude each other"})
	}
	placed := false // e.cwd is where the shell is
	if e.socket == "" {
		p, err := findDaemon()
		if err != nil {
			return e.report(v.name, err)
		}
		e.socket = p.Socket
		if !e.opts.cwdSet {
			e.cwd, placed = p.Rel, true
		}
	}
	client, err := control.DialContext(ctx, e.socket)
	if err != nil {
		return e.report(v.name, &usageError{msg: err.Error(), code: provider.CodeIOError})
	}
	defer client.Close()
	e.client = client
	if e.session != "" {
		if e.session, _, err = resolveSession(ctx, client, string(e.session)); err != nil {
			return e.report(v.name, err)
		}
	}
	if !e.opts.cwdSet && !placed && v.paths {
		if e.cwd, err = shellCwd(ctx, client, e.socket); err != nil {
			return e.report(v.name, err)
		}
	}
	return e.report(v.name, v.do(ctx, e))
}

// failure is an error as the CLI reports it: with --json, this object is
// printed on stdout.
type failure struct {
	// Code is the FS_… code; FS_INVALID_ARGUMENT for a bad invocation,
	// FS_IO_ERROR when the daemon cannot be reached.
	Code provider.Code `json:"code"`
	// Message says what happened and what to do next.
	Message string `json:"message"`
	// Path is the workspace path the error concerns ("" when none).
	Path string `json:"path"`
	// Conflicts and ConflictHunks are a refused commit's or merge's
	// paths and (FS_MERGE_CONFLICT) conflicted regions.
	Conflicts     []string               `json:"conflicts,omitempty"`
	ConflictHunks []control.ConflictHunk `json:"conflictHunks,omitempty"`
}

// report prints err (stderr, and with --json the failure object on stdout)
// and returns the exit status it maps to.
func (e *clientEnv) report(verb string, err error) int {
	if err == nil || errors.Is(err, context.Canceled) {
		return exitOK
	}
	if e.session == "" {
		err = withoutSession(err)
	}
	args := e.args
	if !e.pathArgs { // branch NAME, session ID: not paths
		args = nil
	}
	f, code, line := describeFailure(verb, args, e.cwd, err)
	fmt.Fprintln(e.io.err, line)
	fmt.Fprint(e.io.err, control.ConflictHunksText(f.ConflictHunks))
	if e.json {
		enc := json.NewEncoder(e.io.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(f)
	}
	return code
}

// noSessionHelp explains FS_NOT_OBSERVED to a call made without a session.
const noSessionHelp = "there is no session: without --session or $" + envSession +
	" each dshmount call acts in a session of its own, so what an earlier call read does not count here; " +
	"open one first: export " + envSession + "=$(dshmount session open --name NAME)"

// withoutSession rewrites the FS_NOT_OBSERVED of a call made without a
// session ("you have not read this file in this session" is true, but the
// read the caller remembers was in another call's session).
func withoutSession(err error) error {
	var re *control.RPCError
	if !errors.As(err, &re) || re.Code != provider.CodeNotObserved {
		return err
	}
	c := *re
	c.Message = noSessionHelp
	return &c
}

// reportError prints err for a command without a client environment and
// returns the exit status it maps to.
func reportError(verb string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, context.Canceled) {
		return exitOK
	}
	_, code, line := describeFailure(verb, nil, "", err)
	fmt.Fprintln(stderr, line)
	return code
}

// describeFailure maps err to the failure object, the exit status and the
// line for stderr: "FS_CODE: PATH: message" for a filesystem error (for
// mv, "source PATH" or "destination PATH"), "dshmount VERB: message" for a
// bad invocation or an unreachable daemon.
func describeFailure(verb string, args []string, cwd string, err error) (failure, int, string) {
	var ue *usageError
	if errors.As(err, &ue) {
		code := ue.code
		if code == "" {
			code = provider.CodeInvalidArgument
		}
		return failure{Code: code, Message: ue.msg}, exitUsage, fmt.Sprintf("dshmount %s: %s", verb, ue.msg)
	}
	var f failure
	exit := exitFS
	var re *control.RPCError
	var fe *fsFailure
	switch {
	case errors.As(err, &re) && re.Code != "":
		f = failure{Code: re.Code, Message: re.Message, Path: re.Path, Conflicts: re.Conflicts, ConflictHunks: re.ConflictHunks}
		if re.RPCCode != control.CodeFilesystem {
			exit = exitUsage // invalid params: the invocation was wrong
		}
	case errors.As(err, &re):
		return failure{Code: provider.CodeInvalidArgument, Message: re.Message}, exitUsage,
			fmt.Sprintf("dshmount %s: %s", verb, re.Message)
	case errors.As(err, &fe):
		f = failure{Code: fe.code, Message: fe.msg, Path: fe.path}
	default:
		return failure{Code: provider.CodeIOError, Message: err.Error()}, exitUsage, fmt.Sprintf("dshmount %s: %v", verb, err)
	}
	subject := f.Path
	switch {
	case verb == "mv" && len(args) == 2:
		if f.Path == "" {
			f.Path = displayPath(cwd, args[0])
		}
		names := func(arg string) bool {
			return displayPath(cwd, arg) == f.Path || (path.IsAbs(arg) && strings.HasSuffix(path.Clean(arg), "/"+f.Path))
		}
		side := "source"
		if names(args[1]) && !names(args[0]) {
			side = "destination"
		}
		subject = side + " " + f.Path
	case f.Path == "" && len(args) > 0 && verb != "session" && verb != "patch" && verb != "branch" && f.Code != provider.CodeInvalidArgument:
		f.Path = displayPath(cwd, args[0])
		subject = f.Path
	}
	if subject == "" || strings.Contains(f.Message, subject) {
		return f, exit, fmt.Sprintf("%s: %s", f.Code, f.Message)
	}
	return f, exit, fmt.Sprintf("%s: %s: %s", f.Code, subject, f.Message)
}

// displayPath is how the daemon names arg resolved against the
// workspace-relative cwd: slash-separated and cleaned.
func displayPath(cwd, arg string) string {
	if strings.HasPrefix(arg, "/") {
		return path.Clean(arg)
	}
	return path.Clean(path.Join(cwd, arg))
}

// fsFailure is a filesystem failure reported inside a successful result
// (an incomplete patch).
type fsFailure struct {
	code provider.Code
	msg  string
	path string
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
