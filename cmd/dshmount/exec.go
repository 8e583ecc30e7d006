package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// execer runs the command; tests substitute it.
type execer struct {
	lookPath func(file string) (string, error)
	pid      func() int
	// supervise runs the command as a child in dir ("": this process's
	// directory), stays the subreaper of its tree until every process of
	// it has exited, and returns the child's exit code.
	supervise func(path, dir string, argv, env []string) (int, error)
}

// osExecer returns the real one.
func osExecer() execer {
	return execer{lookPath: exec.LookPath, pid: os.Getpid, supervise: superviseTree}
}

// runExec implements 'dshmount exec'.
func runExec(ctx context.Context, args []string, sio stdio) int {
	return execWith(ctx, args, sio, osExecer())
}

// execWith binds the current pid to a session, then runs the command as
// its child, so the command and its descendants are guarded on the mount.
func execWith(ctx context.Context, args []string, sio stdio, ex execer) int {
	fs := flag.NewFlagSet("dshmount exec", flag.ContinueOnError)
	fs.SetOutput(sio.err)
	socket := fs.String("socket", "", "control socket of the daemon (default $"+envSocket+", else the daemon whose mount or workspace holds the current directory)")
	session := fs.String("session", "", "session to act for, by id or by name (default $"+envSession+"; empty: open a new one)")
	name := fs.String("name", "", "name of the new session when --session is empty")
	branchName := fs.String("branch", "", "run CMD in this branch's mount, bound to a new session acting in the branch")
	strict := fs.Bool("strict", false, "CMD's processes read before every write, even in a session that is not strict (a session exec opens is strict anyway)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount exec [--socket S] [--session ID | --name N] [--strict] [--branch NAME] -- CMD [ARGS...]

Binds this process to a session, then runs CMD (looked up in PATH) as its child. CMD and
every process it starts act for the session on the mount: opening a file for reading
records an observation; writing, truncating, renaming over or removing a file it read
needs that observation to be fresh (ESTALE when stale). A file the session never read
may be changed only if the session was opened before CMD started (--session,
$DSH_SESSION) and nobody else changed it since the session opened (EACCES otherwise,
naming who changed it); a session opened with --strict always needs a read (EACCES).
With --strict, CMD's processes always need a read (EACCES) even in a session that is not
strict: the rule belongs to this binding, other processes of the session keep theirs.
Without --session a new strict session is opened, its id printed on stderr, and closed
again when the last process of CMD's tree has exited (a server CMD left running in the
background keeps it open). Inside a repository's git directory (a .git directory, or the
workspace directory a .git file points to, as 'git init --separate-git-dir' makes; except
hooks/, config and info/) and under 'serve --unguarded' paths, changes are recorded but
not guarded. CMD gets
DSH_SOCKET and DSH_SESSION in its environment, so dshmount verbs it runs act for the
same session. Without --socket or $DSH_SOCKET, the daemon whose mount or workspace
holds the current directory is used.

With --branch NAME, the new session acts in branch NAME (session.open {branch}: its
socket requests default to the branch) and CMD starts in the branch's mount, at the
same relative directory as the current one when that is inside the workspace's
mount, the workspace or a branch's mount (else at the mount's root): its changes stay
in the branch until 'dshmount branch commit NAME'. The branch must be mounted
('dshmount branch mount NAME DIR', or 'dshmount branch create NAME --mount DIR').
--branch excludes --session.

When CMD exits non-zero, every change the daemon refused for the session while it ran
is explained on stderr, one line each ('dshmount: refused write to a.txt: FS_…, why').

No process of CMD's tree can shed the binding: where the daemon can write cgroup v2, CMD
runs in a cgroup of its own that every process it starts stays in (through setsid, double
forks and its parent's exit); dshmount exec stays alive as the subreaper of CMD's
processes and returns CMD's exit status once all of them have exited. Closing the
session leaves them bound to a closed session: every guarded operation is then refused.
A bound process is its session everywhere: exec run inside a bound tree runs CMD as that
session (--session and a new session do not switch it; --branch does), and the dshmount
verbs it runs cannot pass --unconditional.

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
	sessionSet := false
	fs.Visit(func(f *flag.Flag) { sessionSet = sessionSet || f.Name == "session" })
	if *branchName != "" && sessionSet {
		fmt.Fprintln(sio.err, "dshmount exec: --branch opens a session of its own in the branch; it excludes --session")
		return exitUsage
	}
	if !sessionSet && *branchName == "" {
		*session = os.Getenv(envSession)
	}
	if *socket == "" {
		*socket = os.Getenv(envSocket)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(sio.err, "dshmount exec: no command; usage: dshmount exec --session ID -- CMD [ARGS...]")
		return exitUsage
	}
	if *socket == "" {
		p, err := findDaemon()
		if err != nil {
			fmt.Fprintf(sio.err, "dshmount exec: %v\n", err)
			return exitUsage
		}
		*socket = p.Socket
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
	dir := ""
	if *branchName != "" {
		if dir, err = branchWorkDir(ctx, client, *branchName, sio); err != nil {
			client.Close()
			return reportError("exec", err, sio.err)
		}
	}
	id, _, err := resolveSession(ctx, client, *session)
	if err != nil {
		client.Close()
		return reportError("exec", err, sio.err)
	}
	owned := id == "" // a session opened here is closed when the tree has exited
	if owned {
		// A session opened for the command has seen nothing: it reads
		// before it writes (strict), as --strict says explicitly.
		if id, err = client.OpenSessionWith(ctx, control.SessionOpenParams{Name: *name, Branch: *branchName, Strict: true}); err != nil {
			client.Close()
			return reportError("exec", err, sio.err)
		}
		fmt.Fprintf(sio.err, "dshmount exec: session %s\n", id)
	}
	mark := newestSeq(ctx, client)
	// --strict binds strictly: CMD's tree reads before every write even
	// when the session it joins is not strict.
	bound, err := client.BindWith(ctx, control.SessionBindParams{Session: id, PID: ex.pid(), Strict: *strict && !owned})
	if err == nil && bound != id {
		// This process is bound already: it stays its session.
		fmt.Fprintf(sio.err, "dshmount exec: this process is bound to session %s; the command runs as it\n", bound)
		if owned {
			err = client.CloseSession(ctx, id)
		}
		id, owned = bound, false
	}
	client.Close()
	if err != nil {
		return reportError("exec", err, sio.err)
	}
	env := append(withoutVars(os.Environ(), envSocket, envSession), envSocket+"="+*socket, envSession+"="+string(id))
	if dir != "" {
		env = append(withoutVars(env, "PWD"), "PWD="+dir)
	}
	// Run the command as a child and stay the subreaper of its tree: when
	// the last process of it has exited, the refusals the daemon logged for
	// the session meanwhile are explained here, and a session opened for
	// the command is closed.
	code, err := ex.supervise(path, dir, argv, env)
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: run %s: %v\n", argv[0], err)
		code = exitUsage
	}
	afterTree(context.WithoutCancel(ctx), *socket, id, owned, mark, code != exitOK, sio)
	return code
}

// withoutVars returns env without the variables names (a duplicate would
// shadow the value exec sets: getenv returns the first).
func withoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// newestSeq returns the sequence number of the newest audit entry (0 when
// there is none or the log cannot be read).
func newestSeq(ctx context.Context, client *control.Client) uint64 {
	res, err := client.Log(ctx, control.LogParams{Limit: 1})
	if err != nil || len(res.Entries) == 0 {
		return 0
	}
	return res.Entries[0].Seq
}

// afterTree runs once every process of the command has exited: when the
// command failed, it prints one line per refusal the daemon logged for
// the session after mark (oldest first); when the session was opened for
// the command, it closes it.
func afterTree(ctx context.Context, socket string, id control.SessionID, owned bool, mark uint64, failed bool, sio stdio) {
	if !failed && !owned {
		return
	}
	client, err := control.DialContext(ctx, socket)
	if err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: %v\n", err)
		return
	}
	defer client.Close()
	if failed {
		refused := true
		res, err := client.Log(ctx, control.LogParams{Session: id, Since: mark, Refused: &refused, Limit: control.DefaultLogLimit})
		if err == nil {
			for i := len(res.Entries) - 1; i >= 0; i-- {
				en := res.Entries[i]
				fmt.Fprintln(sio.err, refusalLine(en, staleCause(ctx, client, en, id)))
			}
		}
	}
	if owned {
		if err := client.CloseSession(ctx, id); err != nil {
			fmt.Fprintf(sio.err, "dshmount exec: close session %s: %v\n", id, err)
		}
	}
}

// refusalLine explains one refusal for the person who ran the command:
// "dshmount: refused write to src/main.go: FS_STALE_VERSION, changed since
// you read it (by a write through the mount (pid 12), 3s ago)". cause, when
// known, replaces the logged reason of a stale refusal.
func refusalLine(en control.LogEntry, cause string) string {
	target := en.Path
	if en.To != "" {
		target += " -> " + en.To
	}
	prep := "to"
	switch en.Op {
	case control.OpDelete, control.OpUnlink, control.OpMove, control.OpRename:
		prep = "of"
	}
	reason := en.Reason
	if cause != "" {
		reason = "changed since you read it (" + cause + ")"
	}
	line := fmt.Sprintf("dshmount: refused %s %s %s: %s, %s", en.Op, prep, target, en.Refused, reason)
	if en.Channel == control.ChannelMount && en.PID != 0 {
		line += fmt.Sprintf(" (pid %d)", en.PID)
	}
	if en.Suppressed > 0 {
		line += fmt.Sprintf(" (and %d times more before)", en.Suppressed)
	}
	return line
}

// staleCause words who made the change that made a stale refusal stale:
// the newest change of its path before it ("" when unknown or not stale).
func staleCause(ctx context.Context, client *control.Client, en control.LogEntry, self control.SessionID) string {
	if en.Refused != provider.CodeStaleVersion {
		return ""
	}
	changes := false
	res, err := client.Log(ctx, control.LogParams{Path: en.Path, Refused: &changes, Limit: 20})
	if err != nil {
		return ""
	}
	for _, c := range res.Entries {
		if c.Seq < en.Seq && c.Session != self {
			return control.DescribeChange(control.Change{Op: c.Op, Channel: c.Channel, PID: c.PID, Session: c.Session,
				SessionName: c.SessionName, Unconditional: c.Unconditional, Age: time.Since(c.Time)}, self)
		}
	}
	return ""
}

// superviseTree starts the command as a child, as the child subreaper of
// its tree (PR_SET_CHILD_SUBREAPER): every orphan of the tree is reparented
// to this bound process rather than to init, so the parent chain of every
// descendant still leads to the binding. It reaps until the whole tree has
// exited, then returns the command's exit code (128+N for a signal N).
// SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are passed on to the command;
// SIGINT and SIGQUIT, which a terminal sends to the command as well, are
// not acted on here.
func superviseTree(path, dir string, argv, env []string) (int, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("become the subreaper of the command's processes: %w", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	child, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				if sig, ok := s.(syscall.Signal); ok && sig != syscall.SIGINT && sig != syscall.SIGQUIT {
					_ = syscall.Kill(child, sig)
				}
			}
		}
	}()
	code := exitFS
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return code, nil
		case err != nil:
			return 0, fmt.Errorf("wait for the command's processes: %w", err)
		}
		if pid != child {
			continue // an orphan of the tree
		}
		switch {
		case ws.Exited():
			code = ws.ExitStatus()
		case ws.Signaled():
			code = 128 + int(ws.Signal())
		}
	}
}
