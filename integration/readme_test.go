package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeBlocks returns the fenced blocks of the README section titled
// heading, in order, each with the language its fence names ("" for none).
func readmeBlocks(t *testing.T, heading string) (langs, bodies []string) {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	s := string(b)
	i := strings.Index(s, "\n## "+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README has a section %q", heading)
	s = s[i+len(heading)+5:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var body []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, body = true, nil
			langs = append(langs, strings.TrimPrefix(line, "```"))
		case in && line == "```":
			in = false
			bodies = append(bodies, strings.Join(body, "\n")+"\n")
		case in:
			body = append(body, line)
		}
	}
	return langs, bodies
}

// TestReadme_QuickStartRuns runs the README's quick start as it is written,
// on a fresh project, with the paths and the daemon's start-up wait as the
// only changes: every command must succeed, the edit must land, and the
// error transcript below it must be what the commands print.
func TestReadme_QuickStartRuns(t *testing.T) {
	requireFUSE(t)
	// A short root: the daemon's default socket lives below $HOME, and a
	// Unix socket address holds 107 bytes.
	root, err := os.MkdirTemp("/tmp", "readme-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	home, project, mnt := filepath.Join(root, "home"), filepath.Join(root, "src", "project"), filepath.Join(root, "mnt", "project")
	for _, d := range []string{home, filepath.Join(project, "src"), mnt} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	// Before the directories go (a cleanup registered later runs first): a
	// script that failed half-way leaves its daemon serving.
	t.Cleanup(func() {
		if err := exec.Command(dshBinary, "unmount", mnt).Run(); err != nil {
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	require.NoError(t, os.WriteFile(filepath.Join(project, "src", "main.go"), []byte("package main\n\nfunc foo() {}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(project, "src", "Makefile"), []byte("test:\n\tgrep -q bar main.go\n"), 0o644))

	langs, blocks := readmeBlocks(t, "Quick start")
	require.Equal(t, []string{"sh", ""}, langs, "the quick start is a script and a transcript")
	script, transcript := blocks[0], blocks[1]
	script = strings.ReplaceAll(script, "~/src/project", project)
	script = strings.ReplaceAll(script, "/mnt/project", mnt)
	// The daemon prints "ready" once it serves; a script waits for it.
	serve := regexp.MustCompile(`(?m)^(dshmount serve .*)&(.*)$`)
	require.Regexp(t, serve, script, "the quick start starts the daemon in the background")
	script = serve.ReplaceAllString(script, `$1 >"$$HOME/serve.log" 2>&1 &$2
for i in $$(seq 300); do grep -q ready "$$HOME/serve.log" && break; sleep 0.1; done
grep -q ready "$$HOME/serve.log"`)
	// The transcript under it, run from the same directory before the
	// unmount, in a session that has read nothing (as its text says).
	var want bytes.Buffer
	var checks []string
	for _, line := range strings.Split(strings.TrimSpace(transcript), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			checks = append(checks, cmd+" 2>&1 || true")
			continue
		}
		want.WriteString(line + "\n")
	}
	require.NotEmpty(t, checks)
	lines := strings.Split(script, "\n")
	last := len(lines) - 2 // the unmount
	require.Contains(t, lines[last], "dshmount unmount")
	require.True(t, strings.HasPrefix(lines[last], "cd "), "the unmount leaves the mount first (a shell inside it keeps it busy)")
	body := strings.Join(lines[:last], "\n") + "\n" +
		"export DSH_SESSION=$(dshmount session open --name transcript)\n" +
		"echo ---transcript---\n" + strings.Join(checks, "\n") + "\necho ---end---\n" + lines[last] + "\n"

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euc", body)
	cmd.Env = append(os.Environ(), "HOME="+home, "PATH="+filepath.Dir(dshBinary)+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, "DSH_SOCKET=", "DSH_SESSION=")
	out, err := cmd.CombinedOutput()
	serveLog, _ := os.ReadFile(filepath.Join(home, "serve.log"))
	require.NoError(t, err, "the quick start fails:\n%s\nserve log:\n%s", out, serveLog)

	got := string(out)
	got = got[strings.Index(got, "---transcript---\n")+len("---transcript---\n"):]
	got = got[:strings.Index(got, "---end---")]
	assert.Equal(t, want.String(), got, "the README's transcript is what the commands print")
	b, err := os.ReadFile(filepath.Join(project, "src", "main.go"))
	require.NoError(t, err)
	assert.Equal(t, "package main\n\nfunc bar() {}\n", string(b), "the quick start's edit landed")
	assert.NoFileExists(t, filepath.Join(mnt, "src", "main.go"), "unmounted")
}
