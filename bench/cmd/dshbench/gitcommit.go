package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dshmount/dshmount/control"
)

// The git commit rows: `git add -A && git commit` on a fresh repository of
// gitBenchFiles files, then again after gitBenchChanged of them changed, and
// the same change and commit in a repository a person created and committed
// before the session opened (an agent's usual start), natively, on the mount unbound, on the mount bound to one session (a
// repository's git directory is git's own: recorded, not guarded) and bound
// with serve --guard-git (the git directory under the guard like any other
// file, the rule before git's own directory was exempted).

// Workload sizes of the git commit rows.
const (
	gitBenchDirs    = 20
	gitBenchPerDir  = 100
	gitBenchFiles   = gitBenchDirs * gitBenchPerDir
	gitBenchChanged = 2 * gitBenchPerDir // the files of d00 and d01
	gitBenchBytes   = 4096
)

// gitVariant is one column of the git commit table.
type gitVariant struct {
	name, label  string
	mount, bound bool
	serve        []string
}

var gitVariants = []gitVariant{
	{name: "native", label: "native disk"},
	{name: "unbound", label: "mount, unbound", mount: true},
	{name: "bound", label: "mount, bound", mount: true, bound: true},
	{name: "bound_guard_git", label: "bound, --guard-git", mount: true, bound: true, serve: []string{"--guard-git"}},
}

// The two timed steps of every repetition.
const (
	gitStepInitial  = "git_commit_initial"
	gitStepFollowup = "git_commit_followup"
	gitStepExisting = "git_commit_existing"
)

// gitRefused is the suffix of a step's metric that records a refusal (the
// step failed under the guard).
const gitRefused = "_refused"

// runGitCommit measures the git commit rows into res.Targets["gitcommit"].
func runGitCommit(c *runConfig, base string, res *Results) error {
	r := &Report{Target: "gitcommit", Dir: base}
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+mkdir(base, "gc-home"),
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	for _, v := range gitVariants {
		logf("git commit: %s", v.label)
		if err := gitCommitVariant(c, base, env, v, r); err != nil {
			return fmt.Errorf("git commit, %s: %w", v.label, err)
		}
	}
	r.note(fmt.Sprintf("git commit: `git init && git add -A && git commit` of %d files of %d bytes in %d directories (initial), "+
		"then `git add -A && git commit` after appending a line to %d of them (follow-up), and that change and commit in a repository "+
		"a person created and committed before the session opened (existing); a fresh repository each of %d repetitions; "+
		"bound rows run under `dshmount exec --session` of one session opened after the files and the person's repository were written",
		gitBenchFiles, gitBenchBytes, gitBenchDirs, gitBenchChanged, c.Reps))
	r.finish()
	res.Targets["gitcommit"] = r
	return nil
}

// gitCommitVariant runs c.Reps repetitions of both steps on one variant.
func gitCommitVariant(c *runConfig, base string, env []string, v gitVariant, r *Report) error {
	work := mkdir(base, "gc-"+v.name)
	wrap := func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	state := ""
	if v.mount {
		d, src, st, err := startServe(c, base, "gc-"+v.name, nil, v.serve...)
		if err != nil {
			return err
		}
		defer func() {
			d.stop()
			_ = os.RemoveAll(src) // the next variant starts on a quiet disk
		}()
		work, state = filepath.Join(base, "gc-"+v.name+"-mnt"), st
	}
	// The files are written first (through the mount, by nobody's
	// session): the tree is an agent's starting point, a checked-out
	// project, and the bound session opens after it.
	for rep := range c.Reps {
		if err := writeGitTree(filepath.Join(work, "r"+strconv.Itoa(rep))); err != nil {
			return err
		}
		existing := filepath.Join(work, "p"+strconv.Itoa(rep))
		if err := writeGitTree(existing); err != nil {
			return err
		}
		cmd := exec.Command("sh", "-c", gitInitScript)
		cmd.Dir, cmd.Env = existing, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("the person's repository %s: %w: %s", existing, err, strings.TrimSpace(string(out)))
		}
	}
	if v.bound {
		cl, err := control.Dial(socketPath(state))
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		session, err := cl.OpenSession(context.Background(), "bench-git")
		cl.Close()
		if err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		wrap = func(args ...string) *exec.Cmd {
			return exec.Command(c.Dshmount, append([]string{"exec", "--socket", socketPath(state), "--session", string(session), "--"}, args...)...)
		}
	}
	for rep := range c.Reps {
		name := "r" + strconv.Itoa(rep)
		for _, step := range []struct{ metric, dir, script string }{
			{gitStepInitial, name, gitInitScript},
			{gitStepFollowup, name, gitChangeScript},
			{gitStepExisting, "p" + strconv.Itoa(rep), gitChangeScript},
		} {
			cmd := wrap("sh", "-c", step.script)
			cmd.Dir, cmd.Env = filepath.Join(work, step.dir), env
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				if !v.bound {
					return fmt.Errorf("%s in %s: %w: %s", step.script, cmd.Dir, err, strings.TrimSpace(string(out)))
				}
				if _, noted := r.get(step.metric + "_" + v.name + gitRefused); !noted {
					r.note(fmt.Sprintf("%s, %s: refused: %s", v.label, step.metric, lastLine(string(out))))
				}
				r.add(step.metric+"_"+v.name+gitRefused, "runs", false, 1)
				continue
			}
			r.add(step.metric+"_"+v.name, "s", false, time.Since(start).Seconds())
		}
	}
	return nil
}

// The scripts of the steps: a new repository and its first commit; a line
// appended to the gitBenchChanged files of d00 and d01, then a commit.
const (
	gitInitScript   = "git init -q && git config gc.auto 0 && git add -A && git commit -q -m initial"
	gitChangeScript = "for f in d00/* d01/*; do echo change >> \"$f\"; done && git add -A && git commit -q -m change"
)

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// writeGitTree writes the repository's files below dir.
func writeGitTree(dir string) error {
	data := []byte(strings.Repeat("package bench // a line of source\n", gitBenchBytes/34+1)[:gitBenchBytes])
	for i := range gitBenchFiles {
		d := filepath.Join(dir, fmt.Sprintf("d%02d", i/gitBenchPerDir))
		if i%gitBenchPerDir == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("git tree: %w", err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%04d.go", i)), data, 0o644); err != nil {
			return fmt.Errorf("git tree: %w", err)
		}
	}
	return nil
}

// printGitCommit prints the git commit table: each step's median per
// variant, and the bound rows against the unbound mount.
func printGitCommit(w io.Writer, r *Report) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\ngit add -A && git commit, %d files\n", gitBenchFiles)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "step\tunit\t"
	for _, v := range gitVariants {
		head += v.label + "\t"
	}
	fmt.Fprintln(tw, head+"bound/unbound\t--guard-git/unbound\t")
	for _, step := range []string{gitStepInitial, gitStepFollowup, gitStepExisting} {
		line := step + "\ts\t"
		for _, v := range gitVariants {
			if _, refused := r.get(step + "_" + v.name + gitRefused); refused {
				line += "refused\t"
				continue
			}
			line += num(med(r, step+"_"+v.name)) + "\t"
		}
		unb := med(r, step+"_unbound")
		line += ratio(med(r, step+"_bound"), unb) + "\t" + ratio(med(r, step+"_bound_guard_git"), unb) + "\t"
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note (gitcommit): %s\n", n)
	}
}
