package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/dshmount/dshmount/control"
)

// sessionIDForm is the form of the ids the daemon gives sessions.
var sessionIDForm = regexp.MustCompile(`^s-[0-9a-f]{16}$`)

// resolveSession turns a --session argument, an id or a name, into the
// session id: an id as it is; a name into the id of the one session of
// that name the caller may use (daemon.status lists them). Names are not
// unique: a name several sessions share is a usage error listing their
// ids. ok is false when the argument is neither an id nor a known name
// (the caller decides: the verbs pass it on, and the daemon answers that
// the session is unknown; mcp opens a session of that name).
func resolveSession(ctx context.Context, client *control.Client, arg string) (id control.SessionID, ok bool, err error) {
	if arg == "" || sessionIDForm.MatchString(arg) {
		return control.SessionID(arg), arg != "", nil
	}
	st, err := client.Status(ctx)
	if err != nil {
		return "", false, fmt.Errorf("look up session %q: %w", arg, err)
	}
	var named []string
	for _, s := range st.Sessions {
		if string(s.ID) == arg {
			return s.ID, true, nil
		}
		if s.Name == arg {
			named = append(named, string(s.ID))
		}
	}
	switch len(named) {
	case 0:
		return control.SessionID(arg), false, nil
	case 1:
		return control.SessionID(named[0]), true, nil
	}
	sort.Strings(named)
	return "", false, &usageError{msg: fmt.Sprintf("session name %q is ambiguous: %d sessions have it (%s); pass one of the ids",
		arg, len(named), strings.Join(named, ", "))}
}
