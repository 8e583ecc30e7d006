package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshmount/dshmount/policy"
)

// changingAttrs are the SETATTR fields that change a file (FATTR_FH and
// FATTR_LOCKOWNER only identify the request).
const changingAttrs = gofuse.FATTR_MODE | gofuse.FATTR_UID | gofuse.FATTR_GID | gofuse.FATTR_SIZE |
	gofuse.FATTR_ATIME | gofuse.FATTR_MTIME | gofuse.FATTR_ATIME_NOW | gofuse.FATTR_MTIME_NOW |
	gofuse.FATTR_CTIME | gofuse.FATTR_KILL_SUIDGID

// Setattr implements fs.NodeSetattrer: chmod, chown, truncate, utimens.
// Truncation by a bound caller needs a fresh observation (the kernel sends
// open(O_TRUNC) as an open followed by a SETATTR of size 0); every change is
// recorded.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	m := n.m
	rel := n.rel()
	if in.Valid&changingAttrs == 0 {
		return n.Getattr(ctx, f, out)
	}
	h := asHandle(f)
	if h == nil || n.linked() {
		if errno := m.changeable(rel); errno != 0 {
			return errno
		}
	}
	a := m.actor(ctx)
	if h != nil && h.actor.Session != "" && a.Session == "" {
		a = h.actor
	}

	unlock, lockErr := m.lock(ctx, m.target(rel))
	if lockErr != 0 {
		return lockErr
	}
	defer unlock()
	var before backingStat
	var err error
	if h != nil {
		before, err = fstat(h.fd())
	} else {
		before, err = n.lstat()
	}
	if err != nil {
		return errnoOf(err)
	}
	beforeVer := m.version(&before.st)
	t := m.target(rel)
	_, truncating := in.GetSize()
	if truncating {
		if errno := m.checkChange(a, "truncate", t, &beforeVer); errno != 0 {
			return errno
		}
	}

	var errno syscall.Errno
	if h != nil {
		errno = h.lf.Setattr(ctx, in, out)
	} else {
		errno = n.LoopbackNode.Setattr(ctx, nil, in, out)
	}
	if errno != 0 {
		return errno
	}

	var after backingStat
	if h != nil {
		after, err = fstat(h.fd())
	} else {
		after, err = n.lstat()
	}
	if err != nil {
		return errnoOf(err)
	}
	afterVer := m.bump(&after.st)
	op := policy.OpSetattr
	if truncating {
		op = policy.OpTruncate
	}
	if h != nil && !n.linked() {
		rel = h.rel
	}
	m.record(ctx, a, op, m.target(rel), beforeVer, afterVer, nil)
	if h != nil && h.writable {
		h.noteSetattr(&after.st, afterVer)
	}
	fillAttr(&out.Attr, &after.st)
	return 0
}
