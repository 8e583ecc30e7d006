package policy

import (
	"encoding/binary"
	"fmt"

	"github.com/dshmount/dshmount/provider"
)

// Key layout in Badger. Every record kind has its own one-letter prefix:
//
//	m/<name>                     meta: clean-shutdown marker, floor, leases
//	s/<session>                  session record (JSON)
//	o/<session>\x00<target key>  observation (kind byte + version)
//	g/<dev:8><ino:8>             generation (big-endian uint64)
//	w/<target key>               last writer (JSON)
//	a/<seq:8>                    audit entry (JSON), big-endian sequence
const (
	prefixMeta        = "m/"
	prefixSession     = "s/"
	prefixObservation = "o/"
	prefixGeneration  = "g/"
	prefixLastWrite   = "w/"
	prefixAudit       = "a/"

	keyClean      = prefixMeta + "clean"
	keyFloor      = prefixMeta + "floor"
	keyLeaseGen   = prefixMeta + "lease/generation"
	keyLeaseAudit = prefixMeta + "lease/audit"
)

func sessionKey(id SessionID) []byte { return []byte(prefixSession + string(id)) }

func observationPrefix(id SessionID) []byte {
	return []byte(prefixObservation + string(id) + "\x00")
}

func observationKey(id SessionID, key provider.Key) []byte {
	return append(observationPrefix(id), key...)
}

func generationKey(id provider.FileID) []byte {
	b := make([]byte, 0, len(prefixGeneration)+16)
	b = append(b, prefixGeneration...)
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
