package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildBinary builds the real dshmount binary into a temporary directory.
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
