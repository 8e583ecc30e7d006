package fuse

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/provider"
)

// linkSet remembers the names of files given a second name through the
// mount (link(2)). Removing one name of such a file changes the version of
// the others (link count, ctime, generation); a bound session that removed
// it caused that change and keeps its fresh observations of the other names
// (the pattern of git's object writes: link the temporary file to its final
// name, then unlink the temporary name).
type linkSet struct {
	mu    sync.Mutex
	names map[provider.FileID][]string
}

// add notes that rels are names of id.
func (l *linkSet) add(id provider.FileID, rels ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = map[provider.FileID][]string{}
	}
	for _, r := range rels {
		found := false
		for _, x := range l.names[id] {
			found = found || x == r
		}
		if !found {
			l.names[id] = append(l.names[id], r)
		}
	}
}

// others returns the known names of id besides rel and forgets rel.
func (l *linkSet) others(id provider.FileID, rel string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out, keep []string
	for _, x := range l.names[id] {
		if x != rel {
			out = append(out, x)
			keep = append(keep, x)
		}
	}
	if len(keep) <= 1 {
		delete(l.names, id)
	} else {
		l.names[id] = keep
	}
	return out
}

// refreshLinks carries a bound session's observations of the other names of
// a file it just unlinked one name of, from before to the file's new
// version. Only observations that were fresh (present at before) move: a
// stale one stays stale.
func (m *mountState) refreshLinks(a policy.Actor, st *unix.Stat_t, rel string, before provider.Version) {
	if st.Nlink <= 1 {
		return
	}
	names := m.links.others(fileID(st), rel)
	if a.Session == "" {
		return
	}
	for _, other := range names {
		bs, err := m.statRel(other)
		if err != nil || fileID(&bs.st) != fileID(st) {
			continue
		}
		t := m.target(other)
		obs, ok := m.cfg.Engine.Store().Observation(a.Session, t.Key)
		if !ok || obs.Kind != policy.ObservedPresent || obs.Version != before {
			continue
		}
		m.observe(a, t, policy.Present(m.version(&bs.st)))
	}
}
