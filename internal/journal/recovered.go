package journal

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

// noteRecovered remembers how recovery settled j: finished when it is
// marked applied (with later, the changes made on top of it), else undone
// for reason.
func (jr *Journal) noteRecovered(j *intent, reason string, later []AppliedFile) {
	forward := j.State == stateApplied
	jr.mu.Lock()
	defer jr.mu.Unlock()
	jr.recovered = append(jr.recovered, Recovered{Label: j.Label, Branch: j.Branch, Forward: forward,
		Reason: reason, Files: appliedFiles(jr, j), Audited: forward && j.Audited, OutOfBand: later})
}
