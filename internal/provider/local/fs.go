package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// defaultChunkSize is the read size of StreamText.
const defaultChunkSize = 64 << 10

// Options configure a local FS.
type Options struct {
	// Digests caches content versions by stat identity (the policy store
	// persists it); nil means an in-memory cache.
	Digests provider.DigestCache
	// Aliases are extra absolute roots that map onto the workspace (e.g. the
	// mountpoint). Absolute paths under them are accepted by Resolve and
	// ProcessPathFromHostPath; they are mapped lexically and never touched.
	Aliases []string
	// MaxBasisBytes bounds the Before/SourceBefore texts of outcomes; a prior
	// file larger than this gets a nil basis. Zero means provider.DefaultMaxBasisBytes.
	MaxBasisBytes int64
	// Durability says whether publications and deletions are fsynced; the
	// zero value, DurabilityFsync, fsyncs the temp file before the rename
	// and the directory after it.
	Durability Durability
}

// Durability is how far a publication is made durable before it returns.
type Durability int

const (
	// DurabilityFsync fsyncs the staged file and the directory: after a
	// crash the file holds either the old or the new content. The default.
	DurabilityFsync Durability = iota
	// DurabilityNone skips both fsyncs. Publications stay atomic for every
	// reader (rename), but a machine crash soon after may leave the old
	// content, or on some file systems an empty file. For scratch
	// workspaces and benchmarks.
	DurabilityNone
)

// FS is the host-disk provider.FileSystem rooted at one workspace directory.
// It is safe for concurrent use.
type FS struct {
	root   string // canonical absolute root
	rootFD int    // O_PATH descriptor of root; all I/O is relative to it
	// fence opens every descriptor below rootFD through no symbolic link.
	// A path handed to it has been resolved (its links expanded) and
	// judged by the view already, so a link met now was swapped in since:
	// following it would reach a file the decision never saw (a hidden or
	// read-only one).
	fence    *beneath.Root
	prefixes []string // root, then the aliases, as cleaned absolute paths
	vers     *version.Versioner
	maxBasis int64
	noSync   bool // Durability is DurabilityNone
	locks    *lockTable
	chunk    int   // StreamText read size
	hooks    hooks // test seams; zero in production
}

// hooks are seams set only by tests in this package.
type hooks struct {
	// beforePublish runs after the temp file is staged, right before rename.
	beforePublish func(dir *os.File, name string)
	// removeSource replaces the unlink of a move's source when set.
	removeSource func(dir *os.File, name string) error
	// walked runs when the resolver has entered the directory rel.
	walked func(rel string)
	// treeAddWatch runs before each inotify_add_watch of a tree watcher; an
	// error replaces the call's.
	treeAddWatch func(rel string) error
	// treeSysctl replaces the max_user_watches file.
	treeSysctl string
	// treeNotRoot makes a tree watcher behave as a non-root daemon.
	treeNotRoot bool
	// treeLog receives a tree watcher's recovered failures.
	treeLog func(format string, args ...any)
}

// logf reports a recovered failure to the test seam, when set.
func (h hooks) logf(format string, args ...any) {
	if h.treeLog != nil {
		h.treeLog(format, args...)
	}
}

var _ provider.FileSystem = (*FS)(nil)

// New returns an FS rooted at root, which must exist and be a directory. The
// root is canonicalised (absolute, symbolic links resolved).
func New(root string, opts Options) (*FS, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local: workspace root %q: %w", root, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("local: workspace root %q: %w", root, err)
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(canon, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("local: workspace root %q is not a directory", root)
		}
		return nil, fmt.Errorf("local: open workspace root %q: %w", root, &os.PathError{Op: "open", Path: canon, Err: err})
	}
	fs := &FS{
		root:     canon,
		rootFD:   fd,
		fence:    beneath.New(fd, canon),
		prefixes: []string{canon},
		vers:     version.NewVersioner(opts.Digests),
		maxBasis: opts.MaxBasisBytes,
		noSync:   opts.Durability == DurabilityNone,
		locks:    newLockTable(),
		chunk:    defaultChunkSize,
	}
	if fs.maxBasis <= 0 {
		fs.maxBasis = provider.DefaultMaxBasisBytes
	}
	if abs = filepath.Clean(abs); abs != canon {
		// The spelling the caller used is an alias of the canonical root, so
		// absolute symbolic links written against it stay inside.
		fs.prefixes = append(fs.prefixes, abs)
	}
	for _, a := range opts.Aliases {
		if !filepath.IsAbs(a) {
			unix.Close(fd)
			return nil, fmt.Errorf("local: alias %q must be an absolute path", a)
		}
		fs.prefixes = append(fs.prefixes, filepath.Clean(a))
	}
	return fs, nil
}

// Root returns the canonical absolute workspace root.
func (fs *FS) Root() string { return fs.root }

// Beneath returns the fenced primitives on root-relative paths (for the
// commit journal): none leaves the root or follows a symbolic link.
func (fs *FS) Beneath() *beneath.Root { return fs.fence }

// Close releases the root descriptor. Calls after Close fail.
func (fs *FS) Close() error {
	if err := unix.Close(fs.rootFD); err != nil {
		return fmt.Errorf("local: close workspace root: %w", err)
	}
	return nil
}

// Versioner returns the content-version computer of fs, shared with the
// FUSE layer so that both report and compare the same tokens.
func (fs *FS) Versioner() *version.Versioner { return fs.vers }
