package local_test

import (
	"context"
	"fmt"
	"os"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// A guarded edit: read the version, edit at it, and see a second edit at the
// same (now old) version refused.
func Example() {
	dir, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(dir)
	fs, err := local.New(dir, local.Options{})
	if err != nil {
		panic(err)
	}
	defer fs.Close()
	ctx := context.Background()

	t, _ := fs.Resolve(ctx, "notes/todo.txt", provider.ResolveOptions{})
	w, _ := fs.WriteText(ctx, t, "buy milk\n", &provider.WriteIntent{Kind: provider.CreateIfAbsent})
	fmt.Println(w.Operation, t.DisplayPath)

	e, _ := fs.EditText(ctx, t, provider.EditRequest{OldString: "milk", NewString: "bread"},
		&provider.VersionGuard{Version: w.Version})
	fmt.Printf("%q\n", e.After)

	_, err = fs.EditText(ctx, t, provider.EditRequest{OldString: "bread", NewString: "tea"},
		&provider.VersionGuard{Version: w.Version})
	fmt.Println(provider.CodeOf(err))
	// Output:
	// create notes/todo.txt
	// "buy bread\n"
	// FS_STALE_VERSION
}

// Paths that leave the workspace are refused.
func ExampleFS_Resolve() {
	dir, _ := os.MkdirTemp("", "workspace")
	defer os.RemoveAll(dir)
	fs, _ := local.New(dir, local.Options{})
	defer fs.Close()

	_, err := fs.Resolve(context.Background(), "../etc/passwd", provider.ResolveOptions{})
	fmt.Println(provider.CodeOf(err))
	t, _ := fs.Resolve(context.Background(), "a/../b.txt", provider.ResolveOptions{Cwd: "src"})
	fmt.Println(t.DisplayPath)
	// Output:
	// FS_SANDBOX_DENIED
	// src/b.txt
}
