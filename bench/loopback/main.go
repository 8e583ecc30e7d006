// Command loopback mounts go-fuse's plain loopback filesystem
// (fs.NewLoopbackRoot) with go-fuse's defaults: the reference a guarded
// mount is compared with in `make bench`. It prints "ready" once mounted and
// unmounts on SIGINT/SIGTERM. With -stats SOCKET it answers each
// connection on that unix socket with one JSON line, the requests it
// answered by opcode and its CPU time, in the field names of dshmount's
// daemon.status: {"fuseRequests":{"LOOKUP":n,…},"cpuSeconds":s}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dshmount/dshmount/internal/fuse/reqcount"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	timeout := flag.Duration("timeout", time.Second, "entry and attribute timeout (go-fuse's default is 1s)")
	debug := flag.Bool("debug", false, "log every FUSE request (go-fuse's debug log, on stderr)")
	stats := flag.String("stats", "", "answer request counts and CPU time on this unix `SOCKET`")
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
	opts := &fs.Options{
		EntryTimeout: &to, AttrTimeout: &to,
		MountOptions: fuse.MountOptions{
			FsName: flag.Arg(0), Name: "loopback",
			DirectMount: os.Geteuid() == 0, Debug: *debug,
		},
	}
	// fs.Mount's steps, with the raw filesystem wrapped in the counters.
	counts := &reqcount.Counts{}
	server, err := fuse.NewServer(reqcount.Wrap(fs.NewNodeFS(root, opts), counts), flag.Arg(1), &opts.MountOptions)
	if err != nil {
		log.Fatalf("mount: %v", err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		_ = server.Unmount()
		log.Fatalf("mount: %v", err)
	}
	if *stats != "" {
		if err := serveStats(*stats, counts); err != nil {
			_ = server.Unmount()
			log.Fatalf("stats socket: %v", err)
		}
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

// statsReply is one answer on the stats socket.
type statsReply struct {
	FuseRequests map[string]uint64 `json:"fuseRequests"`
	CPUSeconds   float64           `json:"cpuSeconds"`
}

// serveStats answers every connection on the unix socket at path with the
// counters and the process's CPU time, then closes it.
func serveStats(path string, counts *reqcount.Counts) error {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen %s: %w", path, err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
			_ = json.NewEncoder(c).Encode(statsReply{FuseRequests: counts.Snapshot(), CPUSeconds: cpu})
			_ = c.Close()
		}
	}()
	return nil
}
