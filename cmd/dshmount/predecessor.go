package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dshmount/dshmount/internal/daemon"
	"github.com/dshmount/dshmount/internal/fuse"
)

// daemonRecordName is the file in the state directory that names the daemon
// serving it while it runs.
const daemonRecordName = "daemon.json"

// predecessorExitWait bounds how long a new daemon waits for a killed one to
// exit once its FUSE connection was aborted.
const predecessorExitWait = 15 * time.Second

// daemonRecord identifies a running daemon and its FUSE connection, so that
// the next daemon on the same state directory can recognise it after a
// crash. It is written once the mount is live and removed on a clean exit.
type daemonRecord struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`  // process start time (clock ticks since boot)
	Mountpoint string `json:"mount"`  // absolute mountpoint
	Device     string `json:"device"` // the mount's "major:minor": its FUSE connection
}

// writeDaemonRecord records this process as the daemon of stateDir.
func writeDaemonRecord(stateDir, mountpoint string) error {
	start, err := daemon.StartTime(os.Getpid())
	if err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	device, err := fuse.MountDevice(mountpoint)
	if err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	b, err := json.Marshal(daemonRecord{PID: os.Getpid(), Start: start, Mountpoint: mountpoint, Device: device})
	if err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	path := filepath.Join(stateDir, daemonRecordName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	return nil
}

// removeDaemonRecord forgets this daemon on a clean exit.
func removeDaemonRecord(stateDir string) error {
	if err := os.Remove(filepath.Join(stateDir, daemonRecordName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove daemon record: %w", err)
	}
	return nil
}

// readDaemonRecord returns the recorded daemon of stateDir, or nil.
func readDaemonRecord(stateDir string) (*daemonRecord, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, daemonRecordName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("daemon record: %w", err)
	}
	var rec daemonRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.PID <= 0 {
		// A torn record names no process; the state lock still protects
		// a live daemon.
		return nil, nil
	}
	return &rec, nil
}

// recoverPredecessor frees what a killed daemon of stateDir still holds.
// SIGKILL normally ends a daemon at once: the kernel closes its FUSE device,
// the mount turns into a dead mount and the state lock is released. But a
// daemon thread can be blocked uninterruptibly in the kernel (dropping a
// cached name waits for a directory lock held by a program's request that
// only the dead daemon could answer): then the process never exits, the
// mount hangs every program that touches it, and the state stays locked.
// The only way out is to abort the FUSE connection, which is what this does
// for a recorded daemon that is dying; a running one is left alone (the
// state lock refuses the new daemon with a clear message).
func recoverPredecessor(stateDir string, log *slog.Logger) error {
	return predecessorRecovery{lifecycle: daemon.LifecycleOf, abort: fuse.AbortConnection, exitWait: predecessorExitWait,
		branchDevices: branchMountDevices}.run(stateDir, log)
}

// branchMountDevices returns the FUSE connections of the mounts at the
// branch mount directories recorded in stateDir.
func branchMountDevices(stateDir string) []string {
	var out []string
	for _, dir := range daemon.RecordedBranchMounts(stateDir) {
		if dev, err := fuse.MountDevice(dir); err == nil && dev != "" {
			out = append(out, dev)
		}
	}
	return out
}

// predecessorRecovery is recoverPredecessor with its process and kernel
// operations as fields, so tests can play a stuck daemon.
type predecessorRecovery struct {
	lifecycle func(pid int, start uint64) (daemon.Lifecycle, error)
	abort     func(device string) error
	exitWait  time.Duration
	// branchDevices returns the connections of the killed daemon's branch
	// mounts (nil: none); a thread can be stuck on any of them.
	branchDevices func(stateDir string) []string
}

// run frees what a killed daemon of stateDir still holds.
func (r predecessorRecovery) run(stateDir string, log *slog.Logger) error {
	rec, err := readDaemonRecord(stateDir)
	if err != nil || rec == nil {
		return err
	}
	state, err := r.lifecycle(rec.PID, rec.Start)
	if err != nil {
		return fmt.Errorf("previous daemon pid %d: %w", rec.PID, err)
	}
	if state != daemon.Dying {
		return nil
	}
	log.Warn("the previous daemon was killed but cannot exit (a thread is blocked in the kernel on its own mount); aborting its FUSE connection",
		"pid", rec.PID, "mount", rec.Mountpoint, "device", rec.Device)
	if err := r.abort(rec.Device); err != nil && !errors.Is(err, fuse.ErrNoConnection) {
		return fmt.Errorf("previous daemon pid %d was killed but is stuck in the kernel, holding mount %s; "+
			"as root, run: echo 1 > /sys/fs/fuse/connections/<minor of %s>/abort: %w", rec.PID, rec.Mountpoint, rec.Device, err)
	}
	if r.branchDevices != nil {
		for _, dev := range r.branchDevices(stateDir) {
			if dev == rec.Device {
				continue
			}
			log.Warn("aborting the FUSE connection of the previous daemon's branch mount", "pid", rec.PID, "device", dev)
			if err := r.abort(dev); err != nil && !errors.Is(err, fuse.ErrNoConnection) {
				log.Warn("could not abort a branch mount's FUSE connection", "device", dev, "err", err)
			}
		}
	}
	deadline := time.Now().Add(r.exitWait)
	for {
		state, err := r.lifecycle(rec.PID, rec.Start)
		if err != nil {
			return fmt.Errorf("previous daemon pid %d: %w", rec.PID, err)
		}
		if state == daemon.Gone {
			log.Info("the previous daemon exited", "pid", rec.PID)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("previous daemon pid %d is still %s %v after its FUSE connection %s was aborted",
				rec.PID, state, r.exitWait, rec.Device)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
