package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/registry"
)

// unmountCommand is `dshmount unmount`.
func unmountCommand() command {
	return command{
		name:    "unmount",
		summary: "unmount a dshmount mount (the daemon then exits)",
		run:     runUnmount,
	}
}

// runUnmount unmounts MOUNTPOINT; --lazy detaches a busy mount.
func runUnmount(_ context.Context, args []string, sio stdio) int {
	fs := flag.NewFlagSet("unmount", flag.ContinueOnError)
	fs.SetOutput(sio.err)
	lazy := fs.Bool("lazy", false, "detach even when busy; open files keep working until closed")
	wait := fs.Duration("wait", 15*time.Second, "how long to wait for the daemon to exit once unmounted (0: do not wait)")
	abort := fs.Bool("abort", false, "for a hung mount whose daemon no longer answers: abort its FUSE connection\n(programs waiting on it get an error), then detach it (root)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount unmount [--lazy | --abort] [--wait D] MOUNTPOINT

Unmounts a dshmount mount; its daemon then exits, and unmount waits for that
(up to --wait; it says so when the daemon did not exit). A mount whose daemon was
killed but hangs every program touching it needs --abort (or simply start
dshmount serve again with the same --state, which does the same).

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
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	daemon, known := daemonOf(fs.Arg(0))
	if *abort {
		if *lazy {
			fmt.Fprintln(sio.err, "dshmount unmount: --abort already detaches; pass one of --lazy and --abort")
			return exitUsage
		}
		if err := fuse.AbortMount(fs.Arg(0)); err != nil {
			fmt.Fprintf(sio.err, "dshmount unmount: %v\n", err)
			return exitFS
		}
	} else if err := fuse.Unmount(fs.Arg(0), *lazy); err != nil {
		fmt.Fprintf(sio.err, "dshmount unmount: %v\n", err)
		return exitFS
	}
	if *abort {
		// The daemon of an aborted mount is hung (stopped, or stuck in the
		// kernel): it may never exit, and freeing the mount is what was
		// asked. Say so, without failing.
		if known && !waitExit(daemon.PID, min(*wait, abortWait)) {
			fmt.Fprintf(sio.err, "dshmount unmount: %s is free; its daemon (pid %d) has not exited (stopped or stuck?): kill -9 %d\n",
				fs.Arg(0), daemon.PID, daemon.PID)
		}
		return exitOK
	}
	if known && *wait > 0 && !waitExit(daemon.PID, *wait) {
		fmt.Fprintf(sio.err, "dshmount unmount: %s is unmounted, but its daemon (pid %d) has not exited after %s; see its log\n",
			fs.Arg(0), daemon.PID, *wait)
		return exitFS
	}
	return exitOK
}

// abortWait bounds the wait for the daemon of an aborted mount.
const abortWait = 2 * time.Second

// daemonOf returns the registered daemon serving mountpoint.
func daemonOf(mountpoint string) (registry.Entry, bool) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return registry.Entry{}, false
	}
	entries, err := registry.List(registry.DefaultDir())
	if err != nil {
		return registry.Entry{}, false
	}
	for _, e := range entries {
		if filepath.Clean(e.Mount) == abs {
			return e, true
		}
	}
	return registry.Entry{}, false
}

// waitExit waits up to d for process pid to exit; false if it is still
// there.
func waitExit(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits for its parent to reap
// it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
