package fuse

import (
	"context"
	"os"
	"strconv"
	"strings"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A write by a caller without CAP_FSETID drops the file's set-user-ID bit,
// and its set-group-ID bit when the group may execute the file (the
// kernel's should_remove_suid). For a write through a direct-I/O handle
// the kernel leaves this to the daemon (it flags the request
// FUSE_WRITE_KILL_SUIDGID, which go-fuse's node API does not pass on), and
// the daemon's own write, with its capabilities, keeps the bits: killPrivs
// drops them after the write. Cached handles need nothing (the kernel
// sends the mode change itself before writing), passthrough writes never
// reach the daemon.

// capFsetid is CAP_FSETID's bit in a capability set.
const capFsetid = 4

// privsToKill is the set-id bits a write by a caller without CAP_FSETID
// removes from a file of mode.
func privsToKill(mode uint32) uint32 {
	if mode&unix.S_IFMT != unix.S_IFREG {
		return 0
	}
	kill := mode & unix.S_ISUID
	if mode&unix.S_ISGID != 0 && mode&unix.S_IXGRP != 0 {
		kill |= unix.S_ISGID
	}
	return kill
}

// killPrivs drops the set-id bits of h's file after a write through the
// direct-I/O handle h by the caller of ctx, when that caller lacks
// CAP_FSETID.
func (h *handle) killPrivs(ctx context.Context) {
	if !h.direct {
		return
	}
	bs, err := fstat(h.fd())
	if err != nil {
		return
	}
	kill := privsToKill(bs.st.Mode)
	if kill == 0 {
		return
	}
	caller, ok := gofuse.FromContext(ctx)
	if !ok || caller == nil || hasCapFsetid(caller.Pid, caller.Uid) {
		return
	}
	if err := unix.Fchmod(h.fd(), bs.st.Mode&0o7777&^kill); err != nil {
		h.node.m.log.Warn("drop set-id bits after a write", "path", h.rel, "err", err)
	}
}

// hasCapFsetid reports whether thread tid has CAP_FSETID in its effective
// set; when /proc does not say, whether uid is root.
func hasCapFsetid(tid, uid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return uid == 0
	}
	caps, ok := effectiveCaps(string(b))
	if !ok {
		return uid == 0
	}
	return caps&(1<<capFsetid) != 0
}

// effectiveCaps parses the CapEff line of a /proc status file.
func effectiveCaps(status string) (uint64, bool) {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps, err == nil
		}
	}
	return 0, false
}
