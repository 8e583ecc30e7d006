package fsx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirRemote is a Remote over a plain directory: atomic temp-and-rename
// replacement, like the daemon's socket writes.
type dirRemote struct {
	root string
	seq  atomic.Int64
	// skip, when set, drops every mutation after acknowledging it.
	skip bool
}

func (r *dirRemote) Write(_ context.Context, rel, content string) error {
	if r.skip {
		return nil
	}
	p := filepath.Join(r.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", p, r.seq.Add(1))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (r *dirRemote) Edit(ctx context.Context, rel, old, new string) error {
	b, err := os.ReadFile(filepath.Join(r.root, rel))
	if err != nil {
		return err
	}
	if strings.Count(string(b), old) != 1 {
		return fmt.Errorf("edit %s: %q occurs %d times", rel, old, strings.Count(string(b), old))
	}
	return r.Write(ctx, rel, strings.Replace(string(b), old, new, 1))
}

func TestRun_NativeDirectoryHasNoMismatch(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Config{Dir: dir, Backing: dir, Seed: 1, Ops: 4000, Mmap: true,
		Remote: &dirRemote{root: dir}})
	require.NoError(t, err)
	t.Log(res)
	assert.Equal(t, 4000, res.Ops)
	for _, k := range opKinds {
		assert.Positive(t, res.Performed(k.name), "operation %s never ran", k.name)
	}
	assert.Positive(t, res.RemoteWrites)
	assert.Empty(t, res.MmapUnsupported)
	assert.Empty(t, res.Unsupported)
}

// newKinds are the operations added for the bound runs of issue 20.
var newKinds = []string{"fallocate", "punch", "copyrange", "mmapwrite", "link"}

// TestRun_PlantedFaultInEachNewOperationIsReported makes each new
// operation's system call slightly wrong (one byte more, one byte further,
// another name) while the model records the intended call: the run with the
// same seed passes without the fault and reports a mismatch with it, after
// at least one operation of that kind.
func TestRun_PlantedFaultInEachNewOperationIsReported(t *testing.T) {
	for _, kind := range newKinds {
		t.Run(kind, func(t *testing.T) {
			cfg := Config{Seed: 11, Ops: 3000, Workers: 1, Mmap: true, LogLen: 5000}
			cfg.Dir = t.TempDir()
			res, err := Run(context.Background(), cfg)
			require.NoError(t, err, "the same run without the fault")
			require.Positive(t, res.Performed(kind))

			cfg.Dir, cfg.fault = t.TempDir(), kind
			_, err = Run(context.Background(), cfg)
			var me *MismatchError
			require.ErrorAs(t, err, &me, "a wrong %s must be reported", kind)
			assert.Equal(t, uint64(11), me.Seed)
			assert.Contains(t, strings.Join(me.Log, "\n"), " "+kind+" ", "the mismatch follows a %s", kind)
		})
	}
}

// TestRun_UnsupportedKindIsDisabledWithItsReason pins the ENODEV pattern for
// the new kinds: the first "not supported" answer turns the kind off for the
// rest of the run, with the reason, instead of a mismatch.
func TestRun_UnsupportedKindIsDisabledWithItsReason(t *testing.T) {
	w := &worker{sup: &support{off: map[string]string{}}}
	assert.False(t, w.unsupported("copyrange", "copy", unix.EIO, unix.EXDEV, unix.EINVAL))
	assert.True(t, w.sup.enabled("copyrange"))
	assert.True(t, w.unsupported("copyrange", "copy", fmt.Errorf("wrapped: %w", unix.EXDEV), unix.EXDEV, unix.EINVAL))
	assert.False(t, w.sup.enabled("copyrange"))
	assert.True(t, w.sup.enabled("punch"))
	w.sup.disable("copyrange", "a later reason")
	assert.Equal(t, map[string]string{"copyrange": "copy: wrapped: " + unix.EXDEV.Error()}, w.sup.reasons())
}

func TestResult_StringNamesSkipsAndUnsupportedKinds(t *testing.T) {
	r := Result{Ops: 10, Elapsed: time.Second, Counts: map[string]int{"punch": 4, "write": 6},
		Skipped: map[string]int{"punch": 3}, Unsupported: map[string]string{"punch": "EOPNOTSUPP"}}
	assert.Equal(t, "fsx: 10 ops in 1s (10 ops/s) punch=4(3 skipped) write=6 (punch off: EOPNOTSUPP)", r.String())
	assert.Equal(t, 1, r.Performed("punch"))
}

func TestRun_SameSeedSameOperations(t *testing.T) {
	a, err := Run(context.Background(), Config{Dir: t.TempDir(), Seed: 7, Ops: 500, Workers: 2})
	require.NoError(t, err)
	b, err := Run(context.Background(), Config{Dir: t.TempDir(), Seed: 7, Ops: 500, Workers: 2})
	require.NoError(t, err)
	assert.Equal(t, a.Counts, b.Counts)
}

func TestRun_CorruptionBehindTheModelIsReported(t *testing.T) {
	dir := t.TempDir()
	var n atomic.Int64
	cfg := Config{Dir: dir, Seed: 42, Ops: 2000, Workers: 1, LogLen: 8}
	cfg.tamper = func(path string) {
		if n.Add(1) < 300 {
			return
		}
		// From op 300 on, flip a byte of every non-empty file touched,
		// behind the worker's back.
		fi, err := os.Stat(path)
		if err != nil || fi.Size() == 0 {
			return
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0xff}, fi.Size()/2)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	_, err := Run(context.Background(), cfg)
	var me *MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, uint64(42), me.Seed)
	assert.NotEmpty(t, me.Log)
	assert.LessOrEqual(t, len(me.Log), 8)
	assert.Contains(t, err.Error(), "DSH_FSX_SEED=42")
}

func TestRun_UnappliedRemoteChangeIsReported(t *testing.T) {
	dir := t.TempDir()
	_, err := Run(context.Background(), Config{Dir: dir, Seed: 3, Ops: 2000, Workers: 1, Remote: &dirRemote{root: dir, skip: true}})
	require.Error(t, err)
	var me *MismatchError
	require.ErrorAs(t, err, &me)
}

func TestRun_StopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Run(ctx, Config{Dir: t.TempDir(), Seed: 5, Ops: 1 << 30, Workers: 2})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

func TestModel_WriteAtFillsHolesWithZeros(t *testing.T) {
	m := &fileModel{}
	m.writeAt(3, []byte("ab"))
	assert.Equal(t, []byte{0, 0, 0, 'a', 'b'}, m.data)
	assert.False(t, m.isText())
	m.resize(4)
	assert.Equal(t, []byte{0, 0, 0, 'a'}, m.data)
	m.data = []byte("text\n")
	assert.True(t, m.isText())
}

func TestOpLog_KeepsTheLastOperationsInOrder(t *testing.T) {
	l := newOpLog(3)
	for i := range 5 {
		l.add("op %d", i)
	}
	assert.Equal(t, []string{"op 2", "op 3", "op 4"}, l.snapshot())
}
