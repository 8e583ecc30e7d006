package control_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/service"
)

// Example runs a daemon's control socket over a workspace in a temporary
// directory and drives it with the Go client: read, edit with the version
// the read observed, and see a stale edit refused.
func Example() {
	tmp, _ := os.MkdirTemp("", "dshexample")
	defer os.RemoveAll(tmp)
	workspace := filepath.Join(tmp, "ws")
	_ = os.MkdirAll(workspace, 0o755)
	_ = os.WriteFile(filepath.Join(workspace, "hello.txt"), []byte("hello, world\n"), 0o644)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(filepath.Join(tmp, "state"), policy.DefaultOptions().WithLogger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	fs, _ := local.New(workspace, local.Options{Digests: store})
	svc, err := service.New(service.Config{Engine: policy.NewEngine(store, fs), Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := control.NewServer(control.Config{
		SocketPath: filepath.Join(tmp, "run", "control.sock"),
		Service:    svc,
		Logger:     quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(context.Background())
	defer srv.Close()

	ctx := context.Background()
	c, err := control.Dial(filepath.Join(tmp, "run", "control.sock"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	session, _ := c.OpenSession(ctx, "example")

	read, _ := c.Read(ctx, control.ReadParams{Path: "hello.txt", Session: session})
	for _, l := range read.Lines {
		fmt.Printf("%d: %s\n", l.Number, l.Text)
	}
	// The read observed the file, so this edit is guarded by its version.
	edit, _ := c.Edit(ctx, control.EditParams{Path: "hello.txt", OldString: "world", NewString: "socket", Session: session})
	fmt.Print(edit.After)

	// An edit guarded by the old version is refused.
	_, err = c.Edit(ctx, control.EditParams{Path: "hello.txt", OldString: "socket", NewString: "again",
		Expected: &control.VersionExpected{Version: read.Version}})
	fmt.Println(errors.Is(err, provider.ErrStaleVersion))
	// Output:
	// 1: hello, world
	// hello, socket
	// true
}
