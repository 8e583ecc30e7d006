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

// TestHelp_EveryCommandPrintsItsHelpOnStdout runs `dshmount CMD --help`
// (the built binary) for every command: the help is the answer, so it goes
// to stdout and the exit status is 0.
func TestHelp_EveryCommandPrintsItsHelpOnStdout(t *testing.T) {
	for _, c := range commands() {
		code, out, stderr := runBinary(t, binRun{}, c.name, "--help")
		assert.Equal(t, exitOK, code, c.name)
		assert.Contains(t, out, "Usage: dshmount "+c.name, "%s --help on stdout", c.name)
		assert.Empty(t, stderr, "%s --help: nothing on stderr", c.name)
	}
	code, out, stderr := runBinary(t, binRun{}, "read", "--no-such-flag")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out, "a bad flag is an error: stderr only")
	assert.Contains(t, stderr, "flag provided but not defined: -no-such-flag")
}

// TestHelp_EachDefaultIsPrintedOnce: serve's cache timeouts name their
// defaults with and without the watcher once (flag printed a second
// "(default 10s)" that contradicted the first), and log's --session does
// not claim $DSH_SESSION as its default (log ignores it).
func TestHelp_EachDefaultIsPrintedOnce(t *testing.T) {
	serve := helpOf(t, "serve")
	for _, f := range []string{"entry-timeout", "attr-timeout"} {
		i := strings.Index(serve, "  -"+f+" ")
		require.GreaterOrEqual(t, i, 0, f)
		desc := strings.SplitN(serve[i:], "\n", 3)[1]
		assert.Equal(t, 1, strings.Count(desc, "(default"), "%s: %s", f, desc)
		assert.Contains(t, desc, "10s without", f)
	}
	log := helpOf(t, "log")
	i := strings.Index(log, "  -session ")
	require.GreaterOrEqual(t, i, 0)
	desc := strings.SplitN(log[i:], "\n", 3)[1]
	assert.NotContains(t, desc, "default $DSH_SESSION", "log ignores $DSH_SESSION, as its help says")
}
