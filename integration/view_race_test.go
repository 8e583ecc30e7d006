package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// The view holds under races (issue 14, case 8 and item 6): the socket
// decides --hide and --read-only on the resolved path, then opens it. While
// a visible directory is exchanged, out of band, with a symbolic link to a
// hidden or a read-only directory, that open must never follow the link: a
// request sees FS_SANDBOX_DENIED, not found, or the visible directory, and
// never returns a hidden byte, lists a hidden name, or leaves a file in a
// hidden or read-only directory.

// viewRaceFiles is the workspace of the view race: rd/ and wr/ are swapped
// with links to the hidden secret/ and the read-only ro/.
var viewRaceFiles = map[string]string{
	"rd/key":         "visible key\n",
	"wr/key":         "writable key\n",
	"secret/key":     "HIDDEN key\n",
	"secret/only-in": "HIDDEN only\n",
	"ro/key":         "read-only key\n",
}

func TestHostile_ViewHoldsWhileADirectoryIsSwappedForALinkToAHiddenOne(t *testing.T) {
	d := startDaemon(t, daemonOptions{
		Args:  []string{"--hide", "/secret", "--read-only", "/ro", "--durability", "none"},
		Files: viewRaceFiles,
	})
	src := d.Src
	require.NoError(t, os.Symlink("secret", filepath.Join(src, "rd-alt")))
	require.NoError(t, os.Symlink("ro", filepath.Join(src, "wr-alt")))
	secretBefore := treeDigest(t, filepath.Join(src, "secret"))
	roBefore := treeDigest(t, filepath.Join(src, "ro"))

	stopRead := swapLoop(t, filepath.Join(src, "rd"), filepath.Join(src, "rd-alt"))
	stopWrite := swapLoop(t, filepath.Join(src, "wr"), filepath.Join(src, "wr-alt"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const readers, reads, writes = 2, 1500, 1000
	var mu sync.Mutex
	tally := map[string]int{}
	var leaks, unclear, unexpected []string
	note := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			tally[what+" ok"]++
			return
		}
		code := provider.CodeOf(err)
		tally[what+" "+string(code)]++
		if code == "" || provider.MessageOf(err) == "" {
			unclear = append(unclear, err.Error())
		}
		if code != provider.CodeSandboxDenied && code != provider.CodeNotFound && len(unexpected) < 5 {
			unexpected = append(unexpected, what+": "+err.Error())
		}
	}
	leak := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		leaks = append(leaks, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			c, err := control.Dial(d.Socket)
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			for i := range reads {
				r, err := c.Read(ctx, control.ReadParams{Path: "rd/key"})
				note("read", err)
				if err == nil {
					for _, l := range r.Lines {
						if strings.Contains(l.Text, "HIDDEN") {
							leak("reader %d, read %d returned the hidden line %q", g, i, l.Text)
						}
					}
				}
				if i%4 == 0 {
					list, err := c.List(ctx, control.ListParams{Path: "rd"})
					note("list", err)
					if err == nil {
						for _, e := range list.Entries {
							if e.Name == "only-in" {
								leak("reader %d, list %d showed the hidden name %q", g, i, e.Name)
							}
						}
					}
				}
			}
		})
	}
	wg.Go(func() {
		c, err := control.Dial(d.Socket)
		if !assert.NoError(t, err) {
			return
		}
		defer c.Close()
		for i := range writes {
			_, err := c.Write(ctx, control.WriteParams{Path: fmt.Sprintf("wr/planted-%d", i), Content: "planted\n", Unconditional: true})
			note("create", err)
			_, err = c.Write(ctx, control.WriteParams{Path: "wr/key", Content: fmt.Sprintf("writable key %d\n", i), Unconditional: true})
			note("replace", err)
			_, err = c.Write(ctx, control.WriteParams{Path: fmt.Sprintf("rd/planted-%d", i), Content: "planted\n", Unconditional: true})
			note("create next to a hidden swap", err)
		}
	})
	wg.Wait()
	swaps := stopRead() + stopWrite()
	t.Logf("%d swaps; outcomes: %v", swaps, tally)

	assert.Empty(t, leaks, "hidden bytes or names reached the socket")
	assert.Empty(t, unclear, "refusals without an FS code or message")
	assert.Empty(t, unexpected, "a swap may only give FS_SANDBOX_DENIED or FS_NOT_FOUND")
	assert.Positive(t, swaps)
	assert.Positive(t, tally["read ok"], "some reads must see the visible directory")
	assert.Positive(t, tally["create ok"], "some writes must land in the visible directory")
	assert.Equal(t, secretBefore, treeDigest(t, filepath.Join(src, "secret")), "a write reached the hidden directory")
	assert.Equal(t, roBefore, treeDigest(t, filepath.Join(src, "ro")), "a write reached the read-only directory")
	stopAndCheckRaces(t, d)
}
