package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helpOf runs `dshmount ARGS --help` in-process and returns what it printed.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append(args, "--help"), stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	require.Equal(t, exitOK, code)
	return out.String() + errOut.String()
}

func TestServeHelp_DocumentsEveryFlag(t *testing.T) {
	help := helpOf(t, "serve")
	lines := strings.Split(help, "\n")
	flagLine := regexp.MustCompile(`^  -(\S+)`)
	n := 0
	for i, l := range lines {
		m := flagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n++
		require.Less(t, i+1, len(lines), m[1])
		assert.NotEmpty(t, strings.TrimSpace(lines[i+1]), "flag -%s has no description", m[1])
	}
	assert.Greater(t, n, 10, help)
	assert.Contains(t, help, "-cpuprofile FILE")
	assert.Contains(t, help, "-memprofile FILE")
}

func TestHelp_SocketDefaultIsPrintedOnce(t *testing.T) {
	t.Setenv(envSocket, "/some/where/control.sock")
	t.Setenv(envSession, "s-from-env")
	for _, args := range [][]string{{"read"}, {"exec"}, {"mcp"}} {
		help := helpOf(t, args...)
		assert.Contains(t, help, "(default $DSH_SOCKET", args)
		assert.NotContains(t, help, "/some/where/control.sock", "%v: the default is named once, not printed again", args)
		assert.NotContains(t, help, "s-from-env", args)
	}
}
