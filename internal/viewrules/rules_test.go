package viewrules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRules_GlobMatchesPathOrParent(t *testing.T) {
	cases := []struct {
		pattern string
		path    string
		want    bool
	}{
		{".git", ".git", true},
		{".git", ".git/config", true},
		{".git", "sub/.git/objects/ab", true},
		{".git", ".gitignore", false},
		{".git", "git", false},
		{"*.key", "id.key", true},
		{"*.key", "secrets/deploy.key", true},
		{"*.key", "key", false},
		{"secrets", "secrets/a/b.txt", true},
		{"secrets", "docs/secrets", true},
		{"/secrets", "docs/secrets", false},
		{"/secrets", "secrets/x", true},
		{"build/out", "build/out/a.o", true},
		{"build/out", "src/build/out", false},
		{"build/out/", "build/out", true},
		{"**/node_modules", "a/b/node_modules/x/index.js", true},
		{"**/node_modules", "node_modules", true},
		{"docs/**/*.pdf", "docs/a/b/c.pdf", true},
		{"docs/**/*.pdf", "docs/c.pdf", true},
		{"docs/**/*.pdf", "other/c.pdf", false},
		{"src/*.go", "src/main.go", true},
		{"src/*.go", "src/sub/main.go", false},
		{"src/*", "src/sub/main.go", true},
		{"[ab].txt", "a.txt", true},
		{"[ab].txt", "c.txt", false},
		{"vendor", ".", false},
		{"vendor", "", false},
	}
	for _, c := range cases {
		t.Run(c.pattern+"~"+c.path, func(t *testing.T) {
			rs, err := compileRules(Rules{Hide: []string{c.pattern}})
			require.NoError(t, err)
			got, _ := rs.classify(c.path)
			assert.Equal(t, c.want, got == Hidden)
		})
	}
}

func TestRules_BadPatternsAreErrors(t *testing.T) {
	for _, p := range []string{"", "  ", "/", "a//b", "../x", "a/./b", "[ab", "x/[", "a/../b"} {
		t.Run(p, func(t *testing.T) {
			_, err := compileRules(Rules{ReadOnly: []string{p}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--read-only")
		})
	}
}

func TestRules_HideWinsOverReadOnly(t *testing.T) {
	rs, err := compileRules(Rules{Hide: []string{"secret"}, ReadOnly: []string{"docs", "secret"}})
	require.NoError(t, err)
	cases := []struct {
		path    string
		want    Access
		pattern string
	}{
		{"secret", Hidden, "secret"},
		{"docs/secret/x", Hidden, "secret"},
		{"docs/readme.md", ReadOnly, "docs"},
		{"src/main.go", Visible, ""},
		{".", Visible, ""},
	}
	for _, c := range cases {
		got, pat := rs.classify(c.path)
		assert.Equal(t, c.want, got, c.path)
		assert.Equal(t, c.pattern, pat, c.path)
	}
}

func TestAccess_String(t *testing.T) {
	assert.Equal(t, "visible", Visible.String())
	assert.Equal(t, "read-only", ReadOnly.String())
	assert.Equal(t, "hidden", Hidden.String())
	assert.Equal(t, "Access(7)", Access(7).String())
}

func TestRules_GuardsBelowADirectory(t *testing.T) {
	rs, err := compileRules(Rules{
		Hide:     []string{"secrets/keys", "*.pem"},
		ReadOnly: []string{"/vendor/lib", "docs/**/api", "top"},
	})
	require.NoError(t, err)
	cases := []struct {
		dir  string
		want Access
	}{
		{"secrets", Hidden},     // secrets/keys lies below
		{"vendor", ReadOnly},    // vendor/lib lies below
		{"docs", ReadOnly},      // docs/**/api may lie below
		{"docs/a/b", ReadOnly},  // still may
		{"src", Visible},        // unanchored *.pem follows a moved directory
		{"vendor/lib", Visible}, // the rule covers the directory itself, not "below" only
		{"other", Visible},
		{".", Hidden},
	}
	for _, c := range cases {
		got, _ := rs.guardsBelow(c.dir)
		assert.Equal(t, c.want, got, c.dir)
	}
}

// TestRules_AClassifiedCleanPathAllocatesNothing pins that the rule check
// every FUSE request makes allocates nothing for the clean paths the mount
// passes, and splits unclean ones (the socket's) as before.
func TestRules_AClassifiedCleanPathAllocatesNothing(t *testing.T) {
	rs, err := compileRules(Rules{Hide: []string{"/.staging", "*.key"}, ReadOnly: []string{"docs/**/*.pdf"}})
	require.NoError(t, err)
	for _, rel := range []string{"", "a", "src/pkg/deep/file.go", "docs/a/b.pdf"} {
		allocs := testing.AllocsPerRun(100, func() { rs.classify(rel) })
		assert.Zero(t, allocs, "classify(%q)", rel)
	}
	cases := []struct {
		rel  string
		want []string
	}{
		{"", nil}, {".", nil}, {"/", nil}, {"a", []string{"a"}}, {"a/b", []string{"a", "b"}},
		{"/a/b/", []string{"a", "b"}}, {"a//b", []string{"a", "b"}}, {"a/./b", []string{"a", "b"}},
		{"a/../b", []string{"b"}}, {"../a", []string{"a"}}, {`a\b`, []string{"a", "b"}}, {"..", nil},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, splitRel(nil, c.rel), "splitRel(%q)", c.rel)
	}
}
