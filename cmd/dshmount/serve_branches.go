package main

import (
	"fmt"
	"log/slog"

	"github.com/dshmount/dshmount/overlay/branch"
)

// openBranches opens the branches kept in the state directory; a commit a
// killed daemon left half done is finished or undone here, before the
// mount and the socket serve anything.
func openBranches(stateDir string, lower branch.Lower, log *slog.Logger) (*branch.Manager, error) {
	m, err := branch.Open(stateDir, lower, branch.Options{Logger: log.With("component", "branch")})
	if err != nil {
		return nil, fmt.Errorf("branches: %w", err)
	}
	return m, nil
}
