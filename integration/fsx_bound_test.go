package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/integration/fsx"
)

// A session is never refused for its own work (issue 20, items 4-6): the
// fsx exerciser runs in a process bound to a session, with every operation
// kind (write, truncate, fallocate, punch hole, copy_file_range, mmap read
// and write, rename, link, unlink), on files only it creates. A refusal of
// its own work (EACCES, ESTALE) fails an operation the model says must
// succeed: a mismatch.

// helperFSX runs the exerciser in a child process (see runFSXHelper).
const helperFSX = "fsx"

// helperFSXConfigEnv carries the child's fsxHelperConfig as JSON.
const helperFSXConfigEnv = "DSH_INTEGRATION_FSX_CONFIG"

// fsxBoundShare is the bound runs' share of DSH_FSX_OPS in percent
// (20000 operations over both runs by default).
const fsxBoundShare = 20

// fsxHelperConfig is what the parent tells the fsx helper.
type fsxHelperConfig struct {
	Dir     string `json:"dir"`
	Backing string `json:"backing"`
	Seed    uint64 `json:"seed"`
	Ops     int    `json:"ops"`
}

// fsxHelperResult is the helper's one line of output.
type fsxHelperResult struct {
	Result fsx.Result `json:"result"`
	Error  string     `json:"error,omitempty"`
}

// runFSXHelper runs the exerciser as configured by helperFSXConfigEnv and
// prints an fsxHelperResult as one JSON line; 0 when the run was clean.
func runFSXHelper(out io.Writer) int {
	var cfg fsxHelperConfig
	if err := json.Unmarshal([]byte(os.Getenv(helperFSXConfigEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "fsx helper: %s: %v\n", helperFSXConfigEnv, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := fsx.Run(ctx, fsx.Config{Dir: cfg.Dir, Backing: cfg.Backing, Seed: cfg.Seed, Ops: cfg.Ops, Mmap: true})
	line := fsxHelperResult{Result: res}
	if err != nil {
		line.Error = err.Error()
	}
	b, merr := json.Marshal(line)
	if merr != nil {
		fmt.Fprintf(os.Stderr, "fsx helper: %v\n", merr)
		return 2
	}
	fmt.Fprintln(out, string(b))
	if err != nil {
		return 1
	}
	return 0
}

// TestHelperFSX checks the fsx helper's protocol on a plain directory.
func TestHelperFSX(t *testing.T) {
	dir := t.TempDir()
	cfg, err := json.Marshal(fsxHelperConfig{Dir: dir, Backing: dir, Seed: 3, Ops: 200})
	require.NoError(t, err)
	t.Setenv(helperFSXConfigEnv, string(cfg))
	var out bytes.Buffer
	require.Equal(t, 0, runFSXHelper(&out))
	var got fsxHelperResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Empty(t, got.Error)
	assert.Equal(t, 200, got.Result.Ops)
	assert.Positive(t, got.Result.Counts["write"])
}

// boundFSX runs the fsx helper under `dshmount exec` bound to session sess
// of d, in the mount, and returns its result and stderr.
func boundFSX(t *testing.T, d *daemon, sess string, cfg fsxHelperConfig) (fsxHelperResult, string) {
	t.Helper()
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshBinary, "exec", "--socket", d.Socket, "--session", sess, "--",
		testBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+helperFSX, helperFSXConfigEnv+"="+string(b))
	cmd.Dir = d.Mnt
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res fsxHelperResult
	line := strings.TrimSpace(stdout.String())
	require.NoError(t, json.Unmarshal([]byte(line), &res),
		"fsx helper output %q (exit: %v); stderr:\n%s", line, runErr, stderr.String())
	return res, stderr.String()
}

func TestFSX_BoundToASessionIsNeverRefused(t *testing.T) {
	requireFUSE(t)
	total := envInt(t, "DSH_FSX_OPS", 100000) * fsxBoundShare / 100
	seed := fsxSeed(t)
	modes := []struct {
		name string
		args []string
	}{
		{"Passthrough", nil},
		{"DaemonReadWrite", []string{"--passthrough=false"}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Args: mode.args})
			sess, err := openStrict(testCtx(t), d, "bound-fsx")
			require.NoError(t, err)
			cfg := fsxHelperConfig{Dir: d.m("fsx"), Backing: filepath.Join(d.Src, "fsx"), Seed: seed, Ops: total / len(modes)}
			got, stderr := boundFSX(t, d, string(sess), cfg)
			res := got.Result
			t.Logf("bound %s (seed %d)", res, seed)
			require.Empty(t, got.Error, "a bound session refused or corrupted its own work (replay with DSH_FSX_SEED=%d)\nhelper stderr:\n%s\ndaemon log:\n%s",
				seed, stderr, lastLines(d.log(), 60))
			assert.Equal(t, cfg.Ops, res.Ops)
			assert.Empty(t, res.Unsupported, "every operation must work on the mount")
			for _, kind := range []string{"write", "read", "truncate", "fallocate", "punch", "copyrange",
				"mmapread", "mmapwrite", "rename", "link", "unlink", "fsync", "reopen"} {
				assert.Positive(t, res.Performed(kind), "operation %s never ran", kind)
			}
			assertBoundAudit(t, d, string(sess))
		})
	}
}

// assertBoundAudit checks that the mount audited the exerciser's changes
// under the session: the run was bound, not merely successful.
func assertBoundAudit(t *testing.T, d *daemon, sess string) {
	t.Helper()
	log, err := d.Client.Log(testCtx(t), control.LogParams{Limit: 200})
	require.NoError(t, err)
	bound := 0
	for _, e := range log.Entries {
		if string(e.Session) == sess && strings.HasPrefix(e.Path, "fsx/") {
			bound++
		}
	}
	assert.Positive(t, bound, "the last %d audit entries hold no change of the session under fsx/", len(log.Entries))
}
