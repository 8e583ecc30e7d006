package service

import (
	"sync"

	"github.com/dshmount/dshmount/internal/policy"
)

// maxRememberedNames bounds the names kept for sessions closed since.
const maxRememberedNames = 4096

// sessionNames remembers the name of every session opened through this
// server, so that audit entries of a session closed since still show it.
type sessionNames struct {
	store *policy.Store

	mu    sync.Mutex
	names map[policy.SessionID]string
}

// newSessionNames returns an empty memo over store.
func newSessionNames(store *policy.Store) *sessionNames {
	return &sessionNames{store: store, names: map[policy.SessionID]string{}}
}

// opened records the name of a session just opened.
func (n *sessionNames) opened(id policy.SessionID, name string) {
	if name == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.names) >= maxRememberedNames {
		for old := range n.names {
			if _, open := n.store.Session(old); !open {
				delete(n.names, old)
			}
		}
	}
	if len(n.names) < maxRememberedNames {
		n.names[id] = name
	}
}

// name returns the name of session id: an open session's from the store,
// else the one remembered when it was opened ("" when unknown).
func (n *sessionNames) name(id policy.SessionID) string {
	if id == "" {
		return ""
	}
	if s, ok := n.store.Session(id); ok {
		return s.Name
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.names[id]
}
