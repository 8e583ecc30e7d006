package branch

import "github.com/dshmount/dshmount/internal/journal"

// Recovered is a commit a killed daemon left unfinished, settled when the
// branches were opened (journal.Recovered).
type Recovered = journal.Recovered

// TakeRecovered returns the commits Open settled, once (later calls return
// none), so the daemon can audit them.
func (m *Manager) TakeRecovered() []Recovered { return m.journal.TakeRecovered() }
