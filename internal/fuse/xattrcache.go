package fuse

import (
	"context"
	"sync/atomic"
	"syscall"

	"github.com/dshmount/dshmount/internal/policy"
)

// The kernel caches no extended attributes: `ls -l` asks for
// security.selinux of every file it lists (go-fuse answers
// security.capability and the POSIX ACL names itself, IgnoreSecurityLabels),
// and each such GETXATTR costs the daemon a resolve, an fstat and a
// getxattr of the backing file. Where no security module labels files,
// none has one, so the daemon remembers, per node, that the backing file
// has no such attribute and answers ENODATA from memory.
//
// Exactness: an absence is remembered with the mount's xattr epoch read
// before the backing file was asked, and trusted only while the epoch is
// unchanged. The epoch moves on every change the mount does not make itself
// (an agent's socket mutation, which publishes a new inode under the name;
// an out-of-band change the watcher reports: a file's ctime, which every
// attribute change moves, is part of what it compares; a change the watcher
// counts as the mount's own but whose attributes may be someone else's,
// DropData), and after every setxattr/removexattr through the mount.
// Nothing else the mount does gives an existing file a label, and a new
// file is a new node, asked once. Directories are not cached: the watcher
// compares only their mode and owner, so a label set on one out of band
// would go unseen. Nor is anything on a branch mount, which reads the
// files it has not changed from the workspace, whose own mount's changes
// this mount's engine does not see.

// cachedAbsent lists the attribute names whose absence is remembered, each
// with its bit in a node's xaAbsent.
var cachedAbsent = map[string]uint64{
	"security.selinux": 1 << 0,
}

// xattrBits is the number of low bits of xaAbsent that hold names; the
// rest holds the epoch they were learnt in.
const xattrBits = 8

// xattrEpochs is the mount's xattr epoch (see above).
type xattrEpochs struct{ n atomic.Uint64 }

// now is the current epoch.
func (x *xattrEpochs) now() uint64 { return x.n.Load() }

// bump forgets every remembered absence.
func (x *xattrEpochs) bump() { x.n.Add(1) }

// observe is a policy.Observer: a change the mount did not make moves the
// epoch.
func (x *xattrEpochs) observe(_ context.Context, ev policy.Event) error {
	if ev.Actor.Channel != policy.ChannelMount {
		x.bump()
	}
	return nil
}

// xaAbsent is a node's remembered absences: epoch<<xattrBits | names.
type xaAbsent struct{ w atomic.Uint64 }

// absent reports whether the node's file is known, in epoch, to lack the
// names of bit.
func (k *xaAbsent) absent(epoch, bit uint64) bool {
	w := k.w.Load()
	return w>>xattrBits == epoch && w&bit != 0
}

// learn remembers that the file lacked the names of bit when asked in
// epoch; an answer from an older epoch than the one remembered is dropped.
func (k *xaAbsent) learn(epoch, bit uint64) {
	for {
		w := k.w.Load()
		next := epoch<<xattrBits | bit
		switch old := w >> xattrBits; {
		case old == epoch:
			next |= w
		case old > epoch:
			return
		}
		if next == w || k.w.CompareAndSwap(w, next) {
			return
		}
	}
}

// cachedXattrAbsent answers ENODATA from memory when the node's file is
// known to lack attr; ok is false when the backing file must be asked.
// It returns the epoch to pass to learnXattr with the answer.
func (n *node) cachedXattrAbsent(attr string) (bit, epoch uint64, ok bool) {
	bit = cachedAbsent[attr]
	if bit == 0 || n.StableAttr().Mode == syscall.S_IFDIR || n.m.cfg.Branch != nil {
		return 0, 0, false
	}
	epoch = n.m.xattrs.now()
	return bit, epoch, n.xa.absent(epoch, bit)
}

// learnXattr remembers the backing file's answer err to a get of the
// attribute of bit, asked in epoch: only its absence is remembered.
func (n *node) learnXattr(bit, epoch uint64, err error) {
	if bit != 0 && err == syscall.ENODATA {
		n.xa.learn(epoch, bit)
	}
}
