package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/provider"
)

// dirEvents are the inotify events that change a directory's entries or the
// metadata of a child.
const dirEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// Watch calls changed(nil) whenever the file t, or the direct entries of the
// directory t, change, and changed(err) when watching fails (after which it
// stops). A file is watched through its directory, so atomic replacements,
// deletion and creation of a missing file are all seen; a missing file's
// parent directory must exist. changed runs on the watcher's goroutine and
// must not call Close, which stops the watcher and waits for it.
func (fs *FS) Watch(ctx context.Context, t provider.Target, changed func(err error)) (io.Closer, error) {
	const op = "watch"
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		return nil, err
	}
	rel, err := fs.relOf(op, t)
	if err != nil {
		return nil, err
	}
	dirRel, name := rel, ""
	if st, ok, err := fs.statRel(rel); err != nil {
		return nil, ioFailure(op, t.DisplayPath, err)
	} else if !ok || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		dirRel, name = splitRel(rel)
	}
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, ioFailure(op, t.DisplayPath, pathErr("inotify_init1", rel, err))
	}
	if err := fs.addWatch(ifd, dirRel); err != nil {
		unix.Close(ifd)
		if errors.Is(err, unix.ENOENT) {
			return nil, provider.NewError(provider.CodeNotFound, op, t.DisplayPath, err,
				"neither the target nor its directory exists; create the directory first")
		}
		return nil, ioFailure(op, t.DisplayPath, err)
	}
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		unix.Close(ifd)
		return nil, err
	}
	w := &watcher{f: os.NewFile(uintptr(ifd), "inotify"), done: make(chan struct{})}
	go w.run(name, t.DisplayPath, changed)
	return w, nil
}

// addWatch watches the directory dirRel, reached beneath the root: the watch
// goes through /proc/self/fd of a descriptor opened with the sandbox fence,
// so a swapped symbolic link cannot redirect it.
func (fs *FS) addWatch(ifd int, dirRel string) error {
	dfd, err := fs.openBeneath(dirRel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	_, err = retryEINTR(func() (int, error) {
		return unix.InotifyAddWatch(ifd, "/proc/self/fd/"+strconv.Itoa(dfd), dirEvents|unix.IN_ONLYDIR)
	})
	if err != nil {
		return pathErr("inotify_add_watch", dirRel, err)
	}
	return nil
}

// watcher is one running inotify watch.
type watcher struct {
	f    *os.File
	done chan struct{}
	once sync.Once
}

// Close stops the watcher and waits for its goroutine to end.
func (w *watcher) Close() error {
	var err error
	w.once.Do(func() {
		err = w.f.Close() // wakes the blocked read
		<-w.done
	})
	return err
}

// run reads events until the watcher is closed or the directory goes away.
// name filters events of a directory's children ("" keeps all).
func (w *watcher) run(name, disp string, changed func(error)) {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			changed(ioFailure("watch", disp, err))
			return
		}
		hit, gone := matchEvents(buf[:n], name)
		if hit {
			changed(nil)
		}
		if gone {
			changed(provider.NewError(provider.CodeNotFound, "watch", disp, nil,
				"the watched directory was removed or moved; watch the path again"))
			return
		}
	}
}

// matchEvents parses a buffer of inotify events. hit: one concerns name (or
// the directory itself, or events were lost); gone: the watch ended.
func matchEvents(buf []byte, name string) (hit, gone bool) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		evName := string(raw[:bytesIndexNUL(raw)])
		off += unix.SizeofInotifyEvent + int(ev.Len)
		switch {
		case ev.Mask&unix.IN_IGNORED != 0:
			gone = true
		case ev.Mask&unix.IN_Q_OVERFLOW != 0,
			ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0,
			name == "" || evName == name:
			hit = true
		}
	}
	return hit, gone
}

// bytesIndexNUL is the length of a NUL-padded name.
func bytesIndexNUL(b []byte) int {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return i
	}
	return len(b)
}
