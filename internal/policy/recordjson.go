package policy

import (
	"encoding/json"
	"strconv"
	"time"
)

// Every mutation through the mount writes a last-writer record and an audit
// entry (a tar -x writes five of each per file), and encoding/json's
// reflection was most of their cost. These encoders write the very bytes
// json.Marshal writes for the two types (same field order, names, escaping
// and omitempty; the readers still use json.Unmarshal), without
// reflection. recordjson_test.go compares them with json.Marshal on every
// field, so a field added to either type fails the test until it is
// encoded here too.

// marshalWriteRecord is json.Marshal(r).
func marshalWriteRecord(r WriteRecord) ([]byte, error) {
	b := make([]byte, 0, 160+len(r.Path)+len(r.Version))
	b = append(b, `{"Actor":`...)
	b = appendActorJSON(b, r.Actor)
	b = append(b, `,"Op":`...)
	b = appendJSONString(b, string(r.Op))
	b = append(b, `,"Time":`...)
	b, err := appendJSONTime(b, r.Time)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"Version":`...)
	b = appendJSONString(b, string(r.Version))
	b = append(b, `,"Path":`...)
	b = appendJSONString(b, r.Path)
	if r.Seq != 0 {
		b = append(b, `,"Seq":`...)
		b = strconv.AppendUint(b, r.Seq, 10)
	}
	return append(b, '}'), nil
}

// marshalAuditEntry is json.Marshal(e).
func marshalAuditEntry(e AuditEntry) ([]byte, error) {
	b := make([]byte, 0, 256+len(e.Key)+2*len(e.Path)+len(e.Before)+len(e.After))
	b = append(b, `{"Seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"Time":`...)
	b, err := appendJSONTime(b, e.Time)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"Key":`...)
	b = appendJSONString(b, string(e.Key))
	b = append(b, `,"Path":`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `,"Op":`...)
	b = appendJSONString(b, string(e.Op))
	b = append(b, `,"Actor":`...)
	b = appendActorJSON(b, e.Actor)
	b = append(b, `,"Before":`...)
	b = appendJSONString(b, string(e.Before))
	b = append(b, `,"After":`...)
	b = appendJSONString(b, string(e.After))
	b = append(b, `,"To":`...)
	b = appendJSONString(b, e.To)
	b = append(b, `,"Unconditional":`...)
	b = strconv.AppendBool(b, e.Unconditional)
	b = append(b, `,"Detail":`...)
	b = appendJSONString(b, e.Detail)
	if e.Refused != "" {
		b = append(b, `,"Refused":`...)
		b = appendJSONString(b, string(e.Refused))
	}
	if e.Reason != "" {
		b = append(b, `,"Reason":`...)
		b = appendJSONString(b, e.Reason)
	}
	if e.Suppressed != 0 {
		b = append(b, `,"Suppressed":`...)
		b = strconv.AppendUint(b, e.Suppressed, 10)
	}
	if e.Daemon != "" {
		b = append(b, `,"Daemon":`...)
		b = appendJSONString(b, e.Daemon)
	}
	return append(b, '}'), nil
}

// appendActorJSON appends json.Marshal(a).
func appendActorJSON(b []byte, a Actor) []byte {
	b = append(b, `{"Session":`...)
	b = appendJSONString(b, string(a.Session))
	b = append(b, `,"PID":`...)
	b = strconv.AppendInt(b, int64(a.PID), 10)
	b = append(b, `,"UID":`...)
	b = strconv.AppendUint(b, uint64(a.UID), 10)
	b = append(b, `,"Channel":`...)
	b = appendJSONString(b, string(a.Channel))
	return append(b, '}')
}

// appendJSONTime appends json.Marshal(t) (RFC 3339 with nanoseconds; an
// error for years json cannot hold).
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		_, err := json.Marshal(t)
		return b, err
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendJSONString appends json.Marshal(s). Strings of printable ASCII
// that json leaves alone (no quote, backslash or HTML character) are
// copied; any other goes through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
