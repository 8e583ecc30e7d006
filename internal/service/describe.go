package service

import (
	"fmt"
	"time"

	"github.com/dshmount/dshmount/internal/policy"
)

// Change is who made a change and how long ago, as DescribeChange words it.
type Change struct {
	Op            policy.MutationOp
	Channel       policy.Channel
	PID           int32
	Session       policy.SessionID
	SessionName   string
	Unconditional bool
	Age           time.Duration
}

// DescribeChange words a change for people, the one wording the CLI, the
// socket and MCP use in stale-version messages: "by a write through the
// mount (pid 12, session s-… ("vim")), 3s ago", "by an edit from session
// s-… ("agent") over the socket, just now". A change of the session self
// is "this session".
func DescribeChange(c Change, self policy.SessionID) string {
	s := "by " + article(string(c.Op))
	who := ""
	if c.Session != "" {
		who = describeSession(c.Session, c.SessionName, self)
	}
	switch c.Channel {
	case policy.ChannelMount:
		s += " through the mount"
		switch {
		case c.PID != 0 && who != "":
			s += fmt.Sprintf(" (pid %d, %s)", c.PID, who)
		case c.PID != 0:
			s += fmt.Sprintf(" (pid %d)", c.PID)
		case who != "":
			s += fmt.Sprintf(" (%s)", who)
		}
	case policy.ChannelSocket, policy.ChannelMCP:
		if who != "" {
			s += " from " + who
		}
		if c.Channel == policy.ChannelMCP {
			s += " over MCP"
		} else {
			s += " over the socket"
		}
	default:
		if who != "" {
			s += " from " + who
		}
	}
	if c.Unconditional {
		s += ", unconditionally"
	}
	return s + ", " + Ago(c.Age)
}

// describeSession renders `session s-… ("name")`, or "this session".
func describeSession(id policy.SessionID, name string, self policy.SessionID) string {
	if id == self {
		return "this session"
	}
	if name != "" {
		return fmt.Sprintf("session %s (%q)", id, name)
	}
	return "session " + string(id)
}

// article prefixes a noun with "a" or "an".
func article(noun string) string {
	if noun == "" {
		return "a change"
	}
	switch noun[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + noun
	}
	return "a " + noun
}

// Ago renders a duration for people: "just now", "3s ago", "2m ago".
func Ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
