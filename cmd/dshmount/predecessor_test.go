package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/policy/procbind"
)

// fakeProcess plays the recorded daemon: its lifecycle answers in turn
// (the last one repeats) and the connections it was asked to abort.
type fakeProcess struct {
	states   []procbind.Lifecycle
	calls    int
	aborted  []string
	abortErr error
}

func (f *fakeProcess) recovery() predecessorRecovery {
	return predecessorRecovery{
		lifecycle: func(int, uint64) (procbind.Lifecycle, error) {
			s := f.states[min(f.calls, len(f.states)-1)]
			f.calls++
			return s, nil
		},
		abort:    func(device string) error { f.aborted = append(f.aborted, device); return f.abortErr },
		exitWait: 200 * time.Millisecond,
	}
}

func writeRecord(t *testing.T, dir string, rec daemonRecord) {
	t.Helper()
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, daemonRecordName), b, 0o600))
}

func TestRecoverPredecessor(t *testing.T) {
	rec := daemonRecord{PID: 4242, Start: 77, Mountpoint: "/mnt/ws", Device: "0:61"}
	cases := []struct {
		name        string
		record      bool
		states      []procbind.Lifecycle
		abortErr    error
		wantAborted []string
		wantErr     string
		wantLog     string
	}{
		{name: "no record", record: false, states: []procbind.Lifecycle{procbind.Dying}},
		{name: "running daemon is left alone", record: true, states: []procbind.Lifecycle{procbind.Running}},
		{name: "exited daemon", record: true, states: []procbind.Lifecycle{procbind.Gone}},
		{name: "stuck daemon: abort, then it exits", record: true,
			states:      []procbind.Lifecycle{procbind.Dying, procbind.Dying, procbind.Gone},
			wantAborted: []string{"0:61"}, wantLog: "aborting its FUSE connection"},
		{name: "connection already gone", record: true,
			states: []procbind.Lifecycle{procbind.Dying, procbind.Gone}, abortErr: fmt.Errorf("x: %w", fuse.ErrNoConnection),
			wantAborted: []string{"0:61"}},
		{name: "abort refused", record: true, states: []procbind.Lifecycle{procbind.Dying}, abortErr: os.ErrPermission,
			wantAborted: []string{"0:61"}, wantErr: "echo 1 > /sys/fs/fuse/connections"},
		{name: "still dying after the abort", record: true, states: []procbind.Lifecycle{procbind.Dying},
			wantAborted: []string{"0:61"}, wantErr: "still dying"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.record {
				writeRecord(t, dir, rec)
			}
			fp := &fakeProcess{states: c.states, abortErr: c.abortErr}
			var logs bytes.Buffer
			err := fp.recovery().run(dir, slog.New(slog.NewTextHandler(&logs, nil)))
			if c.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.wantErr)
				assert.Contains(t, err.Error(), "4242")
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.wantAborted, fp.aborted)
			if c.wantLog != "" {
				assert.Contains(t, logs.String(), c.wantLog)
			}
		})
	}
}

func TestRecoverPredecessor_AbortsTheBranchMountsToo(t *testing.T) {
	dir := t.TempDir()
	writeRecord(t, dir, daemonRecord{PID: 4242, Start: 77, Mountpoint: "/mnt/ws", Device: "0:61"})
	fp := &fakeProcess{states: []procbind.Lifecycle{procbind.Dying, procbind.Dying, procbind.Gone}}
	r := fp.recovery()
	r.branchDevices = func(stateDir string) []string {
		assert.Equal(t, dir, stateDir)
		return []string{"0:62", "0:61", "0:63"}
	}
	require.NoError(t, r.run(dir, slog.New(slog.DiscardHandler)))
	assert.Equal(t, []string{"0:61", "0:62", "0:63"}, fp.aborted)

	// A running daemon's branch mounts are left alone.
	fp = &fakeProcess{states: []procbind.Lifecycle{procbind.Running}}
	r = fp.recovery()
	r.branchDevices = func(string) []string { return []string{"0:62"} }
	require.NoError(t, r.run(dir, slog.New(slog.DiscardHandler)))
	assert.Empty(t, fp.aborted)
}

func TestRecoverPredecessor_TornRecordIsIgnored(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, daemonRecordName), []byte(`{"pid": 12`), 0o600))
	fp := &fakeProcess{states: []procbind.Lifecycle{procbind.Dying}}
	require.NoError(t, fp.recovery().run(dir, slog.New(slog.DiscardHandler)))
	assert.Empty(t, fp.aborted)
	assert.Zero(t, fp.calls, "no process is looked at without a record")
}

func TestDaemonRecord_RoundTripAndRemove(t *testing.T) {
	dir := t.TempDir()
	// The test process is not a mount; the record still names it.
	require.NoError(t, writeDaemonRecord(dir, dir))
	rec, err := readDaemonRecord(dir)
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.Equal(t, os.Getpid(), rec.PID)
	start, err := procbind.StartTime(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, start, rec.Start)
	state, err := procbind.LifecycleOf(rec.PID, rec.Start)
	require.NoError(t, err)
	assert.Equal(t, procbind.Running, state, "the record identifies this running process")

	require.NoError(t, removeDaemonRecord(dir))
	rec, err = readDaemonRecord(dir)
	require.NoError(t, err)
	assert.Nil(t, rec)
	require.NoError(t, removeDaemonRecord(dir), "removing twice is fine")
}
