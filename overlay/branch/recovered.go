package branch

// Recovered is a commit a killed daemon left unfinished, settled when the
// branches were opened: finished (Forward) or undone.
type Recovered struct {
	// Label is what was committed: "branch NAME", or "the atomic patch".
	Label string
	// Branch is the committed branch ("" for an atomic patch).
	Branch string
	// Forward reports that the commit was finished; otherwise the
	// workspace was left (or put back) as before it.
	Forward bool
	// Reason says why an undone commit was not finished.
	Reason string
	// Files are the files the commit changed (Forward) or would have
	// changed.
	Files []AppliedFile
	// Audited (Forward) says Files were recorded when the commit ran:
	// only OutOfBand is new.
	Audited bool
	// OutOfBand (Forward) are changes made on top of the finished commit
	// while the daemon was down: Before is what the commit left ("" for a
	// file it did not write), After what the path holds now.
	OutOfBand []AppliedFile
}

// TakeRecovered returns the commits Open settled, once (later calls return
// none), so the daemon can audit them.
func (m *Manager) TakeRecovered() []Recovered {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.recovered
	m.recovered = nil
	return out
}

// noteRecovered remembers how recovery settled j: finished when it is
// marked applied (with later, the changes made on top of it), else undone
// for reason.
func (m *Manager) noteRecovered(j *journal, reason string, later []AppliedFile) {
	forward := j.State == stateApplied
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovered = append(m.recovered, Recovered{Label: j.Label, Branch: j.Branch, Forward: forward,
		Reason: reason, Files: appliedFiles(m, j), Audited: forward && j.Audited, OutOfBand: later})
}
