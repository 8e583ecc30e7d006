package policy

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// fillFields sets every field of the struct v points to (recursively) to a
// non-zero value derived from s, so that json.Marshal writes each one.
func fillFields(v reflect.Value, s string) {
	for i := range v.NumField() {
		f := v.Field(i)
		name := s + v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString(name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(-int64(len(name)))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(len(name)))
		case reflect.Struct:
			if f.Type() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(time.Date(2026, 12, 3, 15, 4, 5, 123456789, time.FixedZone("x", 3600))))
				continue
			}
			fillFields(f, name)
		default:
			panic("fillFields: add kind " + f.Kind().String())
		}
	}
}

// oddStrings are strings encoding/json escapes.
var oddStrings = []string{
	"", "plain/path.go", `quote"d`, `back\slash`, "<html>&amp;", "tab\there\nnl\rcr\bbs\ffeed\x01\x1f",
	"ünïcode ✓", "bad utf8 \xff\xfe", "line\u2028sep\u2029", "\x7f del",
}

func TestMarshalWriteRecord_IsJSONMarshal(t *testing.T) {
	var full WriteRecord
	fillFields(reflect.ValueOf(&full).Elem(), "w")
	cases := []WriteRecord{{}, full}
	for _, s := range oddStrings {
		r := full
		r.Path, r.Version, r.Op, r.Actor.Session, r.Actor.Channel = s, provider.Version("v"+s), MutationOp(s), SessionID(s), Channel(s)
		r.Actor.PID, r.Time = -1, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
		cases = append(cases, r)
	}
	cases = append(cases, WriteRecord{Time: time.Now()}, WriteRecord{Time: time.Unix(1e9, 0).In(time.FixedZone("y", -7*3600-1800))})
	for _, r := range cases {
		want, err := json.Marshal(r)
		require.NoError(t, err)
		got, err := marshalWriteRecord(r)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
}

func TestMarshalAuditEntry_IsJSONMarshal(t *testing.T) {
	var full AuditEntry
	fillFields(reflect.ValueOf(&full).Elem(), "a")
	cases := []AuditEntry{{}, full}
	for _, s := range oddStrings {
		e := full
		e.Path, e.To, e.Detail, e.Reason, e.Daemon, e.Key = s, s+"to", s+"detail", s, s, "k"+"\x00"
		e.Before, e.After = provider.Version("b"+s), ""
		e.Refused, e.Suppressed = "", 0
		cases = append(cases, e)
	}
	cases = append(cases, AuditEntry{Seq: 1<<64 - 1, Time: time.Now()})
	for _, e := range cases {
		want, err := json.Marshal(e)
		require.NoError(t, err)
		got, err := marshalAuditEntry(e)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	}
}

func TestMarshalRecords_TimeOutOfJSONRangeFailsLikeJSON(t *testing.T) {
	tm := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, jerr := json.Marshal(WriteRecord{Time: tm})
	require.Error(t, jerr)
	_, err := marshalWriteRecord(WriteRecord{Time: tm})
	assert.Error(t, err)
	_, err = marshalAuditEntry(AuditEntry{Time: tm})
	assert.Error(t, err)
}

func FuzzMarshalRecords(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s, int32(-3), uint64(9))
	}
	f.Fuzz(func(t *testing.T, s string, pid int32, seq uint64) {
		r := WriteRecord{Actor: Actor{Session: SessionID(s), PID: pid, Channel: ChannelMount}, Op: MutationOp(s), Path: s, Version: "v"}
		want, _ := json.Marshal(r)
		got, err := marshalWriteRecord(r)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
		e := AuditEntry{Seq: seq, Key: "k", Path: s, To: s, Detail: s, Refused: "FS_X", Reason: s, Suppressed: seq, Actor: r.Actor}
		want, _ = json.Marshal(e)
		got, err = marshalAuditEntry(e)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
	})
}

func BenchmarkMarshalWriteRecord(b *testing.B) {
	r := WriteRecord{Actor: Actor{Session: "s-1234", PID: 4242, Channel: ChannelMount}, Op: OpSetattr, Time: time.Now(),
		Version: "sha256:0123456789abcdef0123456789abcdef", Path: "src/cmd/go/internal/modload/load.go"}
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
	b.Run("appender", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshalWriteRecord(r)
		}
	})
}
