package fsx

import (
	"bytes"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// The operations beyond read and write: space allocation, hole punching,
// in-kernel copies, stores through a shared mapping and hard links. Each
// one is checked against the model like the others: directly where the
// call itself returns data (link), by the later reads otherwise.

// writeOffset picks where a change of up to MaxIO bytes starts in a file of
// size bytes: inside it or a little past its end, never at MaxSize.
func (w *worker) writeOffset(size int) int {
	return w.rng.IntN(min(size+w.cfg.MaxIO/2, w.cfg.MaxSize-1) + 1)
}

// opFallocate is fallocate mode 0 on a range: the bytes do not change, and
// the file grows with zeros to off+len when that is past its end.
func (w *worker) opFallocate(name string) error {
	if !w.sup.enabled("fallocate") {
		return w.skip(name)
	}
	size := w.size(name)
	off := w.writeOffset(size)
	n := min(1+w.rng.IntN(w.cfg.MaxIO), w.cfg.MaxSize-off)
	w.log.add("#%d fallocate %s off=%d len=%d (size %d)", w.op, name, off, n, size)
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	callN := n
	if w.faulty() {
		callN++
	}
	err = unix.Fallocate(int(f.Fd()), 0, int64(off), int64(callN))
	if w.unsupported("fallocate", "fallocate on "+w.path(name), err, unix.EOPNOTSUPP, unix.ENOSYS) {
		return nil
	}
	if err != nil {
		return w.fail("fallocate %s off=%d len=%d: %v", name, off, n, err)
	}
	if m := w.model[name]; off+n > len(m.data) {
		m.resize(off + n)
	}
	return nil
}

// opPunch is fallocate(PUNCH_HOLE|KEEP_SIZE) on a range that starts inside
// the file: the range reads as zeros (the written alphabet has none), the
// size does not change.
func (w *worker) opPunch(name string) error {
	m := w.model[name]
	if !m.exists || len(m.data) == 0 || !w.sup.enabled("punch") {
		return w.skip(name)
	}
	off := w.rng.IntN(len(m.data))
	n := 1 + w.rng.IntN(w.cfg.MaxIO) // may reach past the end: the size stays
	w.log.add("#%d punch %s off=%d len=%d (size %d)", w.op, name, off, n, len(m.data))
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	callOff := off
	if w.faulty() {
		callOff++
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(callOff), int64(n))
	if w.unsupported("punch", "punch hole in "+w.path(name), err, unix.EOPNOTSUPP, unix.ENOSYS) {
		return nil
	}
	if err != nil {
		return w.fail("punch %s off=%d len=%d: %v", name, off, n, err)
	}
	clear(m.data[off:min(off+n, len(m.data))])
	return nil
}

// opCopyRange copies a range of another of the worker's files into name
// at an offset with copy_file_range through the worker's descriptors: the
// bytes land as if written, the file grows as needed.
func (w *worker) opCopyRange(name string) error {
	src := w.names[w.rng.IntN(len(w.names))]
	ms := w.model[src]
	if src == name || !ms.exists || len(ms.data) == 0 || !w.sup.enabled("copyrange") {
		return w.skip(name)
	}
	srcOff := w.rng.IntN(len(ms.data))
	size := w.size(name)
	off := w.writeOffset(size)
	n := min(1+w.rng.IntN(min(w.cfg.MaxIO, len(ms.data)-srcOff)), w.cfg.MaxSize-off)
	w.log.add("#%d copyrange %s off=%d <- %s off=%d len=%d (sizes %d <- %d)", w.op, name, off, src, srcOff, n, size, len(ms.data))
	sf, err := w.open(src, false)
	if err != nil {
		return err
	}
	df, err := w.open(name, false)
	if err != nil {
		return err
	}
	want := append([]byte(nil), ms.data[srcOff:srcOff+n]...)
	for done := 0; done < n; {
		so, do := int64(srcOff+done), int64(off+done)
		if w.faulty() {
			so++
		}
		c, err := unix.CopyFileRange(int(sf.Fd()), &so, int(df.Fd()), &do, n-done, 0)
		if done == 0 && w.unsupported("copyrange", "copy_file_range into "+w.path(name), err,
			unix.EXDEV, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS) {
			return nil
		}
		if err != nil {
			return w.fail("copy_file_range %s off=%d <- %s off=%d len=%d: %v after %d bytes", name, off, src, srcOff, n, err, done)
		}
		if c == 0 {
			return w.fail("copy_file_range %s off=%d <- %s off=%d len=%d: end of the source after %d bytes", name, off, src, srcOff, n, done)
		}
		done += c
	}
	w.model[name].writeAt(off, want)
	return nil
}

// opMmapWrite maps the whole file shared and writable, stores random
// bytes inside its current size, and msyncs.
func (w *worker) opMmapWrite(name string) error {
	m := w.model[name]
	if !w.cfg.Mmap || !m.exists || len(m.data) == 0 || !w.sup.enabled("mmapwrite") {
		return w.skip(name)
	}
	size := len(m.data)
	off := w.rng.IntN(size)
	n := 1 + w.rng.IntN(min(w.cfg.MaxIO, size-off))
	p := randomText(w.rng, n)
	w.log.add("#%d mmapwrite %s off=%d len=%d (size %d)", w.op, name, off, n, size)
	f, err := w.open(name, false)
	if err != nil {
		return err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if w.unsupported("mmapwrite", "shared writable mmap of "+w.path(name), err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return w.fail("mmap %s len=%d for writing: %v", name, size, err)
	}
	at := off
	if w.faulty() {
		at = (off + 1) % size
	}
	copy(mem[at:], p)
	serr := unix.Msync(mem, unix.MS_SYNC)
	uerr := unix.Munmap(mem)
	if serr != nil || uerr != nil {
		return w.fail("mmap write %s off=%d len=%d: msync %v, munmap %v", name, off, n, serr, uerr)
	}
	m.writeAt(off, p[:min(n, size-off)])
	return nil
}

// opLink links name to name+".lnk", checks the new name (two links, the
// model's bytes; sometimes after writing through it), and removes one of
// the two names: mostly the link; sometimes the original, after a chmod
// through the link, renaming the link back to the name (the other names of
// a file a session changed stay its own).
func (w *worker) opLink(name string) error {
	m := w.model[name]
	lnk := w.path(name) + ".lnk"
	throughLink := m.exists && w.rng.IntN(3) == 0
	swap := m.exists && w.rng.IntN(3) == 0
	w.log.add("#%d link %s -> %s.lnk (exists %v, size %d, write through the link %v, keep the link %v)",
		w.op, name, name, m.exists, len(m.data), throughLink, swap)
	target := name
	if w.faulty() {
		target = w.names[(slices.Index(w.names, name)+1)%len(w.names)]
	}
	err := os.Link(w.path(target), lnk)
	if !m.exists {
		return w.expectAbsent("link", name, err)
	}
	if err != nil {
		return w.fail("link %s: %v", name, err)
	}
	fi, err := os.Lstat(lnk)
	if err != nil {
		return w.fail("lstat the link of %s: %v", name, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Nlink != 2 {
		return w.fail("lstat the link of %s: %d links, want 2", name, nlinkOf(fi))
	}
	if throughLink {
		p := randomText(w.rng, 1+w.rng.IntN(64))
		off := min(w.writeOffset(len(m.data)), w.cfg.MaxSize-len(p))
		if err := writeAtPath(lnk, int64(off), p); err != nil {
			return w.fail("write %d bytes at %d through the link of %s: %v", len(p), off, name, err)
		}
		m.writeAt(off, p)
	}
	got, err := os.ReadFile(lnk)
	if err != nil {
		return w.fail("read the link of %s: %v", name, err)
	}
	if !bytes.Equal(got, m.data) {
		return w.fail("read the link of %s: %s", name, diff(got, m.data))
	}
	if swap {
		if err := os.Chmod(lnk, 0o644); err != nil {
			return w.fail("chmod the link of %s: %v", name, err)
		}
		if err := os.Remove(w.path(name)); err != nil {
			return w.fail("unlink %s after linking it: %v", name, err)
		}
		if err := os.Rename(lnk, w.path(name)); err != nil {
			return w.fail("rename the link of %s back to its name: %v", name, err)
		}
		return nil
	}
	if err := os.Remove(lnk); err != nil {
		return w.fail("unlink the link of %s: %v", name, err)
	}
	return nil
}

// writeAtPath opens path for writing, writes p at off and closes it.
func writeAtPath(path string, off int64, p []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(p, off)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func nlinkOf(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Nlink)
	}
	return -1
}
