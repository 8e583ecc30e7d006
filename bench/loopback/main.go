// Command loopback mounts go-fuse's plain loopback filesystem
// (fs.NewLoopbackRoot) with go-fuse's defaults: the reference a guarded
// mount is compared with in `make bench`. It prints "ready" once mounted and
// unmounts on SIGINT/SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	timeout := flag.Duration("timeout", time.Second, "entry and attribute timeout (go-fuse's default is 1s)")
	debug := flag.Bool("debug", false, "log every FUSE request (go-fuse's debug log, on stderr)")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: loopback [--timeout D] [--debug] SOURCE MOUNTPOINT")
		os.Exit(2)
	}
	root, err := fs.NewLoopbackRoot(flag.Arg(0))
	if err != nil {
		log.Fatalf("loopback root: %v", err)
	}
	to := *timeout
	server, err := fs.Mount(flag.Arg(1), root, &fs.Options{
		EntryTimeout: &to, AttrTimeout: &to,
		MountOptions: fuse.MountOptions{
			FsName: flag.Arg(0), Name: "loopback",
			DirectMount: os.Geteuid() == 0, Debug: *debug,
		},
	})
	if err != nil {
		log.Fatalf("mount: %v", err)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		_ = server.Unmount()
	}()
	server.Wait()
}
