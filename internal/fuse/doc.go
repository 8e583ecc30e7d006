// Package fuse serves the workspace view as a real filesystem: a go-fuse v2
// node tree, passthrough over the backing directory, with the guard hooks
// of the policy engine at the points where a file changes.
//
// It owns the mapping of kernel requests to the view and to the policy
// hooks. It must not know about the control socket: agents' mutations reach
// it only as policy events (to invalidate kernel caches).
//
// # From a kernel request to a guarded operation
//
// Every request carries the caller's pid and uid (fuse.FromContext). The
// Bindings (procbind) map the pid to a session: by its binding cgroup (one
// per dshmount exec, inherited by every descendant), else through its parent
// chain and start times; a caller with a session is "bound" (an agent's
// shell, build, editor), every other caller is "unbound" (a person's
// editor). A binding outlives its session: a process of a closed session is
// refused every guarded operation. The guard covers the mount only: a bound
// process that reaches the backing directory itself is not guarded, so a
// deployment runs agents in a mount namespace that shows only the mount.
//
//	LOOKUP / READDIR   the view decides: a hidden path does not exist
//	                   (ENOENT; left out of listings)
//	OPEN for reading   a bound caller records present(version) of the file
//	                   it opened: the observation an agent needs to change it
//	OPEN for writing,  a bound caller needs a fresh observation (guard.go,
//	SETATTR size,      the one chokepoint: guardChange / guardHandle):
//	UNLINK, RENAME       unseen         → EACCES
//	of or over a file,   observed stale → ESTALE
//	WRITE, FALLOCATE,    observed absent→ ENOENT
//	COPY_FILE_RANGE    (through a bound descriptor: the session's own
//	                   changes since its last guarded point are its own)
//	CREATE (absent)    allowed, unless the session saw the file present
//	                   (someone removed what it read: ESTALE)
//	RENAME of a        the same decision for every entry below it
//	directory          (renamedir.go: guardTree)
//	OPEN for writing   EBUSY while a person holds the file open with
//	                   passthrough (its writes would bypass the daemon)
//	chmod, chown,      allowed, recorded, grant nothing; the session's own
//	utimes, xattrs     change of a thing without bytes keeps its observation
//	every mutation     calls Engine.RecordMount (last writer, audit entry
//	                   with the pid, and a bound session's new observation)
//
// Read-only paths of the view refuse every mutation with EROFS; hidden paths
// cannot be created (EACCES). Versions name bytes and are computed by the
// provider/version.Versioner (SHA-256 of the content; guards always hash,
// reports may use the stat-keyed digest cache), so the token an agent gets
// from the socket, the token in the xattr user.dsh.version on the mount and
// the token the guard compares are one.
//
// # Writes and passthrough
//
// go-fuse's LoopbackFile can hand the kernel the backing descriptor
// (FOPEN_PASSTHROUGH, kernel ≥ 6.9, as root). Then the kernel reads and
// writes the backing file itself and WRITE never reaches the daemon. So no
// guard can live only in Write: the decision is taken at OPEN (and SETATTR,
// RENAME, UNLINK), a bound writer's handle is direct I/O so its writes do
// reach Write (ioModes in guard.go; refused while another handle is
// passthrough), and the record of a change is made
// when the handle is flushed (close), fsynced or released. A handle knows it changed the file from a
// dirty flag (Write without passthrough) or because the backing stat moved;
// a passthrough handle opened for writing that never recorded anything
// records once at release, because a same-size rewrite within one timestamp
// tick is invisible in the stat. Config.Passthrough switches passthrough off
// (every read and write then goes through the daemon).
//
// # Agent edits and the kernel caches
//
// The control socket publishes atomically: a new inode replaces the old one
// under the name. The kernel caches names (entry timeout), attributes
// (attribute timeout) and pages. An Engine observer invalidates, for each
// socket mutation, the old inode's data and attributes (NotifyContent) and
// the name (NotifyEntry, NotifyDelete for deletes), so `cat` right after an
// agent's edit shows the new bytes. A name the kernel already resolves to
// the file it holds keeps its entry (the watcher's news of a directory a
// shell has entered since must not unhash the shell's working directory);
// its attributes and its parent's listing are dropped (but see Deadlocks: an entry
// notification can make a SIGKILLed daemon unkillable). When a name stays
// cached anyway, operations on its node work on what the name holds now
// (node.current); a node whose name is gone, or holds a file of another
// type, answers ESTALE, and the kernel then walks the path again with
// LOOKUP_REVAL (so open(O_CREAT) creates the file).
// Out-of-band changes to the backing directory (git checkout there, another program) are not seen
// by FUSE; the default timeouts (10 s, DefaultAttrTimeout) bound how long
// the mount shows old attributes (serve --attr-timeout / --entry-timeout
// shorten them); opens see the new file at once. Changes made through the
// mount need no invalidation: the kernel made them.
//
// # The backing tree is reached only through the root descriptor
//
// Every backing operation is relative to the O_PATH descriptor of the
// workspace root (backing.go): the directory holding an entry is opened
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) and the entry is used
// with *at calls that do not follow a final link (chmod, truncate and
// xattrs go through /proc/self/fd of an O_PATH descriptor of the entry). A
// backing directory or file swapped out of band for a link, even a link
// inside the workspace, is refused with EACCES and never followed; a
// mount-relative path below PATH_MAX works even when the backing absolute
// path is longer. node embeds a bare fs.Inode, not go-fuse's LoopbackNode,
// whose operations use absolute paths. While the backing tree is watched,
// the directory descriptors are cached by path (dirfds.go, capped by
// Config.DirFDs) and dropped with their subtree on every rename or removal
// the mount makes or the socket and the watcher report.
//
// # Branch mounts
//
// With Config.Branch the mount serves a branch (overlay/branch) instead of
// the workspace: the same nodes, guard and records, over another backend
// (backend.go: wsBackend for the workspace, branchBackend in branchfs.go).
// The backend says which backing entry a path is read from (the branch's
// upper directory, the workspace, or none for a whiteout), copies a
// workspace file up before its first change, makes, removes and renames
// names through the branch's operations (so its change records stay the
// one truth a commit reads), merges directory listings, and maps a copied
// file's new inode to the identity the mount showed. Targets are the
// branch's ("branch/NAME/rel"), so guards and observations are per
// (branch, path); the hide and read-only rules are Config.View's, built
// over the branch. Server.BaseObserver, added to the workspace's engine,
// drops the branch mount's cached view of workspace paths that change.
// Hard links and renames of the workspace's directories in a branch are
// EXDEV (mv copies), special files EPERM.
//
// # Set-id bits and security attributes
//
// The mount negotiates FUSE_HANDLE_KILLPRIV_V2, so the kernel neither
// fetches attributes again before every chown nor probes
// security.capability before writes; the daemon drops set-uid and set-gid
// bits itself, exactly where the disk would (killpriv.go). It also
// remembers which files have no security.selinux, the attribute every
// `ls -l` asks for, until a change it did not make (xattrcache.go).
//
// # Callers
//
// Resolving a caller's session costs /proc reads; the answer for a thread
// id is cached for callerTTL (1 s) and the cache is cleared on every bind
// (Server.ForgetCallers), see callers.go.
//
// # Deadlocks and other pitfalls
//
//   - The daemon never touches its own mountpoint: it works on the backing
//     directory through an O_PATH descriptor of its root, and
//     serve refuses a mountpoint inside the workspace (or above it). Stat,
//     exec, epoll or mmap through the mount from the daemon would deadlock.
//   - Kernel notifications are sent from the invalidator goroutine, never
//     from a FUSE handler: the kernel takes inode locks that the request
//     being served may hold. Socket mutations wait for their invalidation a
//     bounded time (notifyWait), so a stuck kernel cannot stall the socket.
//     Known defect: an entry notification (inval_entry, delete) takes the
//     directory's inode lock, which a client's create, rename, lookup or
//     readdir in that directory holds while it waits for the daemon's
//     answer. A SIGKILL at that moment leaves the notifying thread
//     uninterruptible in the kernel: the process never exits, /dev/fuse is
//     never released and the mount hangs until the connection is aborted
//     (/sys/fs/fuse/connections/N/abort). Attribute-only invalidation
//     (NotifyContent at a negative offset) takes no such lock, but without
//     dropping the name one kernel inode stands for both the old file
//     (open descriptors, fstat) and the new one (lstat, new opens), and
//     the mount shows wrong sizes or old data.
//   - go-fuse warns "rawBridge.getattr: overriding ino X with Y" when a
//     node's attributes carry another inode number, as an old node's do
//     when its name now holds a file a socket write published. Getattr and
//     Statx report the node's own inode number, so the warning does not
//     appear; it was harmless: go-fuse reports the node's number anyway and
//     the kernel keys the inode by node id.
//   - go-fuse keys nodes by (mode, ino, generation). The generation is the
//     backing file's birth time, so a recycled inode number is a new node.
//     Versions name bytes, so a hard link or a recycled inode number can
//     neither bypass a guard nor repeat a stale token: only the bytes count.
//   - ENOSYS is remembered by the kernel for the whole mount; no operation a
//     common program needs answers it. O_TMPFILE answers EOPNOTSUPP (a
//     nameless file cannot be guarded by path); ioctls answer ENOTTY; POSIX
//     and flock locks are handled by the kernel for everyone using the mount
//     (they do not conflict with programs using the backing directory).
//   - Interrupts (a program receiving a signal, including the Go runtime's
//     SIGURG) cancel the request context. Only real waits honour it (a
//     file's lock, a branch commit), and only once they have gone on for
//     interruptGrace past it: a quick metadata operation finishes instead
//     of answering a spurious EINTR. Records of completed mutations run on
//     an uncancellable context so an interrupt never loses one.
//   - A crashed daemon leaves "transport endpoint is not connected";
//     CleanupStale detaches such a mount before a new one. A killed daemon
//     whose invalidation thread waits in the kernel for a directory lock
//     (held by a request only that daemon could answer) cannot exit and its
//     mount hangs; AbortConnection (fusectl) turns it into a dead mount, and
//     MountDevice names the connection without touching the mount. A panic in a
//     handler answers EIO for that request (PanicHandler) and is logged.
//   - The daemon usually runs as root (no fusermount needed): default
//     permissions make the kernel check file modes against the caller, and
//     entries a caller creates are chowned to it and given the exact mode
//     it asked for.
//   - Tests that mount in their own process may do file I/O on the mount
//     from test goroutines (go-fuse serves in others) but must not fork
//     with a working directory or inherited descriptors on the mount.
package fuse
