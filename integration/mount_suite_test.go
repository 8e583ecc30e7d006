package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/fuse/mounttest"
)

// The mount behaviour suite (internal/fuse/mounttest) on real mounts: the
// workspace mount and a branch mount, each by an unbound process and by a
// process bound to a session under `dshmount exec`. Each run has its own
// directory: a branch shows the workspace's files, so the branch's runs
// must not meet the files of the workspace's. The bound runs are a
// re-executed test binary (helperMountSuite) that prints go test's verbose
// lines; the parent turns each case's line into a subtest of its own.

// helperMountSuite runs the suite in a directory (see runMountSuiteHelper).
const helperMountSuite = "mount-suite"

// helperSuiteRootEnv names the directory the mount-suite helper runs the
// cases under; helperSuiteBackendEnv the mounttest.Backend, as a number
// (the helper runs bound: mounttest.Mount.Bound).
const (
	helperSuiteRootEnv    = "DSH_INTEGRATION_SUITE_ROOT"
	helperSuiteBackendEnv = "DSH_INTEGRATION_SUITE_BACKEND"
)

// suiteTestName is the test the mount-suite helper runs the cases under.
const suiteTestName = "MountSuite"

// runMountSuiteHelper runs mounttest.Run under testing.Main (the cases
// need a *testing.T) and exits: 0 when every case passed.
func runMountSuiteHelper() int {
	root := os.Getenv(helperSuiteRootEnv)
	backend, err := strconv.Atoi(os.Getenv(helperSuiteBackendEnv))
	all := func(string, string) (bool, error) { return true, nil }
	testing.Main(all, []testing.InternalTest{{Name: suiteTestName, F: func(t *testing.T) {
		require.NoError(t, err, helperSuiteBackendEnv)
		require.NotEmpty(t, root, helperSuiteRootEnv)
		mounttest.Run(t, root, mounttest.Mount{Backend: mounttest.Backend(backend), Bound: true})
	}}}, nil, nil)
	return 2 // not reached
}

// suiteResult matches go test's verbose result line of one case.
var suiteResult = regexp.MustCompile(`--- (PASS|FAIL|SKIP): ` + suiteTestName + `/(\w+) `)

// TestMountSuite_WorkspaceAndBranchMounts runs every case of the mount
// behaviour suite on the workspace mount and on a branch mount, unbound
// and bound to a session; a branch answers hard links and renames onto a
// directory with its documented EXDEV (mounttest.Branch).
func TestMountSuite_WorkspaceAndBranchMounts(t *testing.T) {
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"Passthrough", nil},
		{"DaemonReadWrite", []string{"--passthrough=false"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Args: mode.args})
			bm := filepath.Join(t.TempDir(), "feat")
			require.NoError(t, os.Mkdir(bm, 0o755))
			t.Cleanup(func() {
				if mounted(bm) {
					_ = syscall.Unmount(bm, syscall.MNT_DETACH)
				}
			})
			_, errOut, code := d.dsh("branch", "create", "feat", "--mount", bm)
			require.Equal(t, 0, code, errOut)
			for _, m := range []struct {
				name    string
				dir     string
				backend mounttest.Backend
				exec    []string // how `dshmount exec` binds the process
			}{
				{"Workspace", d.Mnt, mounttest.Disk, nil},
				{"Branch", bm, mounttest.Branch, []string{"--branch", "feat"}},
			} {
				t.Run(m.name+"/Unbound", func(t *testing.T) {
					mounttest.Run(t, filepath.Join(m.dir, m.name+"-unbound"), mounttest.Mount{Backend: m.backend})
				})
				t.Run(m.name+"/Bound", func(t *testing.T) {
					bind := m.exec
					if bind == nil {
						sess, err := openStrict(testCtx(t), d, "mount-suite")
						require.NoError(t, err)
						bind = []string{"--session", string(sess)}
					}
					boundSuite(t, d, filepath.Join(m.dir, m.name+"-bound"), m.backend, bind)
				})
			}
			assert.NotContains(t, d.log(), "level=ERROR")
		})
	}
}

// boundSuite runs the suite in a process bound with `dshmount exec BIND`
// under root, and reports each case as a subtest.
func boundSuite(t *testing.T, d *daemon, root string, backend mounttest.Backend, bind []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"exec", "--socket", d.Socket}, bind...)
	args = append(args, "--", testBinary(t), "-test.run=^$", "-test.v=true")
	cmd := exec.CommandContext(ctx, dshBinary, args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+helperMountSuite, helperSuiteRootEnv+"="+root,
		helperSuiteBackendEnv+"="+strconv.Itoa(int(backend)))
	cmd.Dir = d.Mnt
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	results := map[string]string{}
	for _, m := range suiteResult.FindAllStringSubmatch(out.String(), -1) {
		results[m[2]] = m[1]
	}
	for _, name := range mounttest.Names() {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, "PASS", results[name], "%s in the bound process:\n%s", name, out.String())
		})
	}
	assert.NoError(t, runErr, "the bound process:\n%s", out.String())
}
