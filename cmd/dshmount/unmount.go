package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/dshmount/dshmount/fuse"
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
	abort := fs.Bool("abort", false, "for a hung mount whose daemon no longer answers: abort its FUSE connection\n(programs waiting on it get an error), then detach it (root)")
	fs.Usage = func() {
		fmt.Fprint(sio.err, `Usage: dshmount unmount [--lazy | --abort] MOUNTPOINT

Unmounts a dshmount mount; its daemon then exits. A mount whose daemon was
killed but hangs every program touching it needs --abort (or simply start
dshmount serve again with the same --state, which does the same).

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
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	if *abort {
		if *lazy {
			fmt.Fprintln(sio.err, "dshmount unmount: --abort already detaches; pass one of --lazy and --abort")
			return exitUsage
		}
		if err := fuse.AbortMount(fs.Arg(0)); err != nil {
			fmt.Fprintf(sio.err, "dshmount unmount: %v\n", err)
			return exitFS
		}
		return exitOK
	}
	if err := fuse.Unmount(fs.Arg(0), *lazy); err != nil {
		fmt.Fprintf(sio.err, "dshmount unmount: %v\n", err)
		return exitFS
	}
	return exitOK
}
