package service

import "github.com/dshmount/dshmount/internal/policy"

// The policy names the protocol's types are made of, so that transports
// and clients name them through the service.
type (
	// SessionID names a session.
	SessionID = policy.SessionID
	// Channel is how a change reached the daemon.
	Channel = policy.Channel
	// MutationOp names a change.
	MutationOp = policy.MutationOp
)

// Channels and operations clients name.
const (
	ChannelSocket = policy.ChannelSocket
	ChannelMCP    = policy.ChannelMCP
	ChannelMount  = policy.ChannelMount
	OpCreate      = policy.OpCreate
	OpWrite       = policy.OpWrite
	OpTruncate    = policy.OpTruncate
	OpSetattr     = policy.OpSetattr
	OpDelete      = policy.OpDelete
	OpUnlink      = policy.OpUnlink
	OpMove        = policy.OpMove
	OpRename      = policy.OpRename
)
