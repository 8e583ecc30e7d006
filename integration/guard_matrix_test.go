package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// guardState is what the bound session knows of a file when it acts.
type guardState string

const (
	stUnseen      guardState = "unseen"       // never read
	stFresh       guardState = "fresh"        // read, unchanged since
	stStalePerson guardState = "stale-person" // read, then a person wrote through the mount
	stStaleSocket guardState = "stale-socket" // read, then another session wrote over the socket
	stStaleOOB    guardState = "stale-oob"    // read, then a program wrote the workspace directory
)

var guardStates = []guardState{stUnseen, stFresh, stStalePerson, stStaleSocket, stStaleOOB}

// makeStale changes rel the way state says, as someone other than g, and
// returns the bytes rel then holds.
func makeStale(t *testing.T, d *daemon, state guardState, rel string) string {
	t.Helper()
	switch state {
	case stStalePerson:
		require.NoError(t, os.WriteFile(d.m(rel), []byte("PERSON-"+rel), 0o644))
		return "PERSON-" + rel
	case stStaleSocket:
		ctx := testCtx(t)
		other, err := d.Client.OpenSession(ctx, "other-agent")
		require.NoError(t, err)
		_, err = d.Client.Read(ctx, control.ReadParams{Path: rel, Session: other})
		require.NoError(t, err)
		_, err = d.Client.Write(ctx, control.WriteParams{Path: rel, Content: "SOCKET-" + rel, Session: other})
		require.NoError(t, err)
		return "SOCKET-" + rel
	case stStaleOOB:
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, rel), []byte("OOB-"+rel), 0o644))
		return "OOB-" + rel
	}
	return ""
}

// expectedErrno is the guard's answer to a bound change in state.
func expectedErrno(state guardState) syscall.Errno {
	switch state {
	case stUnseen:
		return syscall.EACCES
	case stFresh:
		return 0
	}
	return syscall.ESTALE
}

// backingBytes reads rel in the workspace directory ("" when absent).
func backingBytes(t *testing.T, d *daemon, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.Src, rel))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// TestGuardMatrix_PathOperations runs every name-based operation that
// changes or removes an existing file's bytes, bound to a session, on a
// file in each state, and checks the errno and the bytes afterwards.
func TestGuardMatrix_PathOperations(t *testing.T) {
	type op struct {
		name string
		// run performs the operation on rel; aux is a file the session
		// created itself (for the other side of a rename).
		run func(g *guardOps, rel, aux string) syscall.Errno
		// after is what rel holds when the operation succeeded.
		after string
	}
	ops := []op{
		{"open-write", func(g *guardOps, rel, _ string) syscall.Errno { return g.do("write", rel) }, "BOUND"},
		{"open-trunc", func(g *guardOps, rel, _ string) syscall.Errno { return g.do("trunc", rel) }, ""},
		{"truncate", func(g *guardOps, rel, _ string) syscall.Errno { return g.do("truncate", rel) }, "O"},
		{"unlink", func(g *guardOps, rel, _ string) syscall.Errno { return g.do("unlink", rel) }, ""},
		{"rename-source", func(g *guardOps, rel, _ string) syscall.Errno { return g.do("rename", rel, rel+".moved") }, ""},
		{"rename-over", func(g *guardOps, rel, aux string) syscall.Errno { return g.do("rename", aux, rel) }, "BOUND"},
		{"exchange", func(g *guardOps, rel, aux string) syscall.Errno { return g.do("exchange", aux, rel) }, "BOUND"},
	}
	d := startDaemon(t, daemonOptions{})
	g := startGuardOps(t, d)
	for _, o := range ops {
		for _, state := range guardStates {
			t.Run(o.name+"/"+string(state), func(t *testing.T) {
				rel := fmt.Sprintf("m-%s-%s", o.name, state)
				aux := rel + ".aux"
				original := "ORIGINAL-" + rel
				require.NoError(t, os.WriteFile(filepath.Join(d.Src, rel), []byte(original), 0o644))
				require.Equal(t, syscall.Errno(0), g.do("write", aux), "the session creates its own file")
				if state != stUnseen {
					require.Equal(t, syscall.Errno(0), g.do("read", rel))
				}
				holds := original
				if other := makeStale(t, d, state, rel); other != "" {
					holds = other
				}

				got := o.run(g, rel, aux)
				want := expectedErrno(state)
				assert.Equal(t, want, got, "errno: want %v, got %v", want, got)
				if want != 0 {
					assert.Equal(t, holds, backingBytes(t, d, rel), "a refused change leaves the bytes")
					return
				}
				assert.Equal(t, o.after, backingBytes(t, d, rel))
			})
		}
	}
}

// TestGuardMatrix_DescriptorOperations opens a file while fresh, lets
// someone else change it, then tries every way of changing bytes through
// the open descriptor: each is refused (ESTALE; a shared mmap store is
// refused when it is written back), and the other writer's bytes stay.
// With the file unchanged, every operation succeeds.
func TestGuardMatrix_DescriptorOperations(t *testing.T) {
	type op struct {
		name  string
		after func(original string) string // the bytes after a success
	}
	ops := []op{
		{"pwrite", func(o string) string { return "BOUND" + o[5:] }},
		{"ftruncate", func(o string) string { return o[:2] }},
		{"punch", func(o string) string { return strings.Repeat("\x00", len(o)) }},
		{"copy", func(o string) string { return "COPY!" + o[5:] }},
		{"mmap", func(o string) string { return "MMAP!" + o[5:] }},
	}
	d := startDaemon(t, daemonOptions{})
	g := startGuardOps(t, d)
	for _, o := range ops {
		for _, state := range guardStates[1:] { // an unseen file cannot be opened for writing
			t.Run(o.name+"/"+string(state), func(t *testing.T) {
				rel := fmt.Sprintf("fd-%s-%s", o.name, state)
				original := "ORIGINAL-" + rel
				require.NoError(t, os.WriteFile(filepath.Join(d.Src, rel), []byte(original), 0o644))
				require.Equal(t, syscall.Errno(0), g.do("read", rel))
				require.Equal(t, syscall.Errno(0), g.do("open", rel))
				defer g.do("close", rel)
				other := makeStale(t, d, state, rel)

				got := g.do(o.name, rel)
				if state == stFresh {
					assert.Equal(t, syscall.Errno(0), got)
					assert.Equal(t, o.after(original), backingBytes(t, d, rel))
					return
				}
				if o.name == "mmap" {
					assert.NotEqual(t, syscall.Errno(0), got, "the mapped store must not be written back")
				} else {
					assert.Equal(t, syscall.ESTALE, got)
				}
				assert.Equal(t, other, backingBytes(t, d, rel), "the other writer's bytes stay")
			})
		}
	}
}
