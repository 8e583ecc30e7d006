package reqcount

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestEachRequestCountsOnceUnderItsOpcode pins that a request counts once,
// under go-fuse's name for it, and a WRITE the filesystem answers through
// the Write fallback counts once too.
func TestEachRequestCountsOnceUnderItsOpcode(t *testing.T) {
	var c Counts
	fs := Wrap(fuse.NewDefaultRawFileSystem(), &c)
	fs.Lookup(nil, &fuse.InHeader{}, "a", &fuse.EntryOut{})
	fs.Lookup(nil, &fuse.InHeader{}, "b", &fuse.EntryOut{})
	fs.GetAttr(nil, &fuse.GetAttrIn{}, &fuse.AttrOut{})
	// go-fuse's doWrite: Writev, then Write on ENOSYS.
	if _, st := fs.Writev(nil, &fuse.WriteIn{}, [][]byte{{1}}); st == fuse.ENOSYS {
		fs.Write(nil, &fuse.WriteIn{}, []byte{1})
	}
	fs.Forget(1, 1)
	got := c.Snapshot()
	want := map[string]uint64{"LOOKUP": 2, "GETATTR": 1, "WRITE": 1, "FORGET": 1}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// TestEveryOpHasAName pins that no counted opcode prints as UNKNOWN or
// empty.
func TestEveryOpHasAName(t *testing.T) {
	for o := Op(0); o < numOps; o++ {
		if n := o.String(); n == "" || n == "UNKNOWN" {
			t.Errorf("op %d has no name", o)
		}
	}
}
