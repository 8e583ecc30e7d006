package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// The runners of the documents' blocks (docBlockRunners): each sets up
// the scratch project the block's text assumes, runs the block and checks
// what it printed against what the document shows.

// shCommands returns the commands of a transcript block without their
// "$ " prompts and trailing comments, one a line.
func shCommands(body string) string {
	var b strings.Builder
	for _, l := range transcript(body) {
		b.WriteString(comment.ReplaceAllString(l.Cmd, "") + "\n")
	}
	return b.String()
}

// freeAddr returns a TCP address on 127.0.0.1 nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// runMainVerbs runs the README's "one example each" block as one sequence
// from the workspace directory, on a Go module holding the files it names.
// `watch` streams until interrupted: it runs for 2 s (timeout's 124 is its
// expected end).
func runMainVerbs(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{
		"go.mod":       "module example.com/project\n\ngo 1.21\n",
		"main.go":      "package main\n\nfunc foo() {}\n\nfunc main() {}\n",
		"old.go":       "package main\n",
		"tmp.txt":      "scratch\n",
		"src/a.txt":    "a\n",
		"change.patch": "*** Begin Patch\n*** Add File: src/b.txt\n+b\n*** End Patch\n",
	})
	script := s.paths(b.Body)
	script = regexp.MustCompile(`(?m)^(dshmount watch [^#]*?)\s*(#.*)?$`).ReplaceAllString(script, "timeout 2 $1 || test $$? -eq 124")
	out := s.mustRun(s.project, s.waitForServe(script), "")
	t.Log(out)
	got, err := os.ReadFile(filepath.Join(s.project, "main.go"))
	require.NoError(t, err)
	assert.Contains(t, string(got), "func bar()", "the edit landed")
	assert.FileExists(t, filepath.Join(s.project, "src", "b.txt"), "the patch landed")
	assert.FileExists(t, filepath.Join(s.project, "util.go"), "mv moved old.go")
	assert.NoFileExists(t, filepath.Join(s.project, "tmp.txt"), "rm removed tmp.txt")
	assert.False(t, mounted(s.mnt), "unmounted")
}

// runExecTranscript runs the transcript of `exec` refusing a tool's write
// (README's main verbs, guard.md's refusals) inside the mount's src/, a
// person's vim save included, and compares what it prints.
func runExecTranscript(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{"src/main.go": "package main\n", "src/util.go": "package main\n"})
	s.serve("")
	lines := transcript(b.Body)
	got := s.runTranscript(filepath.Join(s.mnt, "src"), "", lines, personSaves, "")
	assert.Equal(t, normalise(wantTranscript(lines)), normalise(got), "the transcript is what the commands print")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// runFsmonitorConfig runs the fsmonitor configuration in a repository on
// the mount; git status then works, and the hook answers with a token.
func runFsmonitorConfig(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{"a.txt": "a\n"})
	s.serve("")
	s.mustRun(s.mnt, "git init -q && git add a.txt && git -c user.name=t -c user.email=t@t commit -qm a", "")
	s.mustRun(s.mnt, b.Body, "")
	out := s.mustRun(s.mnt, "echo b > b.txt && git status --porcelain", "")
	assert.Equal(t, "?? b.txt\n", out, "git status on the mount with the hook")
	out = s.mustRun(s.mnt, `dshmount fsmonitor 2 "" | tr '\0' '\n'`, "")
	assert.Regexp(t, `^dsh:`, out, "the hook answers with a token")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// branchLoginGo is a scratch auth/login.go with the line branches.md edits.
const branchLoginGo = "package auth\n\nfunc valid(ok bool) bool {\n\tif !ok {\n\t\treturn false\n\t}\n\treturn true\n}\n"

// runBranchMountSession runs branches.md's branch mount session from the
// workspace mount: vim in the branch mount gets the keystrokes of the edit
// the go test below checks.
func runBranchMountSession(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{
		"go.mod":             "module example.com/project\n\ngo 1.21\n",
		"auth/login.go":      branchLoginGo,
		"auth/login_test.go": "package auth\n\nimport \"testing\"\n\nfunc TestValid(t *testing.T) {\n\tif valid(true) {\n\t\tt.Fatal(\"valid(true)\")\n\t}\n}\n",
	})
	s.serve("")
	out := s.mustRun(s.mnt, shCommands(b.Body), ":%s/!ok/ok/\n:wq\n")
	t.Log(out)
	got, err := os.ReadFile(filepath.Join(s.project, "auth", "login.go"))
	require.NoError(t, err)
	assert.Contains(t, string(got), "\tif ok {\n", "the branch's edit is committed")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// runBranchSocketLoop sends branches.md's agent loop to the socket, one
// line each; between the edit and the commit a person changes the file in
// the workspace, as the refused commit shown says. Each response the
// document shows must match ("…" stands for any text within one JSON
// string; the session id the
// daemon returns replaces "s-…" in later requests).
func runBranchSocketLoop(t *testing.T, b docBlock) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"auth/login.go": branchLoginGo}})
	type step struct{ send, want string }
	var steps []step
	for _, l := range strings.Split(strings.TrimRight(b.Body, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "→ "):
			steps = append(steps, step{send: strings.TrimPrefix(l, "→ ")})
		case strings.HasPrefix(l, "← "):
			require.NotEmpty(t, steps)
			steps[len(steps)-1].want = strings.TrimPrefix(l, "← ")
		case strings.HasPrefix(l, " "):
			require.NotEmpty(t, steps)
			steps[len(steps)-1].want += strings.TrimSpace(l)
		default:
			t.Fatalf("a line of the loop is neither → nor ←: %q", l)
		}
	}
	conn, err := net.Dial("unix", d.Socket)
	require.NoError(t, err)
	defer conn.Close()
	r := bufio.NewReader(conn)
	session := ""
	for _, st := range steps {
		send := st.send
		if session != "" {
			send = strings.ReplaceAll(send, `"s-…"`, `"`+session+`"`)
		}
		if strings.Contains(send, `"branch.commit"`) {
			// the workspace changes the file the branch changed
			f, err := os.OpenFile(d.m("auth/login.go"), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("// reviewed\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
		_, err := conn.Write([]byte(send + "\n"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		got = strings.TrimSuffix(got, "\n")
		if m := regexp.MustCompile(`"session":"(s-[0-9a-f]+)"`).FindStringSubmatch(got); m != nil && session == "" {
			session = m[1]
		}
		if st.want == "" {
			assert.NotContains(t, got, `"error"`, "%s", send)
			continue
		}
		t.Logf("← %s", got)
		pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(st.want), "…", `[^"]*`) + "$"
		assert.Regexp(t, pattern, got, "the response shown for %s", send)
	}
}

// runBranchRebaseSession runs branches.md's rebase session on a login.go
// shaped as its conflict shows. What the document says it leaves out runs
// here: the sessions ($DSH_SESSION, $OTHER), the branches, and a read
// before each edit (its output, and the edits', discarded).
func runBranchRebaseSession(t *testing.T, b docBlock) {
	const login = "package auth\n\nimport \"fmt\"\n\nvar errBadUser = fmt.Errorf(\"bad user\")\n\nvar errRefused = fmt.Errorf(\"refused\")\n\n" +
		"// login refuses an invalid user.\nfunc login(user string) error {\n\tif !valid(user) {\n\t\treturn errBadUser\n\t}\n\treturn nil\n}\n\n" +
		"func valid(user string) bool {\n\tif user == \"\" {\n\t\treturn false\n\t}\n\treturn true\n}\n"
	s := newScratch(t, map[string]string{"login.go": login})
	s.serve("")
	setup := `export DSH_SESSION=$(dshmount session open --name agent)
OTHER=$(dshmount session open --name other)
dshmount branch create fix >/dev/null
dshmount branch create wrap >/dev/null`
	readFirst := func(cmd string) string {
		before, _, ok := strings.Cut(cmd, " --old ")
		if !ok || !strings.HasPrefix(cmd, "dshmount edit ") {
			return cmd
		}
		read := strings.Replace(before, "dshmount edit", "dshmount read", 1)
		return read + " >/dev/null && " + cmd + " >/dev/null"
	}
	lines := transcript(b.Body)
	got := s.runTranscript(s.mnt, setup, lines, readFirst, "")
	assert.Equal(t, normalise(wantTranscript(lines)), normalise(got), "the transcript is what the commands print")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// runSeveralMachines runs operations.md's etcd and two hosts on this one:
// etcd on free ports (its peer port too, beside any etcd of the machine)
// with a scratch data directory; each host is a home directory of its own
// (so `~/ws` differs) and host B sees the workspace by a bind mount at
// the path it names. A session opened through host A is then used through
// host B.
func runSeveralMachines(t *testing.T, b docBlock) {
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Skip("no etcd on PATH (apt-get install etcd-server)")
	}
	s := newScratch(t, map[string]string{"a.txt": "a\n"})
	client, peer := freeAddr(t), freeAddr(t)
	homeA, homeB := filepath.Join(s.root, "hostA"), filepath.Join(s.root, "hostB")
	nfs := filepath.Join(s.root, "nfs", "ws")
	for _, d := range []string{homeA, homeB, nfs} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, exec.Command("mount", "--bind", s.project, nfs).Run())
	script := strings.ReplaceAll(b.Body, "\\\n", "")
	var run strings.Builder
	etcdPid := filepath.Join(s.root, "etcd.pid")
	t.Cleanup(func() {
		if pid, err := os.ReadFile(etcdPid); err == nil {
			_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
		}
	})
	for _, line := range strings.Split(script, "\n") {
		code := strings.TrimSpace(comment.ReplaceAllString(line, ""))
		switch {
		case code == "" || strings.HasPrefix(code, "#"):
		case strings.HasPrefix(code, "apt-get install etcd-server"):
			run.WriteString("command -v etcd >/dev/null\n") // installed already (checked above)
		case strings.HasPrefix(code, "etcd "):
			code = strings.NewReplacer("/var/lib/dsh-etcd", filepath.Join(s.root, "etcd"), "127.0.0.1:2379", client).Replace(code)
			fmt.Fprintf(&run, "%s --listen-peer-urls http://%s --initial-advertise-peer-urls http://%s --initial-cluster default=http://%s >%s/etcd.log 2>&1 &\necho $! >%s\n",
				code, peer, peer, peer, s.root, etcdPid)
			fmt.Fprintf(&run, "for i in $(seq 300); do (echo >/dev/tcp/%s) 2>/dev/null && break; sleep 0.1; done\n", strings.Replace(client, ":", "/", 1))
		case code == "mkdir -p ~/ws":
			fmt.Fprintf(&run, "(HOME=%s; mkdir -p ~/ws)\n(HOME=%s; mkdir -p ~/ws)\n", homeA, homeB)
		case strings.HasPrefix(code, "dshmount serve "):
			// ~ expands with the host's HOME (the daemon's default state
			// directory is below it too)
			home := homeA
			if strings.HasSuffix(strings.TrimSpace(line), "host B") {
				home = homeB
			}
			code = strings.NewReplacer("10.0.0.5:2379", client, "/mnt/shared/ws", s.project, "/nfs/ws", nfs).Replace(code)
			fmt.Fprintf(&run, "export HOME=%s\n%s\n", home, s.waitForServe(code+" &\n"))
		default:
			t.Fatalf("a line of the block this runner does not know: %q", line)
		}
	}
	out := s.mustRun(s.root, run.String(), "")
	t.Log(out)
	s.mustRun(s.root, fmt.Sprintf(`cd %[1]s/ws && S=$(dshmount session open --name agent) && dshmount read a.txt --session "$S" >/dev/null
cd %[2]s/ws && dshmount edit a.txt --session "$S" --old a --new b >/dev/null
cd / && HOME=%[2]s dshmount unmount %[2]s/ws && HOME=%[1]s dshmount unmount %[1]s/ws`, homeA, homeB), "")
	got, err := os.ReadFile(filepath.Join(s.project, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "b\n", string(got), "read through host A, edited through host B in one session")
}

// runMergeEdit runs protocol.md's merged edit: the session read f.txt, a
// person then changed its first line through the mount, and the edit of
// line 3 merges over that change.
func runMergeEdit(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{"f.txt": "line 1\nline 2\nline 3\nline 4\nline 5\n"})
	s.serve("")
	s.mustRun(s.mnt, `export DSH_SESSION=$(dshmount session open --name agent)
dshmount read f.txt >/dev/null
sed -i 's/line 1/line one/' f.txt
`+b.Body, "")
	got, err := os.ReadFile(filepath.Join(s.project, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line one\nline 2\nline 3 fixed\nline 4\nline 5\n", string(got), "the edit merged over the person's change")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// runWatchTranscript runs watching.md's feed: `watch -r src` in the
// background while the changes its lines name are made (by the socket in
// session "agent", by an unbound shell on the mount, and in the workspace
// directory itself), then interrupted (the ^C is the terminal's echo);
// `--since` is given the last seq printed and runs 2 s.
func runWatchTranscript(t *testing.T, b docBlock) {
	s := newScratch(t, map[string]string{"src/main.go": "package main\n", "src/run.sh": "echo hi\n",
		"src/old.go": "package main\n", "src/tmp.txt": "x\n"})
	s.serve("")
	lines := transcript(b.Body)
	require.Len(t, lines, 2, "a live watch and a later --since")
	want := strings.ReplaceAll(lines[0].Want, "^C\n", "")
	out := s.mustRun(s.mnt, fmt.Sprintf(`%s >%[2]s/watch.out 2>&1 &
w=$!
sleep 1
export DSH_SESSION=$(dshmount session open --name agent)
echo 'package new' | dshmount write src/new/util.go >/dev/null
sleep 0.2; echo '// more' >> src/main.go
sleep 0.2; chmod +x src/run.sh
sleep 0.2; mv %[3]s/src/old.go %[3]s/src/legacy.go
sleep 0.2; rm %[3]s/src/tmp.txt
sleep 1; kill -INT $w; wait $w || true
cat %[2]s/watch.out`, lines[0].Cmd, s.root, s.project), "")
	assert.Equal(t, normalise(want), normalise(out), "what `%s` prints", lines[0].Cmd)
	last := regexp.MustCompile(`(?m)^(\d+) `).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, last)
	since := regexp.MustCompile(`--since \d+`).ReplaceAllString(comment.ReplaceAllString(lines[1].Cmd, ""), "--since "+last[len(last)-1][1])
	out2 := s.mustRun(s.mnt, "timeout 2 "+since+" || test $? -eq 124", "")
	assert.Equal(t, lines[1].Want, out2, "nothing happened since the last seq")
	s.mustRun(s.root, s.paths("dshmount unmount /mnt/project"), "")
}

// mcpTools starts the MCP server command line args (the document's
// socket path replaced by d's), initializes an MCP session over its stdio
// and returns the names of the tools it lists.
func mcpTools(t *testing.T, d *daemon, args []string) []string {
	t.Helper()
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "/path/to/control.sock", d.Socket)
	}
	require.Equal(t, "dshmount", args[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshBinary, args[1:]...)
	cmd.Dir = "/"
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	for _, req := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"docs","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		_, err := stdin.Write([]byte(req + "\n"))
		require.NoError(t, err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var resp struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &resp) != nil || resp.ID != 2 {
			continue
		}
		var names []string
		for _, tool := range resp.Result.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	t.Fatalf("no tools/list answer from %q: %v\n%s", args, sc.Err(), stderr.String())
	return nil
}

// mcpDocTools are the tools the documents say `dshmount mcp` serves.
var mcpDocTools = []string{"read", "write", "edit", "apply_patch", "move", "delete", "list", "stat"}

// runMCPRegistration runs the command a `claude mcp add` line registers
// (the part after "--"; Claude Code itself is not installed where the
// tests run) with a daemon's socket, and checks the tools it serves.
func runMCPRegistration(t *testing.T, b docBlock) {
	d := startDaemon(t, daemonOptions{})
	_, registered, ok := strings.Cut(strings.TrimSpace(b.Body), " -- ")
	require.True(t, ok, "the block registers a command after --")
	tools := mcpTools(t, d, strings.Fields(registered))
	assert.Subset(t, tools, mcpDocTools, "the tools the documents name")
}

// runCodexConfig runs the command and args of the Codex configuration
// (socket path replaced) and checks the tools it serves.
func runCodexConfig(t *testing.T, b docBlock) {
	d := startDaemon(t, daemonOptions{})
	command := regexp.MustCompile(`(?m)^command = "([^"]+)"$`).FindStringSubmatch(b.Body)
	argsLine := regexp.MustCompile(`(?m)^args = (\[.*\])$`).FindStringSubmatch(b.Body)
	require.NotNil(t, command, "the table has a command")
	require.NotNil(t, argsLine, "the table has args")
	var args []string
	require.NoError(t, json.Unmarshal([]byte(argsLine[1]), &args), "args is an array of strings")
	tools := mcpTools(t, d, append([]string{command[1]}, args...))
	assert.Subset(t, tools, mcpDocTools, "the tools the documents name")
}
