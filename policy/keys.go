package policy

import (
	"encoding/binary"
	"fmt"

	"github.com/dshmount/dshmount/provider"
)

// Key layout in the engine (kv.Engine). Every record kind has its own
// one-letter prefix:
//
//	m/<name>                     meta: clean-shutdown marker, leases
//	s/<session>                  session record (JSON)
//	o/<session>\x00<target key>  observation (kind byte + version)
//	d/<dev:8><ino:8>             cached content digest (encodeDigest; not on a shared engine)
//	w/<target key>               last writer (JSON)
//	a/<seq:8>                    audit entry (JSON), big-endian sequence
//	b/c<cgroup> | b/p<pid>:<start> process binding (JSON)
const (
	prefixMeta        = "m/"
	prefixSession     = "s/"
	prefixObservation = "o/"
	prefixDigest      = "d/"
	prefixLastWrite   = "w/"
	prefixAudit       = "a/"
	prefixBinding     = "b/"

	keyClean      = prefixMeta + "clean"
	keyLeaseAudit = prefixMeta + "lease/audit"
)

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
