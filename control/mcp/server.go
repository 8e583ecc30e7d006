package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// Daemon is the part of the control client the MCP server uses, one method
// per RPC; *control.Client implements it.
type Daemon interface {
	OpenSessionWith(ctx context.Context, p control.SessionOpenParams) (control.SessionID, error)
	CloseSession(ctx context.Context, id control.SessionID) error
	Stat(ctx context.Context, p control.StatParams) (*control.StatResult, error)
	List(ctx context.Context, p control.ListParams) (*control.ListResult, error)
	Read(ctx context.Context, p control.ReadParams) (*control.ReadResult, error)
	Write(ctx context.Context, p control.WriteParams) (*control.WriteResult, error)
	Edit(ctx context.Context, p control.EditParams) (*control.EditResult, error)
	Patch(ctx context.Context, p control.PatchParams) (*control.PatchResult, error)
	Delete(ctx context.Context, p control.DeleteParams) (*control.DeleteResult, error)
	Move(ctx context.Context, p control.MoveParams) (*control.MoveResult, error)
	Log(ctx context.Context, p control.LogParams) (*control.LogResult, error)
	Status(ctx context.Context) (*control.StatusResult, error)
	BranchRebase(ctx context.Context, p control.BranchRebaseParams) (*control.BranchRebaseResult, error)
}

var _ Daemon = (*control.Client)(nil)

// Config configures one MCP connection.
type Config struct {
	// Daemon is the control client; required.
	Daemon Daemon
	// SessionName names the policy session opened for the connection
	// (shown by daemon.status and in the audit log).
	SessionName string
	// Session, when set, is an existing session the connection acts for
	// instead of opening one (SessionName is then unused); the connection
	// does not close it.
	Session control.SessionID
	// Cwd is the base of relative paths ("" = the workspace root).
	Cwd string
	// Branch, when set, makes every tool act in that branch (the session's
	// default branch) instead of the workspace.
	Branch string
	// Logger receives diagnostics; nil discards them. It must not write to
	// the protocol stream.
	Logger *slog.Logger
	// Now is the clock used for "3s ago" in error texts; nil = time.Now.
	Now func() time.Time
	// Version is reported to the client as the server version.
	Version string
}

// Conn is one MCP connection bound to one open policy session.
type Conn struct {
	cfg     Config
	log     *slog.Logger
	session control.SessionID
	server  *sdk.Server

	mu   sync.Mutex
	seen map[string]sighting // display path → this session's last sight of it

	closeOnce sync.Once
	closeErr  error
}

// Open opens the policy session and builds the MCP server with every tool.
// Close the Conn to close the session.
func Open(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Daemon == nil {
		return nil, errors.New("mcp: Config.Daemon is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	id := cfg.Session
	if id == "" {
		var err error
		id, err = cfg.Daemon.OpenSessionWith(ctx, control.SessionOpenParams{Name: cfg.SessionName, Channel: control.ChannelMCP, Branch: cfg.Branch})
		if err != nil {
			return nil, fmt.Errorf("open a policy session: %w", err)
		}
	}
	c := &Conn{cfg: cfg, log: cfg.Logger, session: id, seen: map[string]sighting{}}
	c.server = sdk.NewServer(&sdk.Implementation{Name: "dshmount", Title: "dshmount guarded workspace", Version: cfg.Version},
		&sdk.ServerOptions{Logger: cfg.Logger, Instructions: instructions, Capabilities: &sdk.ServerCapabilities{}})
	if err := c.addTools(); err != nil {
		_ = c.Close()
		return nil, err
	}
	c.log.Info("mcp session opened", "session", c.session, "name", cfg.SessionName)
	return c, nil
}

// instructions are sent to the client at initialization.
const instructions = `This server edits a guarded workspace. Read a file before you edit, overwrite, move or delete it; if someone changes it after your read, your change is refused with FS_STALE_VERSION and you must read it again. Failed calls start with a stable FS_… code.`

// Session returns the policy session this connection acts for.
func (c *Conn) Session() control.SessionID { return c.session }

// Server returns the MCP server, for callers that run their own transport.
func (c *Conn) Server() *sdk.Server { return c.server }

// Serve serves MCP on t until the client disconnects (for stdio: stdin
// closes) or ctx ends. It does not close the session; call Close.
func (c *Conn) Serve(ctx context.Context, t sdk.Transport) error {
	err := c.server.Run(ctx, t)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serve mcp: %w", err)
	}
	return nil
}

// Close closes the policy session; the session's observations are dropped.
// It is safe to call more than once.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		if c.cfg.Session != "" {
			return // joined, not opened: its opener closes it
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.cfg.Daemon.CloseSession(ctx, c.session); err != nil {
			c.closeErr = fmt.Errorf("close policy session %s: %w", c.session, err)
			return
		}
		c.log.Info("mcp session closed", "session", c.session)
	})
	return c.closeErr
}

// Run opens a session, serves MCP on t until the client goes away, then
// closes the session. It is what `dshmount mcp` runs over stdio.
func Run(ctx context.Context, cfg Config, t sdk.Transport) error {
	c, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	serveErr := c.Serve(ctx, t)
	return errors.Join(serveErr, c.Close())
}

// addTools registers every tool, with argument types from the method
// document.
func (c *Conn) addTools() error {
	doc, err := control.Discover()
	if err != nil {
		return fmt.Errorf("the socket's method document: %w", err)
	}
	base := c.cfg.Cwd
	return errors.Join(
		addTool(c.server, &doc, base, readSpec, c.read),
		addTool(c.server, &doc, base, writeSpec, c.write),
		addTool(c.server, &doc, base, editSpec, c.edit),
		addTool(c.server, &doc, base, patchSpec, c.applyPatch),
		addTool(c.server, &doc, base, moveSpec, c.move),
		addTool(c.server, &doc, base, deleteSpec, c.delete),
		addTool(c.server, &doc, base, listSpec, c.list),
		addTool(c.server, &doc, base, statSpec, c.stat),
		addTool(c.server, &doc, base, branchRebaseSpec, c.branchRebase),
	)
}

// sighting is this session's last sight of a path: when the call that
// saw or changed it started, and the version it saw or produced ("" when
// it removed the file).
type sighting struct {
	at      time.Time
	version provider.Version
}

// markSeen records that a call started at at saw or produced version v of
// path.
func (c *Conn) markSeen(path string, at time.Time, v provider.Version) {
	c.mu.Lock()
	c.seen[path] = sighting{at: at, version: v}
	c.mu.Unlock()
}

// lastSeen returns this session's last sight of path.
func (c *Conn) lastSeen(path string) (sighting, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seen[path]
	return s, ok
}
