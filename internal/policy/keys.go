package policy

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
)

// Key layout in the engine (kv.Store). Every record kind has its own
// one-letter prefix:
//
//	m/<name>                     meta: clean-shutdown marker, leases
//	s/<session>                  session record (JSON)
//	o/<session>\x00<target key>  observation (kind byte + version)
//	v/<target key>               version record and claim (JSON; shared engine only)
//	d/<dev:8><ino:8>             cached content digest (encodeDigest; not on a shared engine)
//	w/<target key>               last writer (JSON)
//	a/<seq:8>                    audit entry (JSON), big-endian sequence
//	b/c<cgroup> | b/p<pid>:<start> process binding (JSON); on a shared
//	                             engine b/<host>/c… and b/<host>/p…
//	m/seq/audit                  audit seq counter (shared engine only)
//
// A target key below Options.WorkspaceRoot is stored relative to it, as
// "./<path>" (storedKey), so two hosts that mount one workspace under
// different paths name its files alike.
const (
	prefixMeta        = "m/"
	prefixSession     = "s/"
	prefixObservation = "o/"
	prefixDigest      = "d/"
	prefixLastWrite   = "w/"
	prefixAudit       = "a/"
	prefixBinding     = "b/"

	prefixVersion = "v/"

	keyClean      = prefixMeta + "clean"
	keyLeaseAudit = prefixMeta + "lease/audit"
	keySeqAudit   = prefixMeta + "seq/audit"
)

// storedKey is key as the store names it: "./" and the path relative to
// the workspace root when it is below it ("." for the root itself), else
// unchanged (an absolute path elsewhere, or a key of another namespace such
// as a branch's "branch/NAME/…", which never starts with "./").
func (s *Store) storedKey(key provider.Key) provider.Key {
	r := s.opts.WorkspaceRoot
	switch {
	case r == "":
		return key
	case string(key) == r:
		return "."
	case len(key) > len(r) && key[len(r)] == '/' && string(key[:len(r)]) == r:
		return "./" + key[len(r)+1:]
	}
	return key
}

// hostKey reverses storedKey: a workspace-relative key becomes this host's
// path.
func (s *Store) hostKey(key provider.Key) provider.Key {
	r := s.opts.WorkspaceRoot
	switch {
	case r == "":
		return key
	case key == ".":
		return provider.Key(r)
	case strings.HasPrefix(string(key), "./"):
		return provider.Key(r) + key[1:]
	}
	return key
}

func sessionKey(id SessionID) []byte { return []byte(prefixSession + string(id)) }

func observationPrefix(id SessionID) []byte {
	return []byte(prefixObservation + string(id) + "\x00")
}

func observationKey(id SessionID, key provider.Key) []byte {
	return append(observationPrefix(id), key...)
}

func digestKey(id provider.FileID) []byte {
	b := make([]byte, 0, len(prefixDigest)+16)
	b = append(b, prefixDigest...)
	b = binary.BigEndian.AppendUint64(b, id.Dev)
	return binary.BigEndian.AppendUint64(b, id.Ino)
}

func lastWriteKey(key provider.Key) []byte { return []byte(prefixLastWrite + string(key)) }

func auditKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixAudit), seq)
}

func encodeUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("expected 8 bytes, got %d", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// Observation values: one kind byte ('p' present, 'a' absent), then the
// version for present.
func encodeObservation(o Observation) []byte {
	if o.Kind == ObservedAbsent {
		return []byte{'a'}
	}
	return append([]byte{'p'}, o.Version...)
}

func decodeObservation(b []byte) (Observation, error) {
	if len(b) == 0 {
		return Observation{}, fmt.Errorf("empty observation value")
	}
	switch b[0] {
	case 'a':
		return Absent(), nil
	case 'p':
		return Present(provider.Version(b[1:])), nil
	}
	return Observation{}, fmt.Errorf("unknown observation kind %q", b[0])
}
