package local

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// A target is resolved (its links expanded) and judged by the view before
// the provider opens it. A symbolic link swapped in afterwards, in place of
// the target's directory or of the target itself, must not be followed: the
// call is FS_SANDBOX_DENIED and the file behind the link (in the tests,
// other/, standing for a hidden or read-only directory) is neither read nor
// changed. (issue 14, case 8)

// swapForLink replaces rel by a symbolic link to linkTarget, keeping the
// original entry as rel+".orig".
func swapForLink(t *testing.T, root, rel, linkTarget string) {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.Rename(p, p+".orig"))
	require.NoError(t, os.Symlink(linkTarget, p))
}

// otherTree lists other/ with contents, to check nothing there changed.
func otherTree(t *testing.T, root string) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "other"))
	require.NoError(t, err)
	var lines []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(root, "other", e.Name()))
		require.NoError(t, err)
		lines = append(lines, e.Name()+"="+string(b))
	}
	sort.Strings(lines)
	return strings.Join(lines, ";")
}

func TestResolvedTarget_ALinkSwappedInIsNeverFollowed(t *testing.T) {
	ctx := context.Background()
	ops := []struct {
		name  string
		dir   bool // the op's target is the directory d, not d/key
		reads bool // the op reads or stats the target, changing nothing
		call  func(fs *FS, tg provider.Target) error
	}{
		{"stat", false, true, func(fs *FS, tg provider.Target) error { _, err := fs.Stat(ctx, tg); return err }},
		{"read text", false, true, func(fs *FS, tg provider.Target) error { _, err := fs.ReadText(ctx, tg); return err }},
		{"read bytes", false, true, func(fs *FS, tg provider.Target) error { _, err := fs.ReadBytes(ctx, tg, 1<<20); return err }},
		{"read byte range", false, true, func(fs *FS, tg provider.Target) error {
			_, err := fs.ReadByteRange(ctx, tg, provider.ByteRange{Length: 64})
			return err
		}},
		{"stream text", false, true, func(fs *FS, tg provider.Target) error {
			seq, err := fs.StreamText(ctx, tg)
			if err != nil {
				return err
			}
			for _, err := range seq {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"write", false, false, func(fs *FS, tg provider.Target) error {
			_, err := fs.WriteText(ctx, tg, "planted\n", nil)
			return err
		}},
		{"edit", false, false, func(fs *FS, tg provider.Target) error {
			_, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: "key", NewString: "planted"}, nil)
			return err
		}},
		{"delete", false, false, func(fs *FS, tg provider.Target) error { _, err := fs.DeleteFile(ctx, tg, nil); return err }},
		{"move away", false, false, func(fs *FS, tg provider.Target) error {
			_, err := fs.MoveFile(ctx, tg, fs.TargetForRel("taken"), provider.MoveOptions{})
			return err
		}},
		{"move over", false, false, func(fs *FS, tg provider.Target) error {
			_, err := fs.MoveFile(ctx, fs.TargetForRel("given"), tg, provider.MoveOptions{})
			return err
		}},
		{"list", true, true, func(fs *FS, tg provider.Target) error { _, err := fs.ListDir(ctx, tg); return err }},
	}
	swaps := []struct {
		name    string
		swapped string // the entry exchanged for a link
		link    string // where the link points
	}{
		{"directory", "d", "other"},
		{"file", "d/key", "../other/key"},
	}
	for _, sw := range swaps {
		for _, op := range ops {
			if op.dir && sw.swapped != "d" {
				continue
			}
			t.Run(sw.name+"/"+op.name, func(t *testing.T) {
				fs, root := newTestFS(t, Options{})
				put(t, root, "d/key", "visible key\n")
				put(t, root, "other/key", "other key\n")
				put(t, root, "given", "given\n")
				rel := "d/key"
				if op.dir {
					rel = "d"
				}
				tg := target(t, fs, rel)
				require.Equal(t, rel, tg.DisplayPath)
				before := otherTree(t, root)

				swapForLink(t, root, sw.swapped, sw.link)
				err := op.call(fs, tg)
				require.Error(t, err)
				want := []provider.Code{provider.CodeSandboxDenied}
				if sw.swapped == "d/key" && !op.reads {
					// A mutation looks at the entry itself, never through
					// it, and finds a link where a file was.
					want = append(want, provider.CodeNotRegularFile)
				}
				assert.Contains(t, want, provider.CodeOf(err), "%v", err)
				assert.NotEmpty(t, provider.MessageOf(err))
				assert.NotContains(t, err.Error(), "other key")
				assert.Equal(t, before, otherTree(t, root), "the file behind the link changed")
				_, err = os.Lstat(filepath.Join(root, "taken"))
				assert.ErrorIs(t, err, os.ErrNotExist, "nothing was moved out from behind the link")
				assert.Equal(t, "given\n", get(t, root, "given"))
			})
		}
	}
}

// TestResolve_ADirectorySwappedForALinkMidWalkIsNotLookedThrough swaps a
// directory the resolver has just entered for a link to a directory
// outside the workspace, where the next component is a regular file: the
// resolver goes on in the directory it entered (which has no such file),
// and never reports what lies behind the link.
func TestResolve_ADirectorySwappedForALinkMidWalkIsNotLookedThrough(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/keep", "inside\n")
	outside := filepath.Join(filepath.Dir(root), "outside")
	put(t, outside, "sub", "outside file\n")
	swapped := false
	fs.hooks.walked = func(rel string) {
		if rel == "d" && !swapped {
			swapped = true
			swapForLink(t, root, "d", outside)
		}
	}
	tg, err := fs.Resolve(context.Background(), "d/sub/key", provider.ResolveOptions{})
	require.NoError(t, err, "outside/sub is a file: looking through the link would say FS_NOT_DIRECTORY")
	assert.True(t, swapped)
	assert.Equal(t, "d/sub/key", tg.DisplayPath)
}
