package daemon

import (
	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy/procbind"
)

// Lifecycle is where a process is in its life (procbind.Lifecycle): a
// next daemon asks it of a killed predecessor.
type Lifecycle = procbind.Lifecycle

// The states of Lifecycle.
const (
	Running = procbind.Running
	Dying   = procbind.Dying
	Gone    = procbind.Gone
)

// StartTime returns pid's start time (clock ticks since boot), which tells
// it apart from a later process of the same pid.
func StartTime(pid int) (uint64, error) { return procbind.StartTime(pid) }

// LifecycleOf returns the state of the process pid started at start.
func LifecycleOf(pid int, start uint64) (Lifecycle, error) { return procbind.LifecycleOf(pid, start) }

// RecordedBranchMounts returns the directories where the branches of
// stateDir were mounted, as recorded (a killed daemon's included).
func RecordedBranchMounts(stateDir string) []string { return branch.RecordedMounts(stateDir) }
