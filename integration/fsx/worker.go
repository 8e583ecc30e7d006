package fsx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// opKind is one kind of random operation, with its weight.
type opKind struct {
	name   string
	weight int
	remote bool // only with a Remote
	run    func(w *worker, name string) error
}

// opKinds is the operation mix.
var opKinds = []opKind{
	{name: "write", weight: 24, run: (*worker).opWrite},
	{name: "read", weight: 22, run: (*worker).opRead},
	{name: "truncate", weight: 8, run: (*worker).opTruncate},
	{name: "mmapread", weight: 8, run: (*worker).opMmapRead},
	{name: "rename", weight: 5, run: (*worker).opRename},
	{name: "fsync", weight: 4, run: (*worker).opFsync},
	{name: "reopen", weight: 6, run: (*worker).opReopen},
	{name: "stat", weight: 5, run: (*worker).opStat},
	{name: "readfile", weight: 5, run: (*worker).opReadFile},
	{name: "unlink", weight: 2, run: (*worker).opUnlink},
	{name: "fallocate", weight: 2, run: (*worker).opFallocate},
	{name: "punch", weight: 2, run: (*worker).opPunch},
	{name: "copyrange", weight: 2, run: (*worker).opCopyRange},
	{name: "mmapwrite", weight: 2, run: (*worker).opMmapWrite},
	{name: "link", weight: 2, run: (*worker).opLink},
	{name: "remotemutate", weight: 4, remote: true, run: (*worker).opRemoteMutate},
	{name: "remoteread", weight: 5, remote: true, run: (*worker).opRemoteRead},
}

// worker runs random operations on its own names in its own directory.
type worker struct {
	ctx     context.Context
	cfg     *Config
	id      int
	dir     string // absolute directory of the worker
	rel     string // the directory relative to Config.Dir, for the Remote
	rng     *rand.Rand
	names   []string
	model   map[string]*fileModel
	files   map[string]*os.File
	log     *opLog
	op      int
	counts  map[string]int
	skipped map[string]int
	cur     string     // the kind of the current operation
	shared  *remoteSet // nil without a Remote
	sup     *support
	kinds   []opKind
	weights int
}

func newWorker(ctx context.Context, cfg *Config, id int, shared *remoteSet, sup *support) (*worker, error) {
	rel := fmt.Sprintf("w%d", id)
	w := &worker{ctx: ctx, cfg: cfg, id: id, dir: filepath.Join(cfg.Dir, rel), rel: rel,
		rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1)),
		model: map[string]*fileModel{}, files: map[string]*os.File{},
		log: newOpLog(cfg.LogLen), counts: map[string]int{}, skipped: map[string]int{}, shared: shared, sup: sup}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating worker directory: %w", err)
	}
	for i := range cfg.Files {
		n := fmt.Sprintf("f%d", i)
		w.names = append(w.names, n)
		w.model[n] = &fileModel{}
	}
	for _, k := range opKinds {
		if k.remote && cfg.Remote == nil {
			continue
		}
		w.kinds = append(w.kinds, k)
		w.weights += k.weight
	}
	return w, nil
}

// run performs n operations.
func (w *worker) run(n int) error {
	defer w.closeAll()
	for w.op = 0; w.op < n; w.op++ {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("worker %d stopped after %d operations: %w", w.id, w.op, err)
		}
		k := w.pick()
		name := w.names[w.rng.IntN(len(w.names))]
		w.counts[k.name]++
		w.cur = k.name
		if err := k.run(w, name); err != nil {
			return err
		}
		if w.cfg.tamper != nil {
			w.cfg.tamper(w.path(name))
		}
	}
	return nil
}

func (w *worker) pick() opKind {
	x := w.rng.IntN(w.weights)
	for _, k := range w.kinds {
		if x < k.weight {
			return k
		}
		x -= k.weight
	}
	return w.kinds[len(w.kinds)-1]
}

func (w *worker) path(name string) string { return filepath.Join(w.dir, name) }

// skip stands in for an operation that finds nothing to act on (an empty
// file, a disabled kind): it counts the skip and does a stat instead.
func (w *worker) skip(name string) error {
	w.skipped[w.cur]++
	return w.opStat(name)
}

// faulty reports whether the current operation is the planted fault.
func (w *worker) faulty() bool { return w.cfg.fault != "" && w.cfg.fault == w.cur }

// size is the model's size of name (0 when absent).
func (w *worker) size(name string) int {
	if m := w.model[name]; m.exists {
		return len(m.data)
	}
	return 0
}

// fail builds the mismatch error of the current operation.
func (w *worker) fail(format string, args ...any) error {
	return &MismatchError{Seed: w.cfg.Seed, Worker: w.id, Op: w.op, Detail: fmt.Sprintf(format, args...), Log: w.log.snapshot()}
}

// expectAbsent checks that err is ENOENT for a name the model says is
// absent.
func (w *worker) expectAbsent(what, name string, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return w.fail("%s %s: the model says the file is absent, want ENOENT, got %v", what, name, err)
}

// open returns the worker's descriptor of name, opening (and creating) it
// when needed.
func (w *worker) open(name string, trunc bool) (*os.File, error) {
	if f := w.files[name]; f != nil && !trunc {
		return f, nil
	}
	w.closeFile(name)
	flags := os.O_RDWR | os.O_CREATE
	if trunc {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(w.path(name), flags, 0o644)
	if err != nil {
		return nil, w.fail("open %s (trunc=%v): %v", name, trunc, err)
	}
	m := w.model[name]
	if trunc || !m.exists {
		m.exists, m.data = true, m.data[:0]
	}
	w.files[name] = f
	return f, nil
}

func (w *worker) closeFile(name string) error {
	f := w.files[name]
	if f == nil {
		return nil
	}
	delete(w.files, name)
	if err := f.Close(); err != nil {
		return w.fail("close %s: %v", name, err)
	}
	return nil
}

func (w *worker) closeAll() {
	for _, n := range w.names {
		_ = w.closeFile(n)
	}
}

func (w *worker) opWrite(name string) error {
	m := w.model[name]
	size := len(m.data)
	if !m.exists {
		size = 0
	}
	var off int
	switch w.rng.IntN(4) {
	case 0:
		off = size // append
	default:
		off = w.rng.IntN(min(size+w.cfg.MaxIO/2, w.cfg.MaxSize-1) + 1)
	}
	n := 1 + w.rng.IntN(w.cfg.MaxIO)
	if off+n > w.cfg.MaxSize {
		n = w.cfg.MaxSize - off
	}
	if n <= 0 {
		off, n = 0, 1
	}
	p := randomText(w.rng, n)
	w.log.add("#%d write %s off=%d len=%d (size %d)", w.op, name, off, n, size)
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	got, err := f.WriteAt(p, int64(off))
	if err != nil || got != n {
		return w.fail("pwrite %s off=%d len=%d: wrote %d, %v", name, off, n, got, err)
	}
	m.writeAt(off, p)
	return nil
}

func (w *worker) opRead(name string) error {
	m := w.model[name]
	if !m.exists {
		w.log.add("#%d read %s (absent)", w.op, name)
		_, err := os.Open(w.path(name))
		return w.expectAbsent("open", name, err)
	}
	off := w.rng.IntN(len(m.data) + 16)
	n := 1 + w.rng.IntN(w.cfg.MaxIO)
	w.log.add("#%d read %s off=%d len=%d (size %d)", w.op, name, off, n, len(m.data))
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return w.fail("pread %s off=%d len=%d: %v", name, off, n, err)
	}
	want := window(m.data, off, off+n)
	if !bytes.Equal(buf[:got], want) {
		return w.fail("pread %s off=%d len=%d: %s", name, off, n, diff(buf[:got], want))
	}
	return nil
}

func (w *worker) opTruncate(name string) error {
	m := w.model[name]
	size := w.rng.IntN(w.cfg.MaxSize + 1)
	if w.rng.IntN(3) == 0 {
		size = w.rng.IntN(len(m.data) + 1) // shrink more often than not
	}
	if f := w.files[name]; f != nil {
		w.log.add("#%d ftruncate %s to %d (size %d)", w.op, name, size, len(m.data))
		if err := f.Truncate(int64(size)); err != nil {
			return w.fail("ftruncate %s to %d: %v", name, size, err)
		}
		m.resize(size)
		return nil
	}
	w.log.add("#%d truncate %s to %d (exists %v, size %d)", w.op, name, size, m.exists, len(m.data))
	err := os.Truncate(w.path(name), int64(size))
	if !m.exists {
		return w.expectAbsent("truncate", name, err)
	}
	if err != nil {
		return w.fail("truncate %s to %d: %v", name, size, err)
	}
	m.resize(size)
	return nil
}

func (w *worker) opMmapRead(name string) error {
	m := w.model[name]
	if !w.cfg.Mmap || !m.exists || len(m.data) == 0 || !w.sup.enabled("mmapread") {
		return w.skip(name)
	}
	w.log.add("#%d mmapread %s (size %d)", w.op, name, len(m.data))
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, len(m.data), unix.PROT_READ, unix.MAP_SHARED)
	if w.unsupported("mmapread", "mmap of "+w.path(name), err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return w.fail("mmap %s len=%d: %v", name, len(m.data), err)
	}
	defer unix.Munmap(mem)
	if !bytes.Equal(mem, m.data) {
		return w.fail("mmap read %s: %s", name, diff(mem, m.data))
	}
	return nil
}

func (w *worker) opRename(name string) error {
	to := w.names[w.rng.IntN(len(w.names))]
	if to == name {
		return w.skip(name)
	}
	m, mt := w.model[name], w.model[to]
	w.log.add("#%d rename %s -> %s (exists %v -> %v)", w.op, name, to, m.exists, mt.exists)
	if err := w.closeFile(to); err != nil {
		return err
	}
	err := os.Rename(w.path(name), w.path(to))
	if !m.exists {
		return w.expectAbsent("rename", name, err)
	}
	if err != nil {
		return w.fail("rename %s -> %s: %v", name, to, err)
	}
	w.model[to], w.model[name] = m, &fileModel{}
	if f := w.files[name]; f != nil {
		w.files[to] = f
		delete(w.files, name)
	}
	return nil
}

func (w *worker) opFsync(name string) error {
	f := w.files[name]
	if f == nil {
		return w.skip(name)
	}
	w.log.add("#%d fsync %s", w.op, name)
	if err := f.Sync(); err != nil {
		return w.fail("fsync %s: %v", name, err)
	}
	return nil
}

func (w *worker) opReopen(name string) error {
	trunc := w.rng.IntN(8) == 0
	w.log.add("#%d reopen %s (trunc=%v, open %v)", w.op, name, trunc, w.files[name] != nil)
	if err := w.closeFile(name); err != nil {
		return err
	}
	_, err := w.open(name, trunc)
	return err
}

func (w *worker) opStat(name string) error {
	m := w.model[name]
	w.log.add("#%d stat %s (exists %v, size %d)", w.op, name, m.exists, len(m.data))
	fi, err := os.Lstat(w.path(name))
	if !m.exists {
		return w.expectAbsent("lstat", name, err)
	}
	if err != nil {
		return w.fail("lstat %s: %v", name, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(m.data)) {
		return w.fail("lstat %s: mode %v size %d, want a regular file of %d bytes", name, fi.Mode(), fi.Size(), len(m.data))
	}
	if f := w.files[name]; f != nil {
		fi, err := f.Stat()
		if err != nil || fi.Size() != int64(len(m.data)) {
			return w.fail("fstat %s: %v, size %d, want %d", name, err, sizeOf(fi), len(m.data))
		}
	}
	return nil
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

func (w *worker) opReadFile(name string) error {
	m := w.model[name]
	w.log.add("#%d readfile %s (exists %v, size %d)", w.op, name, m.exists, len(m.data))
	got, err := os.ReadFile(w.path(name))
	if !m.exists {
		return w.expectAbsent("read", name, err)
	}
	if err != nil {
		return w.fail("read %s: %v", name, err)
	}
	if !bytes.Equal(got, m.data) {
		return w.fail("read whole %s: %s", name, diff(got, m.data))
	}
	return nil
}

func (w *worker) opUnlink(name string) error {
	m := w.model[name]
	w.log.add("#%d unlink %s (exists %v)", w.op, name, m.exists)
	if err := w.closeFile(name); err != nil {
		return err
	}
	err := os.Remove(w.path(name))
	if !m.exists {
		return w.expectAbsent("unlink", name, err)
	}
	if err != nil {
		return w.fail("unlink %s: %v", name, err)
	}
	w.model[name] = &fileModel{}
	return nil
}

// opRemoteMutate replaces or edits a closed worker file through the Remote
// and updates the model once the change is acknowledged.
func (w *worker) opRemoteMutate(name string) error {
	if err := w.closeFile(name); err != nil {
		return err
	}
	m := w.model[name]
	rel := w.rel + "/" + name
	if m.exists && m.isText() && len(m.data) > 0 && w.rng.IntN(2) == 0 {
		if old, ok := w.uniqueSlice(m.data); ok {
			repl := randomText(w.rng, 1+w.rng.IntN(64))
			w.log.add("#%d remote edit %s %q -> %d bytes (size %d)", w.op, name, short(old), len(repl), len(m.data))
			if err := w.cfg.Remote.Edit(w.ctx, rel, string(old), string(repl)); err != nil {
				return w.fail("remote edit %s: %v", name, err)
			}
			m.data = bytes.Replace(m.data, old, repl, 1)
			return nil
		}
	}
	content := randomText(w.rng, w.rng.IntN(w.cfg.MaxIO+1))
	w.log.add("#%d remote write %s len=%d (exists %v, size %d, text %v)", w.op, name, len(content), m.exists, len(m.data), m.isText())
	if err := w.cfg.Remote.Write(w.ctx, rel, string(content)); err != nil {
		return w.fail("remote write %s: %v", name, err)
	}
	m.exists, m.data = true, content
	return nil
}

// uniqueSlice picks a short slice of data that occurs exactly once.
func (w *worker) uniqueSlice(data []byte) ([]byte, bool) {
	for range 8 {
		n := min(len(data), 8+w.rng.IntN(24))
		off := w.rng.IntN(len(data) - n + 1)
		s := data[off : off+n]
		if bytes.Count(data, s) == 1 {
			return append([]byte(nil), s...), true
		}
	}
	return nil, false
}

func short(p []byte) string {
	s := string(p)
	if len(s) > 24 {
		s = s[:24] + "…"
	}
	return strings.ReplaceAll(s, "\n", `\n`)
}

// opRemoteRead reads a file of the concurrent remote set through the
// directory and checks it is one complete acknowledged-or-pending version.
func (w *worker) opRemoteRead(string) error {
	i := w.rng.IntN(len(w.shared.files))
	w.log.add("#%d remoteread r%d", w.op, i)
	if detail := w.shared.check(i); detail != "" {
		return w.fail("%s", detail)
	}
	return nil
}
