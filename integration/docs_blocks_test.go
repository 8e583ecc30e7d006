package integration

import (
	"context"
	"fmt"
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

// The documents' command blocks are run: every fenced block of README.md
// and docs/*.md that shows commands is either run here, against a fresh
// daemon on a scratch project, or exempted with the reason it cannot run
// in a test. A block that is neither fails TestDocBlocks_EachIsRunOrExempt,
// so a new example cannot slip by unchecked.

// docBlockFiles returns the documents whose blocks are run: README.md,
// ARCHITECTURE.md and every docs/*.md, relative to the repository root.
func docBlockFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "docs/*.md")
	files := []string{"README.md", "ARCHITECTURE.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, ".."+string(filepath.Separator))))
	}
	return files
}

// docBlock is one fenced block of a document.
type docBlock struct {
	File    string // relative to the repository root
	Section string // the "## " heading it is under ("" before the first)
	Lang    string // the fence's language ("" for none)
	Body    string // the lines between the fences, newline-terminated
}

// key names the block by its file and first line: a block whose first line
// changes is a new block, to be run or exempted again.
func (b docBlock) key() string {
	first, _, _ := strings.Cut(b.Body, "\n")
	return b.File + ": " + strings.TrimSpace(first)
}

// docBlocksOf returns the fenced blocks of the document at file.
func docBlocksOf(t *testing.T, file string) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", file))
	require.NoError(t, err)
	var out []docBlock
	var cur *docBlock
	var body []string
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case cur == nil && strings.HasPrefix(line, "```"):
			cur, body = &docBlock{File: file, Section: section, Lang: strings.TrimPrefix(line, "```")}, nil
		case cur != nil && line == "```":
			cur.Body = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	require.Nil(t, cur, "%s: a fence is left open", file)
	return out
}

// allDocBlocks returns the blocks of every document in docBlockFiles.
func allDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	var out []docBlock
	for _, f := range docBlockFiles(t) {
		out = append(out, docBlocksOf(t, f)...)
	}
	return out
}

// docBlockExemptions are the blocks not run, each with why it cannot be.
var docBlockExemptions = map[string]string{
	"README.md: sudo apt-get install make python3 fuse3 git": "installs system packages as root on the machine running the tests (and fetches from the network)",
	"README.md: make test":       "the whole suite, this test included: it would run itself",
	"docs/testing.md: make test": "the whole suite, this test included: it would run itself",
	"docs/testing.md: go build ./... && go vet ./...": "the developer's commands of the suite itself: the last line runs this package again " +
		"(recursion), and the others are what `make test` runs anyway",
	"docs/testing.md: go test -count=1 -p 1 ./internal/fuse/mounttest":                                    "the mount behaviour suite's own tests, run by `make test` (its second line mounts eight daemons)",
	"docs/testing.md: go test -count=1 -p 1 ./internal/policy/kv/...":                                     "a package's own tests, run by `make test`",
	"docs/testing.md: go test -count=1 -p 1 -timeout 30m -run 'TestDocBlocks_|TestReadme_' ./integration": "this test itself: it would run itself",
	"docs/testing.md: bash scripts/judges/build.sh": "clones two repositories from the network and installs compilers as root (about 3 minutes); " +
		"run by hand before a POSIX change",
	"docs/testing.md: mkdir -p /tmp/judge/ws /tmp/judge/mnt": "needs the judges the build above makes (not part of the test machine); run by hand",
}

// docBlockRunners run the blocks that are run, each in its own scratch
// project with a daemon of its own.
var docBlockRunners = map[string]func(t *testing.T, b docBlock){
	"README.md: make demo": runMakeDemo,
	"README.md: sudo make install                  # /usr/local/bin/dshmount; make install PREFIX=~/.local for ~/.local/bin":      runMakeInstall,
	"README.md: dshmount serve ~/src/project /mnt/project &          # mount + control socket; prints \"ready mount=… socket=…\"": runByQuickStartTest,
	"README.md: $ dshmount read nope.go":                                                                                            runByQuickStartTest,
	"README.md: dshmount serve --state /var/lib/dsh/project ~/src/project /mnt/project &":                                           runMainVerbs,
	"README.md: $ export DSH_SESSION=$(dshmount session open --name agent)":                                                         runExecTranscript,
	"README.md: git config core.fsmonitor \"dshmount fsmonitor\"":                                                                   runFsmonitorConfig,
	"docs/branches.md: $ mkdir ~/fix-login                                         # a branch mount's directory must exist":         runBranchMountSession,
	"docs/branches.md: → {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"branch.create\",\"params\":{\"name\":\"fix-login\"}}":           runBranchSocketLoop,
	"docs/branches.md: $ dshmount edit --branch fix login.go --old 'if user == \"\" {' --new 'if user == \"\" || len(user) > 64 {'": runBranchRebaseSession,
	"docs/guard.md: $ export DSH_SESSION=$(dshmount session open --name agent)":                                                     runExecTranscript,
	"docs/operations.md: dshmount serve ~/src/project /mnt/project &          # prints \"ready mount=… socket=…\"":                  runServeUnmount,
	"docs/operations.md: # one etcd (here a single local member; use your cluster in production)":                                   runSeveralMachines,
	"docs/protocol.md: dshmount edit f.txt --old 'line 3' --new 'line 3 fixed' --merge":                                             runMergeEdit,
	"docs/watching.md: $ dshmount watch -r src":                                                                                     runWatchTranscript,
	"README.md: claude mcp add dshmount -- dshmount mcp --socket /path/to/control.sock":                                             runMCPRegistration,
	"docs/protocol.md: claude mcp add dshmount -- dshmount mcp --socket /path/to/control.sock":                                      runMCPRegistration,
	"docs/protocol.md: [mcp_servers.dshmount]":                                                                                      runCodexConfig,
	"docs/watching.md: git config core.fsmonitor \"dshmount fsmonitor\"":                                                            runFsmonitorConfig,
}

// TestDocBlocks_EachIsRunOrExempt pins the rule that every block of the
// documents is run by TestDocBlocks_Run or exempted with a reason, and that
// neither table names a block the documents no longer have.
func TestDocBlocks_EachIsRunOrExempt(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range allDocBlocks(t) {
		k := b.key()
		seen[k] = true
		_, run := docBlockRunners[k]
		reason, exempt := docBlockExemptions[k]
		assert.False(t, run && exempt, "%s: both run and exempted", k)
		assert.True(t, run || exempt, "%q (section %q) is neither run by TestDocBlocks_Run nor exempted with a reason: add it to docBlockRunners or docBlockExemptions", k, b.Section)
		if exempt {
			assert.NotEmpty(t, strings.TrimSpace(reason), "%s: an exemption gives its reason", k)
		}
	}
	for k := range docBlockRunners {
		assert.True(t, seen[k], "docBlockRunners names %q, which no document has", k)
	}
	for k := range docBlockExemptions {
		assert.True(t, seen[k], "docBlockExemptions names %q, which no document has", k)
	}
}

// TestDocBlocks_Run runs every block docBlockRunners names, as written,
// with only the paths substituted, and compares what it prints with the
// transcript the document shows.
func TestDocBlocks_Run(t *testing.T) {
	requireFUSE(t)
	blocks := allDocBlocks(t)
	n := map[string]int{} // a block's number in its file, from 1
	for _, b := range blocks {
		run, ok := docBlockRunners[b.key()]
		if !ok {
			n[b.File]++
			continue
		}
		n[b.File]++
		t.Run(fmt.Sprintf("%s_%d", strings.ReplaceAll(b.File, "/", "_"), n[b.File]), func(t *testing.T) { run(t, b) })
	}
}

// scratch is a fresh project for one block: a home directory, a workspace
// (~/src/project in the documents) and a mountpoint (/mnt/project).
type scratch struct {
	t                        *testing.T
	root, home, project, mnt string
	env                      []string
	serves                   int // daemons started, for their log names
}

// newScratch makes a scratch project holding files (relative path →
// content). Everything mounted below it is unmounted at the end.
func newScratch(t *testing.T, files map[string]string) *scratch {
	t.Helper()
	// A short root: the default socket lives below $HOME, and a Unix socket
	// address holds 107 bytes.
	root, err := os.MkdirTemp("/tmp", "docs-")
	require.NoError(t, err)
	s := &scratch{t: t, root: root, home: filepath.Join(root, "home"),
		project: filepath.Join(root, "src", "project"), mnt: filepath.Join(root, "mnt", "project")}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	for _, d := range []string{s.home, s.project, s.mnt} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for rel, content := range files {
		p := filepath.Join(s.project, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	// Before the directories go: a block that failed half-way leaves its
	// daemons serving; branch mounts first (the deepest mounts last listed).
	t.Cleanup(func() {
		for _, m := range mountsUnder(root) {
			if err := exec.Command(dshBinary, "unmount", m).Run(); err != nil {
				_ = exec.Command("umount", "-l", m).Run()
			}
		}
	})
	// Go keeps its caches below $HOME: the scratch home must not make it
	// build and download everything again.
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	require.NoError(t, err)
	g := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	require.Len(t, g, 3)
	s.env = append(os.Environ(), "HOME="+s.home, "PATH="+filepath.Dir(dshBinary)+":"+os.Getenv("PATH"),
		"DSH_SOCKET=", "DSH_SESSION=", "GOCACHE="+g[0], "GOMODCACHE="+g[1], "GOPATH="+g[2], "GOTOOLCHAIN=local", "GOFLAGS=")
	return s
}

// mountsUnder lists the mount points below dir, the last mounted first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append([]string{f[4]}, out...)
		}
	}
	return out
}

// paths substitutes the scratch project's paths for the documents' own.
func (s *scratch) paths(script string) string {
	return strings.NewReplacer(
		"~/src/project", s.project,
		"/mnt/project", s.mnt,
		"/var/lib/dsh/project", filepath.Join(s.root, "state"),
	).Replace(script)
}

// serveLine matches a `dshmount serve … &` line of a script.
var serveLine = regexp.MustCompile(`(?m)^(dshmount serve [^&#]*)&(.*)$`)

// waitForServe makes every backgrounded `dshmount serve` of script log to a
// file of its own and waits for its "ready" line, as a script must (the
// documents' `&` alone would race the next command).
func (s *scratch) waitForServe(script string) string {
	return serveLine.ReplaceAllStringFunc(script, func(line string) string {
		s.serves++
		m := serveLine.FindStringSubmatch(line)
		log := fmt.Sprintf(`"%s/serve-%d.log"`, s.home, s.serves)
		return fmt.Sprintf("%s>%s 2>&1 &%s\nfor i in $(seq 300); do grep -q ready %s && break; sleep 0.1; done\ngrep -q ready %s || { cat %s; exit 1; }",
			m[1], log, m[2], log, log, log)
	})
}

// run runs script with bash -eu in dir, stdin as its input, and returns
// what it printed (stdout and stderr together) and its error.
func (s *scratch) run(dir, script, stdin string) (string, error) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euc", script)
	cmd.Dir = dir
	cmd.Env = s.env
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustRun is run that fails the test (showing the daemons' logs) on error.
func (s *scratch) mustRun(dir, script, stdin string) string {
	s.t.Helper()
	out, err := s.run(dir, script, stdin)
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(s.home, "serve-*.log"))
		var b strings.Builder
		for _, l := range logs {
			c, _ := os.ReadFile(l)
			fmt.Fprintf(&b, "--- %s\n%s", l, c)
		}
		require.NoError(s.t, err, "script:\n%s\noutput:\n%s\nlogs:\n%s", script, out, b.String())
	}
	return out
}

// transcriptLine is one "$ command" of a transcript and the output shown
// under it.
type transcriptLine struct {
	Cmd, Want string
}

// transcript splits a transcript block into its commands and their output.
func transcript(body string) []transcriptLine {
	var out []transcriptLine
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, transcriptLine{Cmd: cmd})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].Want += line + "\n"
		}
	}
	return out
}

// comment is a shell comment at the end of a transcript's command.
var comment = regexp.MustCompile(`\s+#\s.*$`)

// variable are the parts of a transcript that differ from run to run, each
// with what it is normalised to.
var variable = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\(pid \d+\)`), "(pid N)"},
	{regexp.MustCompile(`pid=\d+`), "pid=N"},
	{regexp.MustCompile(`uid=\d+`), "uid=N"},
	{regexp.MustCompile(`at \d\d:\d\d:\d\d\.\d+`), "at HH:MM:SS.mmm"},
	{regexp.MustCompile(`s-[0-9a-f]{16}`), "s-ID"},
	{regexp.MustCompile(`(?m)^\d+ (created|modified|attrib|deleted|renamed) `), "SEQ $1 "},
}

// normalise replaces what varies between runs (pids, uids, times, session
// ids, seqs) with fixed words.
func normalise(s string) string {
	for _, v := range variable {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// runTranscript runs the commands of lines in one shell (in dir, after
// setup), each followed by its output, and returns the printed transcript
// in the document's form ("$ command" lines and what each printed).
// adapt may rewrite a command before it runs (nil: none); each command's
// failure is part of its output, not the script's.
func (s *scratch) runTranscript(dir, setup string, lines []transcriptLine, adapt func(string) string, stdin string) string {
	s.t.Helper()
	var b strings.Builder
	b.WriteString(setup + "\n")
	for i, l := range lines {
		cmd := comment.ReplaceAllString(l.Cmd, "")
		if adapt != nil {
			cmd = adapt(cmd)
		}
		fmt.Fprintf(&b, "echo '---%d---'\n%s 2>&1 || true\n", i, cmd)
	}
	out := s.mustRun(dir, b.String(), stdin)
	var got strings.Builder
	for i, l := range lines {
		marker := fmt.Sprintf("---%d---\n", i)
		j := strings.Index(out, marker)
		require.GreaterOrEqual(s.t, j, 0, "marker %d in\n%s", i, out)
		out = out[j+len(marker):]
		part := out
		if k := strings.Index(out, fmt.Sprintf("---%d---\n", i+1)); k >= 0 {
			part = out[:k]
		}
		got.WriteString("$ " + l.Cmd + "\n" + part)
	}
	return got.String()
}

// wantTranscript is the document's transcript in runTranscript's form.
func wantTranscript(lines []transcriptLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("$ " + l.Cmd + "\n" + l.Want)
	}
	return b.String()
}

// personSaves is what the transcripts' `vim FILE  # a person saves FILE`
// does: vim is interactive, so it is given the keystrokes of an appended
// line and a save on its input, and its screen is not part of the output.
func personSaves(cmd string) string {
	if f, ok := strings.CutPrefix(cmd, "vim "); ok {
		return fmt.Sprintf("printf 'Go// saved\\033:wq\\n' | vim %s >/dev/null 2>&1", f)
	}
	return cmd
}

// serveScratch starts the documents' daemon on the scratch project as the
// quick start does, with its socket found from inside the mount.
func (s *scratch) serve(extra string) {
	s.t.Helper()
	s.mustRun(s.root, s.waitForServe(s.paths("dshmount serve "+extra+"~/src/project /mnt/project &\n")), "")
}

func runByQuickStartTest(t *testing.T, b docBlock) {
	t.Skip("run by TestReadme_QuickStartRuns, with the transcript below it")
}

// runMakeDemo runs `make demo` in the repository: it builds bin/dshmount
// and runs scripts/demo.sh on a copy of examples/workspace.
func runMakeDemo(t *testing.T, b docBlock) {
	s := newScratch(t, nil)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	out := s.mustRun(repo, strings.TrimSpace(b.Body), "")
	assert.Contains(t, out, "FS_STALE_VERSION", "the demo shows a stale token refused")
}

// runMakeInstall runs the block's documented PREFIX form (the block's own
// line writes /usr/local/bin, outside any scratch directory) with ~ the
// scratch home, then the installed binary.
func runMakeInstall(t *testing.T, b docBlock) {
	s := newScratch(t, nil)
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	m := regexp.MustCompile(`make install PREFIX=~/\.local`).FindString(b.Body)
	require.NotEmpty(t, m, "the block shows the PREFIX form")
	s.mustRun(repo, m+" >/dev/null", "")
	s.mustRun(s.home, "~/.local/bin/dshmount --help >/dev/null", "")
}

// runServeUnmount runs operations.md's serve and unmount.
func runServeUnmount(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{"a.txt": "a\n"})
	s.mustRun(s.root, s.waitForServe(s.paths(b.Body)), "")
	assert.False(t, mounted(s.mnt), "unmounted when unmount returns")
	logs, _ := os.ReadFile(filepath.Join(s.home, "serve-1.log"))
	assert.Regexp(t, `ready mount=\S+ socket=\S+`, string(logs), "serve prints what the comment says")
}
