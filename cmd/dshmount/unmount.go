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
	fs.Usage = func() {
		fmt.Fprint(sio.err, "Usage: dshmount unmount [--lazy] MOUNTPOINT\n\nFlags:\n")
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
	if err := fuse.Unmount(fs.Arg(0), *lazy); err != nil {
		fmt.Fprintf(sio.err, "dshmount unmount: %v\n", err)
		return exitFS
	}
	return exitOK
}
