package fuse

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// A write by a caller without CAP_FSETID drops the file's set-user-ID bit,
// and its set-group-ID bit when the group may execute the file (the
// kernel's should_remove_suid); so do a truncate by such a caller and any
// chown. The mount negotiates FUSE_HANDLE_KILLPRIV_V2: the kernel then
// leaves all of it to the daemon (and spares the request stream a forced
// GETATTR before every chown, and, the superblock being SB_NOSEC, the
// security.capability probe before writes). The daemon's own calls, with its
// capabilities, keep the bits, so it drops them itself:
//
//   - after a write, fallocate or copy_file_range through a handle, when the
//     caller lacks CAP_FSETID (killPrivs; the kernel flags such writes
//     FUSE_WRITE_KILL_SUIDGID, which go-fuse's node API does not pass on,
//     and flags nothing on fallocate and copy_file_range);
//   - after a SETATTR the kernel flags FATTR_KILL_SUIDGID (killOnSetattr:
//     every chown, and a truncate or open(O_TRUNC) by a caller without
//     CAP_FSETID).
//
//   - on a SETATTR that changes nothing (killRequest): a passthrough write,
//     which the kernel hands to the backing file with the daemon's
//     credentials, first runs the kernel's file_remove_privs, which with
//     KILLPRIV_V2 strips the mode change it computed and sends the rest, an
//     empty SETATTR. It is sent only when the caller lacks CAP_FSETID and
//     the file has bits to drop (otherwise the inode is marked S_NOSEC and
//     nothing is sent), so it stands for exactly that request.
//
// security.capability needs nothing: the backing file system drops it on
// the daemon's write, truncate or chown whatever the daemon's capabilities.

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

// killPrivs drops the set-id bits of h's file after a write through h by
// the caller of ctx, when that caller lacks CAP_FSETID.
func (h *handle) killPrivs(ctx context.Context) {
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

// killOnSetattr drops the set-id bits of the node's file after a SETATTR
// flagged FATTR_KILL_SUIDGID; st is the file's stat after the change, and is
// updated. h is the request's handle, if any.
func (n *node) killOnSetattr(h *handle, st *unix.Stat_t) error {
	kill := privsToKill(st.Mode)
	if kill == 0 {
		return nil
	}
	mode := st.Mode & 0o7777 &^ kill
	if h != nil {
		if err := unix.Fchmod(h.fd(), mode); err != nil {
			return fmt.Errorf("drop set-id bits: %w", err)
		}
	} else if err := n.chmodOwn(mode); err != nil {
		return err
	}
	st.Mode = st.Mode&^0o7777 | mode
	return nil
}

// chmodOwn sets the mode of the node's own backing file through an O_PATH
// descriptor (as setattrBacking does, through the mount's backend).
func (n *node) chmodOwn(mode uint32) error {
	_, fd, _, done, err := n.ownPathFd(n.rel(), false)
	if err != nil {
		return err
	}
	defer done()
	if err := unix.Chmod(procPath(fd), mode); err != nil {
		return fmt.Errorf("drop set-id bits: %w", err)
	}
	n.m.be.changed(n.rel())
	return nil
}

// killRequest turns a SETATTR that changes nothing into the mode change that
// drops the set-id bits of the node's file, when the file has bits to drop
// and the caller of ctx lacks CAP_FSETID (see above); it reports whether it
// did.
func (n *node) killRequest(ctx context.Context, in *gofuse.SetAttrIn) bool {
	if in.Valid&changingAttrs != 0 || n.StableAttr().Mode != syscall.S_IFREG {
		return false
	}
	bs, err := n.lstat()
	if err != nil {
		return false
	}
	kill := privsToKill(bs.st.Mode)
	if kill == 0 {
		return false
	}
	caller, ok := gofuse.FromContext(ctx)
	if !ok || caller == nil || hasCapFsetid(caller.Pid, caller.Uid) {
		return false
	}
	in.Valid |= gofuse.FATTR_MODE
	in.Mode = bs.st.Mode & 0o7777 &^ kill
	return true
}
