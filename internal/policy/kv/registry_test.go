package kv_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

func TestRegistry_OpensByScheme(t *testing.T) {
	var r kv.Registry
	var got []string
	open := func(name string) kv.OpenFunc {
		return func(_ context.Context, rest string) (kv.Store, error) {
			got = append(got, name+" "+rest)
			return nil, nil
		}
	}
	r.Register("mem", open("mem"))
	r.Register("net", open("net"))
	assert.Equal(t, []string{"mem", "net"}, r.Schemes())
	_, err := r.Open(context.Background(), "net://h:1/p")
	require.NoError(t, err)
	_, err = r.Open(context.Background(), "mem:///x")
	require.NoError(t, err)
	assert.Equal(t, []string{"net h:1/p", "mem /x"}, got)
}

func TestRegistry_RefusesUnknownSchemeAndMalformedURL(t *testing.T) {
	var r kv.Registry
	r.Register("mem", func(context.Context, string) (kv.Store, error) { return nil, nil },
		func(rest string) error {
			if rest == "bad" {
				return kv.ErrBadURL
			}
			return nil
		})
	cases := []struct {
		url  string
		want error
	}{
		{"/abs/path", kv.ErrBadURL},
		{"mem:/x", kv.ErrBadURL},
		{"MEM://x", kv.ErrBadURL},
		{"mem://bad", kv.ErrBadURL},
		{"disk:///x", kv.ErrUnknownScheme},
	}
	for _, c := range cases {
		require.ErrorIs(t, r.Check(c.url), c.want, c.url)
		_, err := r.Open(context.Background(), c.url)
		require.ErrorIs(t, err, c.want, c.url)
		assert.ErrorContains(t, err, "mem", "the error names the known schemes: "+c.url)
	}
}

func TestRegistry_RegisterTwicePanics(t *testing.T) {
	var r kv.Registry
	r.Register("mem", nil)
	assert.Panics(t, func() { r.Register("mem", nil) })
	assert.Panics(t, func() { r.Register("Bad Scheme", nil) })
}
