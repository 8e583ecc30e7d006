package service

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dshmount/dshmount/internal/policy"
)

func TestLogFilter_UnderAndExclude(t *testing.T) {
	assert.True(t, excluded(".git", ".git/objects/ab/cd"))
	assert.True(t, excluded(".git", "vendor/x/.git/HEAD"))
	assert.False(t, excluded(".git", ".gitignore"))
	assert.True(t, excluded("*.log", "src/build.log"))
	assert.True(t, excluded("build/out", "build/out/a.o"))
	assert.False(t, excluded("build/out", "src/build/out/a.o"))

	f := logFilter{under: []string{"src"}, exclude: []string{"*.tmp"}}
	assert.True(t, f.match(policy.AuditEntry{Path: "src/a.go"}))
	assert.False(t, f.match(policy.AuditEntry{Path: "srcx/a.go"}))
	assert.False(t, f.match(policy.AuditEntry{Path: "src/a.tmp"}))
	assert.True(t, f.match(policy.AuditEntry{Path: "src/a.tmp", To: "src/a.go"}), "a rename passes when either path does")
}
