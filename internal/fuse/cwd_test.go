package fuse

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
)

// cwdEnv makes the test binary enter the directory it names, say
// "entered", wait for a line on stdin, then report its getcwd and the
// bytes of f read relative to it (runInDir).
const cwdEnv = "DSH_FUSE_TEST_CWD"

// runInDir is the program of cwdEnv: a shell that enters a directory and
// goes on working in it.
func runInDir(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	fmt.Println("entered")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	wd, err := unix.Getwd()
	if err != nil {
		wd = "getcwd: " + err.Error()
	}
	b, err := os.ReadFile("f")
	if err != nil {
		b = []byte("read f: " + err.Error())
	}
	fmt.Printf("%s\n%s\n", wd, b)
	return nil
}

// TestMount_WatcherNewsOfAnEnteredDirectoryKeepsTheWorkingDirectory: a
// directory made directly in the workspace directory, entered through the
// mount at once, and only then reported by the watcher (the order the race
// of issue 30 item 1 took 20 times of 20): the process keeps its working
// directory (getcwd) and reads the file in it.
func TestMount_WatcherNewsOfAnEnteredDirectoryKeepsTheWorkingDirectory(t *testing.T) {
	e := newEnv(t, envOptions{})
	for i := range 20 {
		d := "d" + strconv.Itoa(i)
		e.put(d+"/f", "x")
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), cwdEnv+"="+e.m(d))
		stdin, err := child.StdinPipe()
		require.NoError(t, err)
		stdout, err := child.StdoutPipe()
		require.NoError(t, err)
		child.Stderr = os.Stderr
		require.NoError(t, child.Start())
		out := bufio.NewReader(stdout)
		line, err := out.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "entered\n", line)

		// The watcher's news arrives after the process's lookup.
		for _, rel := range []string{d, d + "/f"} {
			_, err = e.engine.RecordExternal(context.Background(), policy.ExternalChange{
				Op: policy.OpCreate, Target: e.lfs.TargetForRel(rel), Dir: rel == d,
			})
			require.NoError(t, err)
		}
		_, err = io.WriteString(stdin, "go on\n")
		require.NoError(t, err)
		rest, err := io.ReadAll(out)
		require.NoError(t, err)
		require.NoError(t, child.Wait())
		lines := strings.Split(strings.TrimSpace(string(rest)), "\n")
		require.Len(t, lines, 2, "the child's report: %q", rest)
		assert.Equal(t, e.m(d), lines[0], "round %d: getcwd after the watcher's news", i)
		assert.Equal(t, "x", lines[1], "round %d: f read relative to the working directory", i)
	}
	// A name replaced by another file (with the same inode number) still
	// loses its entry: the kernel looks it up again and gets the new file.
	_, err := os.Stat(e.m("d0/f"))
	require.NoError(t, err)
	gen := func() uint64 { return e.srv.inval.lookup("d0").GetChild("f").StableAttr().Gen }
	old := gen()
	require.NoError(t, os.Remove(e.b("d0/f")))
	e.put("d0/f", "new")
	_, err = e.engine.RecordExternal(context.Background(), policy.ExternalChange{Op: policy.OpCreate, Target: e.lfs.TargetForRel("d0/f")})
	require.NoError(t, err)
	_, err = os.Stat(e.m("d0/f"))
	require.NoError(t, err)
	assert.NotEqual(t, old, gen(), "the replaced name resolves to the new file")
}
