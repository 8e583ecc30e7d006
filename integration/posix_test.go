package integration

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
)

// POSIX conformance (issue 10, item 7): each case runs on a native
// directory and on the mount with the same relative paths, as root and as
// nobody, and the results (errno or success, then the stat fields of the
// named paths) must be the same. Setup runs as the persona unless rootSetup
// is given; op runs as the persona unless opAs is set.

type posixCase struct {
	name      string
	rootSetup func(c *caseDir) error // as root, before setup
	setup     func(c *caseDir) error // as the persona
	op        func(c *caseDir) error // the operation under test
	opAs      *cred                  // run op as this user instead of the persona
	stat      []string               // paths to lstat afterwards
}

var posixCases = []posixCase{
	{name: "ChmodOwnFileSetsSUID", setup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return c.chmod("f", 0o4755) }, stat: []string{"f"}},
	{name: "ChmodOfAnotherUsersFile", rootSetup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return c.chmod("f", 0o600) }, stat: []string{"f"}},
	{name: "ChmodSGIDWithoutGroupMembershipIsDropped",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.file("f", 0o644) }, func() error { return unix.Lchown(c.p("f"), c.persona.uid, credOther.gid) })
		},
		op: func(c *caseDir) error { return c.chmod("f", 0o2755) }, stat: []string{"f"}},
	{name: "ChownToAnotherUser", setup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return c.chown("f", credOther) }, stat: []string{"f"}},
	{name: "ChownClearsSUIDAndSGID", setup: func(c *caseDir) error { return c.file("f", 0o6755) },
		op: func(c *caseDir) error { return c.chown("f", c.persona) }, stat: []string{"f"}},
	{name: "ChownByRootClearsSUID", setup: func(c *caseDir) error { return c.file("f", 0o6755) },
		opAs: &credRoot, op: func(c *caseDir) error { return c.chown("f", credOther) }, stat: []string{"f"}},
	{name: "WriteByNonOwnerClearsSUID", rootSetup: func(c *caseDir) error { return c.file("f", 0o4777) },
		op: func(c *caseDir) error { return c.writeByte("f") }, stat: []string{"f"}},
	{name: "WriteByNonOwnerClearsSGID", rootSetup: func(c *caseDir) error { return c.file("f", 0o2777) },
		op: func(c *caseDir) error { return c.writeByte("f") }, stat: []string{"f"}},
	{name: "TruncateByNonOwnerClearsSUID", rootSetup: func(c *caseDir) error { return c.file("f", 0o4777) },
		op: func(c *caseDir) error { return unix.Truncate(c.p("f"), 1) }, stat: []string{"f"}},
	{name: "StickyDirUnlinkOfAnotherUsersFile",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("s", 0o1777) }, func() error { return c.file("s/f", 0o666) },
				func() error { return c.chown("s/f", credOther) })
		},
		op: func(c *caseDir) error { return unix.Unlink(c.p("s/f")) }, stat: []string{"s", "s/f"}},
	{name: "StickyDirRenameOfAnotherUsersFile",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("s", 0o1777) }, func() error { return c.file("s/f", 0o666) },
				func() error { return c.chown("s/f", credOther) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("s/f"), c.p("s/g")) }, stat: []string{"s/f", "s/g"}},
	{name: "StickyDirUnlinkOfOwnFile",
		rootSetup: func(c *caseDir) error { return c.mkdir("s", 0o1777) },
		setup:     func(c *caseDir) error { return c.file("s/f", 0o644) },
		op:        func(c *caseDir) error { return unix.Unlink(c.p("s/f")) }, stat: []string{"s", "s/f"}},
	{name: "HardLinkCounts", setup: func(c *caseDir) error { return c.file("a", 0o644) },
		op: func(c *caseDir) error {
			return all(func() error { return unix.Link(c.p("a"), c.p("b")) }, func() error { return unix.Link(c.p("a"), c.p("c")) },
				func() error { return unix.Unlink(c.p("b")) })
		}, stat: []string{"a", "b", "c"}},
	{name: "DirectoryLinkCount",
		setup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o755) }, func() error { return c.mkdir("d/x", 0o755) },
				func() error { return c.mkdir("d/y", 0o755) })
		},
		op: func(c *caseDir) error { return unix.Rmdir(c.p("d/y")) }, stat: []string{"d", "d/x"}},
	{name: "RenameDirOverEmptyDir",
		setup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("a", 0o750) }, func() error { return c.file("a/f", 0o644) },
				func() error { return c.mkdir("b", 0o755) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("a"), c.p("b")) }, stat: []string{"a", "b", "b/f"}},
	{name: "RenameDirOverNonEmptyDir",
		setup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("a", 0o755) }, func() error { return c.mkdir("b", 0o755) },
				func() error { return c.file("b/f", 0o644) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("a"), c.p("b")) }, stat: []string{"a", "b", "b/f"}},
	{name: "RenameFileOverDir",
		setup: func(c *caseDir) error {
			return all(func() error { return c.file("f", 0o644) }, func() error { return c.mkdir("d", 0o755) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("f"), c.p("d")) }, stat: []string{"f", "d"}},
	{name: "RenameDirOverFile",
		setup: func(c *caseDir) error {
			return all(func() error { return c.file("f", 0o644) }, func() error { return c.mkdir("d", 0o755) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("d"), c.p("f")) }, stat: []string{"f", "d"}},
	{name: "RenameDirIntoItself",
		setup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("a", 0o755) }, func() error { return c.mkdir("a/b", 0o755) })
		},
		op: func(c *caseDir) error { return unix.Rename(c.p("a"), c.p("a/b/c")) }, stat: []string{"a", "a/b"}},
	{name: "RenameNoReplaceOverExisting",
		setup: func(c *caseDir) error {
			return all(func() error { return c.file("a", 0o644) }, func() error { return c.file("b", 0o600) })
		},
		op: func(c *caseDir) error {
			return unix.Renameat2(unix.AT_FDCWD, c.p("a"), unix.AT_FDCWD, c.p("b"), unix.RENAME_NOREPLACE)
		}, stat: []string{"a", "b"}},
	{name: "NameOf256BytesIsTooLong",
		op:   func(c *caseDir) error { return c.create(strings.Repeat("n", 256), 0, 0o644) },
		stat: []string{strings.Repeat("n", 255)}},
	{name: "NameOf255BytesIsAccepted",
		op:   func(c *caseDir) error { return c.create(strings.Repeat("n", 255), 0, 0o644) },
		stat: []string{strings.Repeat("n", 255)}},
	{name: "RmdirNonEmpty",
		setup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o755) }, func() error { return c.file("d/f", 0o644) })
		},
		op: func(c *caseDir) error { return unix.Rmdir(c.p("d")) }, stat: []string{"d", "d/f"}},
	{name: "RmdirOfFile", setup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return unix.Rmdir(c.p("f")) }, stat: []string{"f"}},
	{name: "UnlinkOfDir", setup: func(c *caseDir) error { return c.mkdir("d", 0o755) },
		op: func(c *caseDir) error { return unix.Unlink(c.p("d")) }, stat: []string{"d"}},
	{name: "OpenExclOnExisting", setup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return c.create("f", unix.O_EXCL, 0o600) }, stat: []string{"f"}},
	{name: "MkdirExisting", setup: func(c *caseDir) error { return c.mkdir("d", 0o755) },
		op: func(c *caseDir) error { return unix.Mkdir(c.p("d"), 0o700) }, stat: []string{"d"}},
	{name: "SymlinkLoop",
		setup: func(c *caseDir) error {
			return all(func() error { return unix.Symlink("b", c.p("a")) }, func() error { return unix.Symlink("a", c.p("b")) })
		},
		op: func(c *caseDir) error { return c.open("a", unix.O_RDONLY) }, stat: []string{"a", "b"}},
	{name: "DanglingSymlink", op: func(c *caseDir) error { return unix.Symlink("missing-target", c.p("l")) },
		stat: []string{"l"}},
	{name: "OpenDirectoryFlagOnFile", setup: func(c *caseDir) error { return c.file("f", 0o644) },
		op: func(c *caseDir) error { return c.open("f", unix.O_RDONLY|unix.O_DIRECTORY) }, stat: []string{"f"}},
	{name: "Umask022AppliedOnceToFile",
		op:   func(c *caseDir) error { return withUmask(0o022, func() error { return c.create("f", 0, 0o777) }) },
		stat: []string{"f"}},
	{name: "Umask077AppliedToFile",
		op:   func(c *caseDir) error { return withUmask(0o077, func() error { return c.create("f", 0, 0o777) }) },
		stat: []string{"f"}},
	{name: "Umask000KeepsTheRequestedMode",
		op:   func(c *caseDir) error { return withUmask(0, func() error { return c.create("f", 0, 0o777) }) },
		stat: []string{"f"}},
	{name: "Umask022AppliedOnceToDir",
		op:   func(c *caseDir) error { return withUmask(0o022, func() error { return unix.Mkdir(c.p("d"), 0o777) }) },
		stat: []string{"d"}},
	{name: "ReadOfAnother0600File", rootSetup: func(c *caseDir) error { return c.file("f", 0o600) },
		op: func(c *caseDir) error { return c.open("f", unix.O_RDONLY) }, stat: []string{"f"}},
	{name: "CreateInAnother0755Dir", rootSetup: func(c *caseDir) error { return c.mkdir("d", 0o755) },
		op: func(c *caseDir) error { return c.create("d/f", 0, 0o644) }, stat: []string{"d", "d/f"}},
	{name: "StatThroughAnother0700Dir",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o700) }, func() error { return c.file("d/f", 0o644) })
		},
		op: func(c *caseDir) error {
			var st unix.Stat_t
			return unix.Stat(c.p("d/f"), &st)
		}, stat: []string{"d", "d/f"}},
	{name: "SGIDDirPassesItsGroupOn",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o2777) }, func() error { return unix.Lchown(c.p("d"), 0, credOther.gid) },
				func() error { return c.chmod("d", 0o2777) })
		},
		op: func(c *caseDir) error {
			return all(func() error { return c.create("d/f", 0, 0o644) }, func() error { return unix.Mkdir(c.p("d/x"), 0o755) })
		}, stat: []string{"d", "d/f", "d/x"}},
	// Null modes (issue 20, item 1): a mode of 0000 is shown as it is, never
	// as 0644 or 0755, and refuses every user but root as the disk does.
	{name: "ReadOfARootOwned0000File", rootSetup: func(c *caseDir) error { return c.file("f", 0) },
		op: func(c *caseDir) error { return c.open("f", unix.O_RDONLY) }, stat: []string{"f"}},
	{name: "WriteOfARootOwned0000File", rootSetup: func(c *caseDir) error { return c.file("f", 0) },
		op: func(c *caseDir) error { return c.writeByte("f") }, stat: []string{"f"}},
	{name: "ListOfARootOwned000Dir",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o755) }, func() error { return c.file("d/f", 0o644) },
				func() error { return c.chmod("d", 0) })
		},
		op: func(c *caseDir) error { return c.list("d") }, stat: []string{"d"}},
	{name: "StatThroughARootOwned000Dir",
		rootSetup: func(c *caseDir) error {
			return all(func() error { return c.mkdir("d", 0o755) }, func() error { return c.file("d/f", 0o644) },
				func() error { return c.chmod("d", 0) })
		},
		op: func(c *caseDir) error {
			var st unix.Stat_t
			return unix.Stat(c.p("d/f"), &st)
		}, stat: []string{"d"}},
	{name: "CreateWithMode0000ThenReopen",
		op: func(c *caseDir) error {
			return all(func() error { return c.create("f", unix.O_EXCL, 0) }, func() error { return c.open("f", unix.O_RDONLY) })
		}, stat: []string{"f"}},
	{name: "MkdirWithMode000ThenList",
		op: func(c *caseDir) error {
			return all(func() error { return unix.Mkdir(c.p("d"), 0) }, func() error { return c.list("d") })
		}, stat: []string{"d"}},
	{name: "CreatedEntriesBelongToTheCaller",
		op: func(c *caseDir) error {
			return all(func() error { return c.create("f", 0, 0o640) }, func() error { return unix.Mkdir(c.p("d"), 0o750) },
				func() error { return unix.Symlink("f", c.p("l")) }, func() error { return unix.Mknod(c.p("p"), unix.S_IFIFO|0o600, 0) },
				func() error { return unix.Link(c.p("f"), c.p("h")) })
		}, stat: []string{"f", "d", "l", "p", "h"}},
}

func TestPOSIX_MountBehavesLikeTheDisk(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("the POSIX table switches users and chowns files: it needs root")
	}
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"Passthrough", []string{"--allow-other"}},
		{"DaemonReadWrite", []string{"--allow-other", "--passthrough=false"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Args: mode.args})
			openToOthers(t, d.Mnt)
			native := nativeRoot(t)
			var diffs []string
			for _, persona := range []cred{credRoot, credNobody} {
				for _, pc := range posixCases {
					t.Run(persona.name+"/"+pc.name, func(t *testing.T) {
						rel := filepath.Join(persona.name, pc.name)
						want := runPosixCase(t, pc, persona, filepath.Join(native, rel))
						got := runPosixCase(t, pc, persona, filepath.Join(d.Mnt, rel))
						t.Logf("disk: %s", want)
						if !assert.Equal(t, want, got, "%s as %s: disk vs mount", pc.name, persona.name) {
							diffs = append(diffs, fmt.Sprintf("%s as %s:\n    disk:  %s\n    mount: %s", pc.name, persona.name, want, got))
						}
					})
				}
			}
			t.Logf("%d cases × 2 users; %d differ", len(posixCases), len(diffs))
			for _, s := range diffs {
				t.Log(s)
			}
		})
	}
}

// runPosixCase creates the case directory (owned by the persona), runs the
// setups and the operation, and stats the named paths as root.
func runPosixCase(t *testing.T, pc posixCase, persona cred, dir string) outcome {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Lchown(dir, persona.uid, persona.gid))
	c := &caseDir{dir: dir, persona: persona}
	var out outcome
	err := error(nil)
	if pc.rootSetup != nil {
		err = pc.rootSetup(c)
	}
	if err == nil && pc.setup != nil {
		err = asUser(persona, func() error { return pc.setup(c) })
	}
	out.Setup = errText(err)
	who := persona
	if pc.opAs != nil {
		who = *pc.opAs
	}
	out.Op = errText(asUser(who, func() error { return pc.op(c) }))
	for _, rel := range pc.stat {
		s, err := lstatSummary(c.p(rel))
		name := rel
		if len(name) > 12 {
			name = fmt.Sprintf("%.8s…(%d)", name, len(name))
		}
		if err != nil {
			out.Stats = append(out.Stats, name+": "+errText(err))
			continue
		}
		out.Stats = append(out.Stats, name+": "+s.String())
	}
	return out
}

// nativeRoot is a directory on the disk that every user can traverse.
func nativeRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dsh-posix-native-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// openToOthers lets other users traverse the directories above the
// mountpoint (the test's temporary directories are 0700).
func openToOthers(t *testing.T, mnt string) {
	t.Helper()
	tmp := os.TempDir()
	for dir := filepath.Dir(mnt); strings.HasPrefix(dir, tmp+"/"); dir = filepath.Dir(dir) {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	require.NoError(t, os.Chmod(mnt, 0o755))
}

// Paths up to PATH_MAX relative to the mount (issue 10, item 7): a tree
// whose mount-relative path is about 4000 bytes, created and used with *at
// calls relative to open directory descriptors, behaves the same on the
// disk and on the mount, although the backing root is deep enough that the
// backing absolute path of the deepest file exceeds PATH_MAX.

// deepComponents are the names of the deep tree: 15 of 255 bytes and one
// of 150, so that the path of a file in the last one is 3996 bytes.
func deepComponents() []string {
	var comps []string
	for i := range 15 {
		comps = append(comps, strings.Repeat(string(rune('a'+i)), 255))
	}
	return append(comps, strings.Repeat("z", 150))
}

func TestPOSIX_PathsUpToPathMaxRelativeToTheMount(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	deep := filepath.Join(base, strings.Repeat("b", 200), strings.Repeat("c", 200))
	dirs := &daemonDirs{Src: filepath.Join(deep, "src"), Mnt: filepath.Join(base, "mnt"), State: filepath.Join(base, "state")}
	native := filepath.Join(deep, "native")
	for _, dir := range []string{dirs.Src, dirs.Mnt, native} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	d := startDaemon(t, daemonOptions{Dirs: dirs})
	comps := deepComponents()
	rel := strings.Join(comps, "/") + "/f.txt"
	require.Greater(t, len(rel), 3990)
	require.Less(t, len(rel), unix.PathMax)
	require.Greater(t, len(filepath.Join(d.Src, rel)), unix.PathMax, "the backing path must exceed PATH_MAX")

	want := deepTreeSteps(t, native, comps)
	got := deepTreeSteps(t, d.Mnt, comps)
	for i := range want {
		t.Logf("disk: %s", want[i])
	}
	assert.Equal(t, want, got, "deep tree: disk vs mount")

	// The backing tree holds the file (walked with *at calls: its absolute
	// path is longer than PATH_MAX).
	content, err := readDeep(d.Src, comps, "g.txt")
	assert.NoError(t, err, "reading the backing file")
	assert.Equal(t, "deep\n", content)

	// The socket writes and reads a file of its own deep tree (a
	// 3996-byte workspace-relative path; the provider creates the missing
	// parents), which the backing directory and the mount then show.
	ctx := testCtx(t)
	sockComps := append([]string{"s"}, comps[1:]...)
	relS := strings.Join(sockComps, "/") + "/s.txt"
	_, err = d.Client.Write(ctx, control.WriteParams{Path: relS, Content: "socket\n", Unconditional: true})
	require.NoError(t, err, "socket write of a %d-byte workspace path", len(relS))
	read, err := d.Client.Read(ctx, control.ReadParams{Path: relS})
	if assert.NoError(t, err, "socket read of a %d-byte workspace path", len(relS)) && assert.Len(t, read.Lines, 1) {
		assert.Equal(t, "socket", read.Lines[0].Text)
	}
	content, err = readDeep(d.Src, sockComps, "s.txt")
	require.NoError(t, err, "reading the socket's file in the backing directory")
	assert.Equal(t, "socket\n", content)
	content, err = readDeep(d.Mnt, sockComps, "s.txt")
	require.NoError(t, err, "reading the socket's file through the mount")
	assert.Equal(t, "socket\n", content)
}

// deepTreeSteps builds the deep tree under root with *at calls and returns
// the outcome of each step.
func deepTreeSteps(t *testing.T, root string, comps []string) []string {
	t.Helper()
	var out []string
	step := func(name string, err error) bool {
		out = append(out, name+": "+errText(err))
		return err == nil
	}
	rootFd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	defer unix.Close(rootFd)
	fd, err := unix.Dup(rootFd)
	require.NoError(t, err)
	for i, c := range comps {
		if !step(fmt.Sprintf("mkdirat component %d", i), unix.Mkdirat(fd, c, 0o755)) {
			unix.Close(fd)
			return out
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if !step("openat dir", err) {
			return out
		}
		fd = next
	}
	defer unix.Close(fd)
	dirRel := strings.Join(comps, "/")
	f, err := unix.Openat(fd, "f.txt", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o640)
	if step("create f.txt", err) {
		_, werr := unix.Write(f, []byte("deep\n"))
		step("write and close", errors.Join(werr, unix.Close(f)))
	}
	var st unix.Stat_t
	err = unix.Fstatat(rootFd, dirRel+"/f.txt", &st, unix.AT_SYMLINK_NOFOLLOW)
	if step("fstatat full relative path", err) {
		out = append(out, fmt.Sprintf("stat: size=%d mode=%o", st.Size, st.Mode))
	}
	r, err := unix.Openat(rootFd, dirRel+"/f.txt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if step("openat full relative path", err) {
		buf := make([]byte, 64)
		n, rerr := unix.Read(r, buf)
		unix.Close(r)
		if step("read", rerr) {
			out = append(out, "content: "+string(buf[:n]))
		}
	}
	step("renameat in the deepest dir", unix.Renameat(fd, "f.txt", fd, "g.txt"))
	step("fstatat renamed", unix.Fstatat(rootFd, dirRel+"/g.txt", &st, unix.AT_SYMLINK_NOFOLLOW))
	step("fstatat old name", unix.Fstatat(rootFd, dirRel+"/f.txt", &st, unix.AT_SYMLINK_NOFOLLOW))
	tooLong := dirRel + "/" + strings.Repeat("x", unix.PathMax-len(dirRel))
	step("openat beyond PATH_MAX", unix.Fstatat(rootFd, tooLong, &st, 0))
	step("mkdirat and unlinkat dir", errors.Join(unix.Mkdirat(fd, "sub", 0o700), unix.Unlinkat(fd, "sub", unix.AT_REMOVEDIR)))
	return out
}

// readDeep reads name in the deep tree under root, walking the components
// with openat.
func readDeep(root string, comps []string, name string) (string, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	for _, c := range comps {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return "", err
		}
		fd = next
	}
	f, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	unix.Close(fd)
	if err != nil {
		return "", err
	}
	defer unix.Close(f)
	buf := make([]byte, 256)
	n, err := unix.Read(f, buf)
	return string(buf[:max(n, 0)]), err
}
