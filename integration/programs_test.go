package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each test drives an unmodified program on the mount and checks the result
// both through the mount and on the backing directory.

func TestPrograms_ShellRedirectAndCat(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	d.sh(`printf 'one\n' > a.txt && printf 'two\n' >> a.txt`)
	assert.Equal(t, "one\ntwo\n", d.sh(`cat a.txt`))
	assertBacking(t, d, "a.txt", "one\ntwo\n")
}

func TestPrograms_CoreutilsTreeOperations(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"tree/x/y.txt": "y\n", "tree/z.txt": "z\n"}})
	d.sh(`mkdir -p deep/er/est && cp -a tree copy && mv copy moved && ln -s moved/z.txt link && ln moved/z.txt hard`)
	assert.Equal(t, "y\n", d.sh(`cat moved/x/y.txt`))
	assert.Equal(t, "z\n", d.sh(`cat link`))
	assert.Equal(t, "moved/z.txt", strings.TrimSpace(d.sh(`readlink link`)))
	assert.Equal(t, "2", strings.TrimSpace(d.sh(`stat -c %h hard`)), "hard link count through the mount")
	fi, err := os.Stat(filepath.Join(d.Src, "deep/er/est"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	d.sh(`rm -r moved deep && rm link hard`)
	_, err = os.Stat(filepath.Join(d.Src, "moved"))
	assert.True(t, os.IsNotExist(err), "rm -r removed the backing tree")
	assertBacking(t, d, "tree/z.txt", "z\n")
}

func TestPrograms_SedInPlace(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"conf.ini": "name=old\nkeep=1\n"}})
	d.sh(`sed -i 's/old/new/' conf.ini`)
	assert.Equal(t, "name=new\nkeep=1\n", d.sh(`cat conf.ini`))
	assertBacking(t, d, "conf.ini", "name=new\nkeep=1\n")
}

func TestPrograms_PythonAtomicReplace(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is required (installed by make deps): %v", err)
	}
	d := startDaemon(t, daemonOptions{Files: map[string]string{"data.json": "{\"v\": 1}\n"}})
	d.sh(`python3 - <<'EOF'
import os, tempfile
fd, tmp = tempfile.mkstemp(dir=".", prefix=".data.", suffix=".tmp")
with os.fdopen(fd, "w") as f:
    f.write('{"v": 2}\n')
    f.flush()
    os.fsync(f.fileno())
os.replace(tmp, "data.json")
EOF`)
	assert.Equal(t, "{\"v\": 2}\n", d.sh(`cat data.json`))
	assertBacking(t, d, "data.json", "{\"v\": 2}\n")
	entries, err := os.ReadDir(d.Src)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasSuffix(e.Name(), ".tmp"), "temp file left: %s", e.Name())
	}
}

func TestPrograms_VimSavesInExMode(t *testing.T) {
	vim, err := exec.LookPath("vim")
	if err != nil {
		vim, err = exec.LookPath("vim.tiny")
	}
	require.NoError(t, err, "vim is required (installed by make deps)")
	d := startDaemon(t, daemonOptions{Files: map[string]string{"poem.txt": "roses are red\n"}})
	// -es: silent Ex mode; the default 'backupcopy' and swap files exercise
	// the editor's own save pattern on the mount.
	d.sh(vim + ` -es -u NONE -c '%s/red/blue/' -c 'wq' poem.txt`)
	assert.Equal(t, "roses are blue\n", d.sh(`cat poem.txt`))
	assertBacking(t, d, "poem.txt", "roses are blue\n")
	d.sh(vim + ` -es -N -u NONE -c 'set backupcopy=no writebackup' -c '%s/blue/green/' -c 'wq' poem.txt`)
	assertBacking(t, d, "poem.txt", "roses are green\n")
}

func TestPrograms_EditorSavePatterns(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "1\n", "b.txt": "1\n", "c.txt": "1\n"}})
	// Write in place.
	d.sh(`printf '2\n' > a.txt`)
	// Write a temp file, then rename it over the original.
	d.sh(`printf '2\n' > .b.txt.tmp && mv .b.txt.tmp b.txt`)
	// Rename the original to a backup, write a new file, drop the backup.
	d.sh(`mv c.txt c.txt~ && printf '2\n' > c.txt && rm c.txt~`)
	// A swap file beside the original, created and removed.
	d.sh(`printf 'swap' > .a.txt.swp && rm .a.txt.swp`)
	for _, name := range []string{"a.txt", "b.txt", "c.txt"} {
		assertBacking(t, d, name, "2\n")
	}
	entries, err := os.ReadDir(d.Src)
	require.NoError(t, err)
	assert.Len(t, entries, 3, "no temp, backup or swap file left")
}

func TestPrograms_GitWorkflow(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"main.go": "package main\n"}})
	git := `git -c user.name=t -c user.email=t@example.invalid -c init.defaultBranch=main `
	d.sh(git + `init -q && ` + git + `add -A && ` + git + `commit -qm first`)
	d.sh(`printf 'package main\n\nfunc main() {}\n' > main.go`)
	status := d.sh(git + `status --porcelain`)
	assert.Contains(t, status, " M main.go")
	d.sh(git + `commit -qam second && ` + git + `checkout -q -b feature HEAD~1`)
	assert.Equal(t, "package main\n", d.sh(`cat main.go`))
	d.sh(git + `checkout -q main`)
	assert.Equal(t, "package main\n\nfunc main() {}\n", d.sh(`cat main.go`))
	log := d.sh(git + `log --oneline`)
	assert.Equal(t, 2, len(strings.Split(strings.TrimSpace(log), "\n")), log)
	assert.Empty(t, strings.TrimSpace(d.sh(git+`status --porcelain`)))
}

func TestPrograms_TarExtract(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	src := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(src, "pkg/sub"), 0o755))
	for i, name := range []string{"pkg/a.txt", "pkg/sub/b.txt", "pkg/sub/c.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(strings.Repeat("x", i*1000+1)), 0o640))
	}
	require.NoError(t, os.Symlink("a.txt", filepath.Join(src, "pkg/link")))
	archive := filepath.Join(t.TempDir(), "t.tar")
	out, err := exec.Command("tar", "-C", src, "-cf", archive, "pkg").CombinedOutput()
	require.NoError(t, err, string(out))
	d.sh(`tar -xpf ` + archive)
	out2, err := exec.Command("diff", "-r", "--no-dereference", filepath.Join(src, "pkg"), d.m("pkg")).CombinedOutput()
	require.NoError(t, err, "extracted tree differs:\n%s", out2)
	assert.Equal(t, "640", strings.TrimSpace(d.sh(`stat -c %a pkg/sub/b.txt`)))
}

func TestPrograms_ChmodTouchTruncate(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.sh": "echo hi\nmore\n"}})
	d.sh(`chmod 751 f.sh && truncate -s 8 f.sh && touch -d '2001-02-03 04:05:06' f.sh`)
	fi, err := os.Stat(filepath.Join(d.Src, "f.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), fi.Mode().Perm())
	assert.Equal(t, int64(8), fi.Size())
	assert.Equal(t, 2001, fi.ModTime().Year())
	assert.Equal(t, "751 8", strings.TrimSpace(d.sh(`stat -c '%a %s' f.sh`)))
	assert.Equal(t, "hi\n", d.sh(`./f.sh`))
}

func TestPrograms_Xattrs(t *testing.T) {
	if _, err := exec.LookPath("setfattr"); err != nil {
		t.Fatalf("setfattr is required (package attr, installed by make deps): %v", err)
	}
	d := startDaemon(t, daemonOptions{Files: map[string]string{"x.txt": "x\n"}})
	d.sh(`setfattr -n user.color -v blue x.txt`)
	assert.Contains(t, d.sh(`getfattr -n user.color --only-values x.txt`), "blue")
	listing := d.sh(`getfattr -d -m - x.txt`)
	assert.Contains(t, listing, "user.color")
	assert.Contains(t, listing, "user.dsh.version", "the version xattr is listed")
	d.sh(`setfattr -x user.color x.txt`)
	_, err := d.shErr(`getfattr -n user.color x.txt`)
	assert.Error(t, err, "removed xattr must be gone")
	_, err = d.shErr(`setfattr -n user.dsh.version -v forged x.txt`)
	assert.Error(t, err, "the version xattr is read-only")
}

// assertBacking checks the content of rel in the backing directory.
func assertBacking(t *testing.T, d *daemon, rel, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Src, rel))
	require.NoError(t, err)
	assert.Equal(t, want, string(b), "backing file %s", rel)
}
