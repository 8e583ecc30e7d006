package branch

import "fmt"

// sessionsRecord names the record of the sessions' default branches.
const sessionsRecord = "sessions.rec"

// SetSessionBranch makes name the default branch of session (an opaque
// id), kept across restarts: a session that works in a branch must not
// fall back to the workspace when the daemon restarts. An empty name
// clears it.
func (m *Manager) SetSessionBranch(session, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defaults := map[string]string{}
	if _, err := m.journals.Get(sessionsRecord, &defaults); err != nil {
		return err
	}
	if name == "" {
		delete(defaults, session)
	} else {
		defaults[session] = name
	}
	if err := m.journals.Put(sessionsRecord, defaults); err != nil {
		return fmt.Errorf("remember the default branch of session %s: %w", session, err)
	}
	m.defaults = defaults
	return nil
}

// SessionBranch returns the default branch of session ("" when none).
func (m *Manager) SessionBranch(session string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.defaults == nil {
		m.defaults = map[string]string{}
		if _, err := m.journals.Get(sessionsRecord, &m.defaults); err != nil {
			m.log.Warn("cannot read the sessions' default branches", "err", err)
		}
	}
	return m.defaults[session]
}
