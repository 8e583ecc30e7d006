package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// builtBinary is the dshmount binary the CLI tests drive, built once.
var builtBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBinary.dir != "" {
		_ = os.RemoveAll(builtBinary.dir)
	}
	os.Exit(code)
}

// binary returns the real dshmount binary, built once for the package.
func binary(t *testing.T) string {
	t.Helper()
	builtBinary.once.Do(func() {
		builtBinary.dir, builtBinary.err = os.MkdirTemp("", "dshbin")
		if builtBinary.err != nil {
			return
		}
		builtBinary.path = filepath.Join(builtBinary.dir, "dshmount")
		out, err := exec.Command("go", "build", "-o", builtBinary.path, "github.com/dshmount/dshmount/cmd/dshmount").CombinedOutput()
		if err != nil {
			builtBinary.err = errors.New(string(out))
		}
	})
	require.NoError(t, builtBinary.err, "go build ./cmd/dshmount")
	return builtBinary.path
}

// binRun describes one run of the built binary.
type binRun struct {
	stdin string
	dir   string   // working directory ("" = the test's)
	env   []string // added to the environment, which has no DSH_* variable and an empty run directory
	gone  bool     // dir is removed after the binary's shell entered it (its getcwd fails)
}

// runBinary runs the built binary and returns its exit code, stdout and
// stderr.
func runBinary(t *testing.T, r binRun, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Dir = r.dir
	if r.gone {
		cmd = exec.Command("/bin/sh", append([]string{"-c", `cd "$0" && rmdir "$0" && exec "$@"`, r.dir, binary(t)}, args...)...)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DSH_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunDir+"="+t.TempDir()) // no daemon registered unless r.env says so
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdin = strings.NewReader(r.stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		require.NoError(t, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// envRunDir overrides the registry's run directory.
const envRunDir = "DSH_RUN_DIR"

// buildBinary builds the real dshmount binary with extra build flags.
func buildBinary(t *testing.T, goBuildFlags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dshmount")
	args := append(append([]string{"build"}, goBuildFlags...), "-o", bin, "github.com/dshmount/dshmount/cmd/dshmount")
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func TestVersion_BinaryReportsTheStampedVersion(t *testing.T) {
	bin := buildBinary(t, "-ldflags", "-X main.stampedVersion=v1.2.3-test")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "dshmount v1.2.3-test\n", string(out))
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	assert.Contains(t, string(help), "dshmount --version")
}

func TestVersion_FromBuildInfo(t *testing.T) {
	assert.Equal(t, "devel", versionFrom("", nil))
	assert.Equal(t, "v2.0.0", versionFrom("", &debug.BuildInfo{Main: debug.Module{Version: "v2.0.0"}}))
	assert.Equal(t, "devel-0123456789ab-dirty", versionFrom("", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}))
	assert.Equal(t, "devel", versionFrom("", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}))
	assert.Equal(t, "stamp", versionFrom("stamp", &debug.BuildInfo{Main: debug.Module{Version: "v2.0.0"}}))
}
