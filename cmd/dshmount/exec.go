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

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/policy"
)

// execer replaces the process image; tests substitute it.
type execer struct {
	lookPath func(file string) (string, error)
	exec     func(path string, argv, env []string) error
	pid      func() int
	// cgroup returns this process's cgroup v2 path ("" where there is
	// none); a bind that moved it to a cgroup of its own changes it.
	cgroup func() string
	// supervise runs the command as a child, stays the subreaper of its
	// tree until every process of it has exited, and returns the child's
	// exit code.
	supervise func(path string, argv, env []string) (int, error)
}

// osExecer returns the real one.
func osExecer() execer {
	return execer{lookPath: exec.LookPath, exec: syscall.Exec, pid: os.Getpid, cgroup: ownCgroup, supervise: superviseTree}
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
	socket := fs.String("socket", os.Getenv(envSocket), "control socket of the daemon (default $"+envSocket+", else the daemon whose mount or workspace holds the current directory)")
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

No process of CMD's tree can shed the binding: where the daemon can write cgroup v2, CMD
runs in a cgroup of its own that every process it starts stays in (through setsid, double
forks and its parent's exit); elsewhere dshmount exec stays alive as the subreaper of
CMD's processes and returns once all of them have exited. Closing the session leaves them
bound to a closed session: every guarded operation is then refused.

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
		p, ok := findDaemon()
		if !ok {
			fmt.Fprintf(sio.err, "dshmount exec: no control socket; %s\n", noSocketHelp)
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
	id := policy.SessionID(*session)
	if id == "" {
		if id, err = client.OpenSession(ctx, *name); err != nil {
			client.Close()
			return reportError("exec", err, sio.err)
		}
		fmt.Fprintf(sio.err, "dshmount exec: session %s\n", id)
	}
	before := ex.cgroup()
	err = client.BindSession(ctx, id, ex.pid())
	client.Close()
	if err != nil {
		return reportError("exec", err, sio.err)
	}
	env := append(os.Environ(), envSocket+"="+*socket, envSession+"="+string(id))
	if after := ex.cgroup(); after == "" || after == before {
		// The daemon bound this process by the parent chain only (no
		// writable cgroup v2): a descendant whose parent exits would be
		// reparented to init and leave the bound tree. Stay alive as the
		// subreaper of the tree instead, so orphans are reparented here.
		code, err := ex.supervise(path, argv, env)
		if err != nil {
			fmt.Fprintf(sio.err, "dshmount exec: run %s: %v\n", argv[0], err)
			return exitUsage
		}
		return code
	}
	if err := ex.exec(path, argv, env); err != nil {
		fmt.Fprintf(sio.err, "dshmount exec: run %s: %v\n", argv[0], err)
		return exitUsage
	}
	return exitOK // only a test execer returns
}

// ownCgroup returns the cgroup v2 path of this process ("" without one).
func ownCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if cg, ok := strings.CutPrefix(line, "0::"); ok {
			return cg
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
func superviseTree(path string, argv, env []string) (int, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("become the subreaper of the command's processes: %w", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	child, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
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
