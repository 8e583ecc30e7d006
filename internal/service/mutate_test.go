package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// mutationRequest is one fs.* mutation's request, with each step of the
// checklist made to pass or fail.
type mutationRequest struct {
	branch    string
	session   policy.SessionID
	badParams bool // explicit guards that exclude each other, or no text to apply
	badPath   bool // a path with a NUL byte
}

// mutationCase is one mutating method: how to send it, and the text its
// refusal of bad params carries.
type mutationCase struct {
	name      string
	badParams string
	send      func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error
}

// pathOf is the request's path: name, or a path with a NUL byte.
func pathOf(r mutationRequest, name string) string {
	if r.badPath {
		return "bad\x00" + name
	}
	return name
}

func mutationCases() []mutationCase {
	return []mutationCase{
		{"fs.write", "exclude each other", func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error {
			p := WriteParams{Path: pathOf(r, "new.txt"), Content: "x\n", Session: r.session}
			if r.badParams {
				p.Expected, p.Unconditional = &WriteExpected{Kind: provider.CreateIfAbsent}, true
			}
			p.Branch = r.branch
			_, err := s.Write(ctx, c, p)
			return err
		}},
		{"fs.edit", "oldString must not be empty", func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error {
			p := EditParams{Path: pathOf(r, "a.txt"), OldString: "a", NewString: "b", Session: r.session}
			if r.badParams {
				p.OldString = ""
			}
			p.Branch = r.branch
			_, err := s.Edit(ctx, c, p)
			return err
		}},
		{"fs.delete", "exclude each other", func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error {
			p := DeleteParams{Path: pathOf(r, "a.txt"), Session: r.session}
			if r.badParams {
				p.Expected, p.Unconditional = &VersionExpected{Version: "v"}, true
			}
			p.Branch = r.branch
			_, err := s.Delete(ctx, c, p)
			return err
		}},
		{"fs.move", "exclude each other", func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error {
			p := MoveParams{From: pathOf(r, "a.txt"), To: "b.txt", Session: r.session}
			if r.badParams {
				p.ExpectedSource, p.Unconditional = &VersionExpected{Version: "v"}, true
			}
			p.Branch = r.branch
			_, err := s.Move(ctx, c, p)
			return err
		}},
		{"fs.patch", "no files were modified", func(ctx context.Context, s *Service, c *Caller, r mutationRequest) error {
			p := PatchParams{Patch: "*** Begin Patch\n*** Update File: " + pathOf(r, "a.txt") + "\n@@\n-a\n+b\n*** End Patch\n", Session: r.session}
			if r.badParams {
				p.Patch = "*** Begin Patch\n*** End Patch\n"
			}
			p.Branch = r.branch
			_, err := s.Patch(ctx, c, p)
			return err
		}},
	}
}

// opOf is the Op of the provider error in err ("": none).
func opOf(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Op
	}
	return ""
}

// TestMutate_OneOrderForEveryMutation pins the checklist's order for every
// fs.* mutation: the scope (a branch the caller does not own is refused
// whatever else is wrong), then the params, then the actor (a session of
// another uid), then the targets, then the engine (a file the session never
// read).
func TestMutate_OneOrderForEveryMutation(t *testing.T) {
	const me, other = 4243, 4242
	ctx := context.Background()
	s, mgr := newBranchService(t)
	_, err := mgr.CreateFor("theirs", other)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.cfg.Source, "a.txt"), []byte("a\n"), 0o644))
	c := s.NewCaller(CallerConfig{UID: me})
	theirs, err := s.SessionOpen(ctx, s.NewCaller(CallerConfig{UID: other}), SessionOpenParams{Name: "theirs"})
	require.NoError(t, err)
	foreign := theirs.Session

	for _, mc := range mutationCases() {
		rows := []struct {
			step string
			req  mutationRequest
			want func(t *testing.T, err error)
		}{
			{"the scope, before anything else", mutationRequest{branch: "theirs", session: foreign, badParams: true, badPath: true},
				func(t *testing.T, err error) {
					assert.Equal(t, provider.CodePermissionDenied, provider.CodeOf(err), "err: %v", err)
					assert.Equal(t, "branch", opOf(err), "err: %v", err)
				}},
			{"the scope alone", mutationRequest{branch: "theirs"},
				func(t *testing.T, err error) {
					assert.Equal(t, provider.CodePermissionDenied, provider.CodeOf(err), "err: %v", err)
					assert.Equal(t, "branch", opOf(err), "err: %v", err)
				}},
			{"then the params", mutationRequest{session: foreign, badParams: true, badPath: true},
				func(t *testing.T, err error) { assert.ErrorContains(t, err, mc.badParams) }},
			{"then the actor", mutationRequest{session: foreign, badPath: true},
				func(t *testing.T, err error) {
					assert.Equal(t, provider.CodePermissionDenied, provider.CodeOf(err), "err: %v", err)
					assert.Equal(t, "session", opOf(err), "err: %v", err)
				}},
			{"then the targets", mutationRequest{badPath: true},
				func(t *testing.T, err error) { assert.ErrorContains(t, err, "NUL") }},
		}
		for _, row := range rows {
			t.Run(mc.name+"/"+row.step, func(t *testing.T) {
				err := mc.send(ctx, s, c, row.req)
				require.Error(t, err)
				row.want(t, err)
			})
		}
		if mc.name != "fs.write" { // a write of a new file needs no read
			t.Run(mc.name+"/then the engine", func(t *testing.T) {
				err := mc.send(ctx, s, c, mutationRequest{})
				assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err), "err: %v", err)
			})
		}
	}
}
