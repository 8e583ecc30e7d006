// Command dshbench measures dshmount against the native disk and go-fuse's
// plain loopback. `dshbench run` orchestrates a whole comparison (what
// `make bench` runs); `fs`, `socket` and `fill` are the workload drivers it
// starts on each target, each printing a JSON report.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dshbench run|fs|socket|socketspeed|fill|step [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runAll(os.Args[2:])
	case "fs":
		err = runFS(os.Args[2:])
	case "socket":
		err = runSocket(os.Args[2:])
	case "socketspeed":
		err = runSocketSpeed(os.Args[2:])
	case "fill":
		err = runFill(os.Args[2:])
	case "step":
		err = runStep(os.Args[2:])
	default:
		err = fmt.Errorf("unknown verb %q; use run, fs, socket, socketspeed, fill or step", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dshbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
