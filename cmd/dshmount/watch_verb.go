package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// watchHelp is the help text of 'dshmount watch'.
const watchHelp = `Prints one line per change of PATH (a file, or a directory's direct children; with -r
everything below it) until interrupted:

  SEQ KIND PATH [-> TO] by ACTOR

SEQ is the change's sequence number (the audit log's, see 'dshmount log'). KIND is
created, modified (the bytes), attrib (mode, owner or times only), deleted or renamed
(with '-> TO'). PATH is the changed file itself, relative to the workspace. ACTOR is
'socket session=NAME', 'mount pid=PID uid=UID' (a program on the mount), or 'external'
(a change made directly in the workspace directory, seen by the daemon's workspace
watcher, on by default).
Changes of one path by one actor within a few milliseconds are printed as one line
(the last seq; created stays created).

--since SEQ first prints every retained change after SEQ, then goes on live, with no
gap and no duplicate: pass the last SEQ you printed to continue where you stopped. A
SEQ the daemon cannot vouch for (older than its retained history, see 'serve
--feed-retention', from before the daemon started, or before it lost changes) fails
with FS_CHANGES_LOST naming the seq to continue from after a rescan. A watch that falls
behind (or a daemon that loses changes while it runs) ends with exit status 1 and says
to rescan and resubscribe with --since N.

--json prints each change as one JSON object per line (the fs.changed notification:
watch, seq, path, kind, to, version, actor).`

// optionalSeq is a --since flag that knows whether it was given.
type optionalSeq struct {
	v   uint64
	set bool
}

// String implements flag.Value.
func (o *optionalSeq) String() string {
	if !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

// Set implements flag.Value.
func (o *optionalSeq) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("a sequence number (the first column of 'dshmount watch' or 'dshmount log'), not %q", s)
	}
	o.v, o.set = v, true
	return nil
}

// watchFlags declares the flags of 'dshmount watch'.
func watchFlags(fs *flag.FlagSet, o *verbOpts) {
	fs.BoolVar(&o.recursive, "r", false, "watch everything below the directory PATH, not only its direct children")
	fs.Var(&o.watchSince, "since", "first print the retained changes after sequence number `SEQ`, then go on live")
}

func doWatch(ctx context.Context, e *clientEnv) error {
	p := control.WatchParams{Path: e.args[0], Cwd: e.cwd, Recursive: e.opts.recursive, Branch: e.branch}
	if e.opts.watchSince.set {
		since := e.opts.watchSince.v
		p.Since = &since
	}
	w, err := e.client.Watch(ctx, p)
	var re *control.RPCError
	if errors.As(err, &re) && re.Code == provider.CodeChangesLost {
		return &fsFailure{code: re.Code, msg: fmt.Sprintf("%s; run again with --since %d after the rescan", re.Message, re.Resume)}
	}
	if err != nil {
		return err
	}
	defer func() { _ = w.Close(context.WithoutCancel(ctx)) }()
	enc := json.NewEncoder(e.io.out)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.C:
			if !ok {
				return errors.New("the daemon closed the connection")
			}
			if ev.Kind == control.ChangeLost {
				if e.json {
					_ = enc.Encode(ev)
				}
				if e.branch != "" && !branchExists(ctx, e.client, e.branch) {
					return &fsFailure{code: provider.CodeChangesLost, msg: fmt.Sprintf(
						"branch %s was committed or discarded; the watch of it ended after seq %d", e.branch, ev.Seq)}
				}
				return &fsFailure{code: provider.CodeChangesLost, msg: fmt.Sprintf(
					"the watch fell behind or the daemon lost changes after seq %d; rescan and resubscribe with --since %d", ev.Seq, ev.Seq)}
			}
			if e.json {
				err = enc.Encode(ev)
			} else {
				_, err = io.WriteString(e.io.out, changeLine(ev))
			}
			if err != nil {
				return fmt.Errorf("print a change: %w", err)
			}
		}
	}
}

// changeLine renders one change: "SEQ KIND PATH [-> TO] by ACTOR\n".
func changeLine(ev control.ChangeEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s", ev.Seq, ev.Kind, ev.Path)
	if ev.To != "" {
		fmt.Fprintf(&b, " -> %s", ev.To)
	}
	b.WriteString(" by ")
	b.WriteString(actorText(ev.Actor))
	b.WriteByte('\n')
	return b.String()
}

// actorText renders an actor: its channel, then session=NAME (the id when
// it has no name), then pid=PID uid=UID for a process on the mount
// (--json has every field).
func actorText(a *control.ChangeActor) string {
	if a == nil {
		return "unknown"
	}
	parts := []string{string(a.Channel)}
	if a.Session != "" {
		name := a.SessionName
		if name == "" {
			name = string(a.Session)
		}
		parts = append(parts, "session="+name)
	}
	if a.PID != 0 && a.Channel == control.ChannelMount {
		parts = append(parts, fmt.Sprintf("pid=%d", a.PID))
		if a.UID != nil {
			parts = append(parts, fmt.Sprintf("uid=%d", *a.UID))
		}
	}
	return strings.Join(parts, " ")
}

// branchExists reports whether the daemon still has branch name (true when
// it cannot tell).
func branchExists(ctx context.Context, client *control.Client, name string) bool {
	ls, err := client.BranchList(ctx)
	if err != nil {
		return true
	}
	for _, b := range ls.Branches {
		if b.Name == name {
			return true
		}
	}
	return false
}
