package service

import (
	"path"
	"strings"

	"github.com/dshmount/dshmount/internal/policy"
)

// logFilter keeps the audit entries under some directories and drops the
// ones matching exclusion globs (fs.log's paths and exclude).
type logFilter struct {
	under   []string // display paths; an entry must touch one of them or a path below
	exclude []string // globs, see excluded
}

// match reports whether e passes the filter. A move or rename passes when
// either of its paths does.
func (f logFilter) match(e policy.AuditEntry) bool {
	return f.keeps(e.Path) || (e.To != "" && f.keeps(e.To))
}

// keeps reports whether one display path passes.
func (f logFilter) keeps(p string) bool {
	if len(f.under) > 0 {
		in := false
		for _, u := range f.under {
			if u == "." || u == "" || p == u || strings.HasPrefix(p, u+"/") {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for _, g := range f.exclude {
		if excluded(g, p) {
			return false
		}
	}
	return true
}

// excluded reports whether glob excludes display path p: a glob without a
// slash matches any one component of p (".git" drops everything under a
// .git directory, "*.log" every log file); a glob with a slash matches p
// or any directory leading to it ("build/out" drops build/out/...).
func excluded(glob, p string) bool {
	glob = strings.TrimSuffix(strings.TrimPrefix(glob, "/"), "/")
	if !strings.Contains(glob, "/") {
		for c := range strings.SplitSeq(p, "/") {
			if ok, _ := path.Match(glob, c); ok {
				return true
			}
		}
		return false
	}
	for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if ok, _ := path.Match(glob, q); ok {
			return true
		}
	}
	return false
}
