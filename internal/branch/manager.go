package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"github.com/dshmount/dshmount/internal/journal"

	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// StagingDir is the directory, in the workspace root, where a commit stages
// its files; the daemon's view hides it.
const StagingDir = journal.StagingDir

// Options configure Open.
type Options struct {
	// Logger receives recovery and cleanup messages (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Upper opens each branch's own files (required).
	Upper OpenUpper

	hooks testHooks
}

// testHooks let tests stop a commit between two steps.
type testHooks struct {
	// step runs before each numbered step of a commit's staging and
	// application; a non-nil error stops the commit there, leaving the
	// disk as a kill -9 at that point would.
	step func(n int) error
}

// Manager owns the branches of one workspace and the commit journal.
type Manager struct {
	dir      string      // <state>/branches
	journals records.Dir // <state>/branches.journal: the commits' journals, branch temp and trash
	journal  *journal.Journal
	lower    Lower
	upper    OpenUpper
	log      *slog.Logger
	now      func() time.Time
	hooks    testHooks

	mu       sync.Mutex
	branches map[string]*Branch
	defaults map[string]string // session → default branch, loaded on first use
}

// Info describes one branch for listings.
type Info struct {
	Name    string
	Created time.Time
	Changed int    // files the branch changed (Branch.Changed)
	Owner   uint32 // uid that created it (CreateFor)
}

// Open opens the branches kept under stateDir for the workspace lower:
// finishes or undoes a commit a killed daemon left (see the package
// comment), removes what a killed discard left, and loads every branch.
func Open(stateDir string, lower Lower, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Upper == nil {
		return nil, errors.New("branches: Options.Upper is required: it opens a branch's upper directory")
	}
	m := &Manager{
		dir:      filepath.Join(stateDir, "branches"),
		journals: records.Dir{Path: filepath.Join(stateDir, "branches.journal")},
		lower:    lower, upper: opts.Upper, log: opts.Logger, now: opts.Now, hooks: opts.hooks,
		branches: map[string]*Branch{},
	}
	for _, d := range []string{m.dir, m.journals.Path} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("branches: create %s: %w", d, err)
		}
	}
	jr, err := journal.Open(lower, journal.Options{Dir: m.journals.Path, Logger: opts.Logger,
		FinishBranch: m.finishBranch, StepHook: m.stepHook})
	if err != nil {
		return nil, fmt.Errorf("branches: %w", err)
	}
	m.journal = jr
	if err := jr.Recover(); err != nil {
		return nil, fmt.Errorf("branches: finish an interrupted commit: %w", err)
	}
	m.removeTrash()
	des, err := os.ReadDir(m.dir)
	if err != nil {
		return nil, fmt.Errorf("branches: list %s: %w", m.dir, err)
	}
	for _, de := range des {
		if !de.IsDir() || ValidateName(de.Name()) != nil {
			continue
		}
		b, err := m.load(de.Name())
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("branches: load %s: %w", de.Name(), err)
		}
		m.branches[b.name] = b
	}
	return m, nil
}

// Close closes every branch's files.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, b := range m.branches {
		errs = append(errs, b.close())
	}
	return errors.Join(errs...)
}

// meta is a branch's branch.json.
type meta struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Mount   string    `json:"mount,omitempty"` // see SetMount
	// Owner is the uid that created the branch; a branch recorded before
	// owners were kept has none and belongs to root.
	Owner uint32 `json:"owner,omitempty"`
}

// load opens the branch directory name.
func (m *Manager) load(name string) (*Branch, error) {
	dir := filepath.Join(m.dir, name)
	var md meta
	ok, err := (records.Dir{Path: dir}).Get("branch.json", &md)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s has no branch.json", dir)
	}
	log, entries, err := openLog(filepath.Join(dir, "changes.log"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "upper"), 0o755); err != nil {
		log.close()
		return nil, fmt.Errorf("upper directory: %w", err)
	}
	upper, err := m.upper(filepath.Join(dir, "upper"))
	if err != nil {
		log.close()
		return nil, fmt.Errorf("open upper directory: %w", err)
	}
	b := &Branch{name: name, dir: dir, created: md.Created, owner: md.Owner, lower: m.lower, upper: upper,
		prefix: keyNamespace + name + "/", entries: entries, log: log, mount: md.Mount}
	b.removeOrphans()
	b.removeBaseOrphans()
	return b, nil
}

// removeOrphans deletes upper files no record describes (a kill between
// a copy-up and its record); a link the branch made is described.
func (b *Branch) removeOrphans() {
	up := filepath.Join(b.dir, "upper")
	_ = filepath.WalkDir(up, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, rerr := filepath.Rel(up, p)
		if rerr != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if e, ok := b.entries[rel]; !ok || e.Kind != kindFile && e.Kind != kindSymlink {
			_ = os.Remove(p)
		}
		return nil
	})
}

// close releases the branch's files.
func (b *Branch) close() error {
	b.closed = true
	return errors.Join(b.log.close(), b.upper.Close())
}

// ValidateName checks a branch name: 1–64 of [A-Za-z0-9._-], not "." or
// "..". The error is FS_INVALID_ARGUMENT.
func ValidateName(name string) error {
	bad := name == "" || len(name) > 64 || name == "." || name == ".."
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			bad = true
		}
	}
	if bad {
		return provider.NewError(provider.CodeInvalidArgument, "branch", "", nil,
			"invalid branch name %q: use 1 to 64 of the letters A-Z a-z, digits and . _ - (not . or ..)", name)
	}
	return nil
}

// Create makes an empty branch over the workspace, owned by root. A bad
// name, or the name of an existing branch, is FS_INVALID_ARGUMENT.
func (m *Manager) Create(name string) (*Branch, error) { return m.CreateFor(name, 0) }

// CreateFor is Create for a branch that belongs to uid owner.
func (m *Manager) CreateFor(name string, owner uint32) (*Branch, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.branches[name]; ok {
		return nil, provider.NewError(provider.CodeInvalidArgument, "branch", "", nil,
			"branch %s already exists; choose another name, or commit or discard it first", name)
	}
	tmp, err := os.MkdirTemp(m.journals.Path, "new-")
	if err != nil {
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if err := (records.Dir{Path: tmp}).Put("branch.json", meta{Name: name, Created: m.now().UTC(), Owner: owner}); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "upper"), 0o755); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	dst := filepath.Join(m.dir, name)
	if err := os.Rename(tmp, dst); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "not empty") {
			return nil, provider.NewError(provider.CodeInvalidArgument, "branch", "", err,
				"branch %s already exists; choose another name", name)
		}
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	if err := records.SyncDir(m.dir); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	b, err := m.load(name)
	if err != nil {
		return nil, fmt.Errorf("create branch %s: %w", name, err)
	}
	m.branches[name] = b
	return b, nil
}

// Get returns the branch name, or FS_NOT_FOUND.
func (m *Manager) Get(name string) (*Branch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.branches[name]
	if !ok {
		if err := ValidateName(name); err != nil {
			return nil, err
		}
		return nil, provider.NewError(provider.CodeNotFound, "branch", "", nil,
			"no branch named %s; list them with branch.list or create it with branch.create", name)
	}
	return b, nil
}

// List describes every branch, by name.
func (m *Manager) List() []Info {
	m.mu.Lock()
	bs := make([]*Branch, 0, len(m.branches))
	for _, b := range m.branches {
		bs = append(bs, b)
	}
	m.mu.Unlock()
	out := make([]Info, 0, len(bs))
	for _, b := range bs {
		out = append(out, Info{Name: b.name, Created: b.created, Changed: b.Changed(), Owner: b.owner})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Discard drops the branch and everything it holds; nothing of it stays in
// the state directory.
func (m *Manager) Discard(name string) error {
	b, err := m.Get(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.usable("discard", "")
	}
	return m.drop(b)
}

// drop removes b from the manager and its directory from disk; b.mu is
// held for writing.
func (m *Manager) drop(b *Branch) error {
	m.mu.Lock()
	delete(m.branches, b.name)
	m.mu.Unlock()
	_ = b.close()
	return m.removeBranchDir(b.name)
}

// removeBranchDir moves a branch directory aside in one rename (so a kill
// leaves no half branch), then deletes it.
func (m *Manager) removeBranchDir(name string) error {
	trash := filepath.Join(m.journals.Path, "trash-"+randomID())
	if err := os.Rename(filepath.Join(m.dir, name), trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove branch %s: %w", name, err)
	}
	if err := records.SyncDir(m.dir); err != nil {
		return fmt.Errorf("remove branch %s: %w", name, err)
	}
	return os.RemoveAll(trash)
}

// removeTrash deletes what killed discards and creations left.
func (m *Manager) removeTrash() {
	des, _ := os.ReadDir(m.journals.Path)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "trash-") || strings.HasPrefix(de.Name(), "new-") {
			_ = os.RemoveAll(filepath.Join(m.journals.Path, de.Name()))
		}
	}
}

// reset empties b over the new workspace state (a commit with keep); b.mu
// is held for writing.
func (m *Manager) reset(b *Branch) error {
	if err := resetBranchDir(b.dir); err != nil {
		return err
	}
	_ = b.log.close()
	log, entries, err := openLog(filepath.Join(b.dir, "changes.log"))
	if err != nil {
		return err
	}
	_ = b.upper.Close()
	upper, err := m.upper(filepath.Join(b.dir, "upper"))
	if err != nil {
		return fmt.Errorf("reopen upper directory: %w", err)
	}
	b.log, b.entries, b.upper = log, entries, upper
	b.versMu.Lock()
	b.vers = nil
	b.versMu.Unlock()
	return nil
}

// resetBranchDir empties a branch directory's log and upper files.
func resetBranchDir(dir string) error {
	if err := records.WriteFileAtomic(filepath.Join(dir, "changes.log"), nil, true); err != nil {
		return err
	}
	if err := removeBaseTree(dir); err != nil {
		return err
	}
	return removeUpperTree(dir)
}

// randomID returns 16 random hex digits.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// finishBranch resets (keep) or removes the branch a commit a killed
// daemon left applied came from (recovery, before the branches load).
func (m *Manager) finishBranch(name string, keep bool) error {
	if keep {
		if err := resetBranchDir(filepath.Join(m.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return m.removeBranchDir(name)
}

// stepHook runs the test hook of a commit's step n.
func (m *Manager) stepHook(n int) error {
	if m.hooks.step != nil {
		return m.hooks.step(n)
	}
	return nil
}

// Journal is the workspace's commit journal, which branch commits go
// through; atomic patches use it too.
func (m *Manager) Journal() *journal.Journal { return m.journal }

// AwaitCommit returns at once unless a commit (or an atomic patch) is
// being applied and changes the workspace-relative path rel, or an entry
// of the directory rel; then it waits for that commit to end, so a reader
// through dshmount sees the workspace entirely before or entirely after
// it, never half of it. It returns ctx's error if ctx ends first.
func (m *Manager) AwaitCommit(ctx context.Context, rel string) error {
	return m.journal.AwaitCommit(ctx, rel)
}

// ctxOrBackground keeps a nil context from reaching the provider.
func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
