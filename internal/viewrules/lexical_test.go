package viewrules

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestLexicalRel(t *testing.T) {
	cases := []struct {
		root, p, cwd string
		want         string
		ok           bool
	}{
		{"/ws", "/ws", "", ".", true},
		{"/ws/", "/ws/a/../b", "", "b", true},
		{"/ws", "/wsx/a", "", "", false},
		{"/ws", "/etc/passwd", "", "", false},
		{"", "/ws/a", "", "", false}, // root unknown: only relative paths map
		{"", "a/b", "", "a/b", true},
		{"/ws", "b", "/ws/a", "a/b", true},
		{"/ws", "../b", "a", "b", true},
		{"/ws", "../../b", "a", "", false},
		{"/ws", "b", "/elsewhere", "", false},
	}
	for _, c := range cases {
		got, ok := LexicalRel(c.root, c.p, provider.ResolveOptions{Cwd: c.cwd})
		assert.Equal(t, c.ok, ok, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
}
