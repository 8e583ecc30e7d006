package fuse

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// TestOwnWrites_RecordedVersionOnlyWhileTheBytesAreAsRecorded pins when a
// session's last recorded version of its own change is reused without
// hashing (a rename of its own file): only for that session, only while
// the file still has the stat of the record and of the session's last own
// change. Any later write, by the session or anyone else, or another
// session's change, sends the caller back to the bytes.
func TestOwnWrites_RecordedVersionOnlyWhileTheBytesAreAsRecorded(t *testing.T) {
	stat := func(size int64, mtimeNs int64) unix.Stat_t {
		return unix.Stat_t{Dev: 1, Ino: 7, Size: size, Mtim: unix.NsecToTimespec(mtimeNs), Ctim: unix.NsecToTimespec(mtimeNs)}
	}
	recorded, written, other := stat(10, 100), stat(20, 200), stat(10, 300)
	renamed := recorded
	renamed.Ctim = unix.NsecToTimespec(999) // a rename moves only the ctime
	const a, b = policy.SessionID("a"), policy.SessionID("b")
	const v = provider.Version("c1-recorded")
	cases := []struct {
		name   string
		setup  func(o *ownWrites)
		asker  policy.SessionID
		st     unix.Stat_t
		wantOK bool
	}{
		{"as recorded", func(o *ownWrites) { o.note(a, &recorded); o.recorded(a, &recorded, v) }, a, recorded, true},
		{"renamed since: ctime only", func(o *ownWrites) { o.note(a, &recorded); o.recorded(a, &recorded, v) }, a, renamed, true},
		{"another session asks", func(o *ownWrites) { o.note(a, &recorded); o.recorded(a, &recorded, v) }, b, recorded, false},
		{"written by the session after the record", func(o *ownWrites) {
			o.note(a, &recorded)
			o.recorded(a, &recorded, v)
			o.note(a, &written)
		}, a, written, false},
		{"changed by someone else after the record", func(o *ownWrites) { o.note(a, &recorded); o.recorded(a, &recorded, v) }, a, other, false},
		{"another session changed it since", func(o *ownWrites) {
			o.note(a, &recorded)
			o.recorded(a, &recorded, v)
			o.note(b, &recorded)
		}, a, recorded, false},
		{"never recorded", func(o *ownWrites) { o.note(a, &recorded) }, a, recorded, false},
		{"recorded without an own change", func(o *ownWrites) { o.recorded(a, &recorded, v) }, a, recorded, false},
		{"unbound", func(o *ownWrites) { o.note(a, &recorded); o.recorded(a, &recorded, v) }, "", recorded, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o ownWrites
			c.setup(&o)
			got, ok := o.recordedVersion(c.asker, &c.st)
			assert.Equal(t, c.wantOK, ok)
			if c.wantOK {
				assert.Equal(t, v, got)
			}
		})
	}
}

// TestNode_AnIdleNodeStaysSmall pins the memory of a node no session has
// changed: the kernel can hold one per file of a large workspace (100,000
// files in the bench's memory row), so what only a bound session's own
// change needs is allocated by that change.
func TestNode_AnIdleNodeStaysSmall(t *testing.T) {
	const limit = 208 // a Go size class: go-fuse's Inode is 128 bytes of it
	assert.LessOrEqual(t, unsafe.Sizeof(node{}), uintptr(limit))

	var o ownWrites
	st := unix.Stat_t{Dev: 1, Ino: 2, Size: 3}
	assert.False(t, o.ownedBy("a", &st))
	assert.Nil(t, o.own, "asking allocates nothing")
	o.note("", &st)
	assert.Nil(t, o.own, "an unbound change allocates nothing")
	o.note("a", &st)
	assert.True(t, o.ownedBy("a", &st))
}
