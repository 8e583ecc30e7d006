package control

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDocs_ProtocolListsEveryMethod keeps docs/protocol.md in step with the
// method table: every method the server dispatches has a row there.
func TestDocs_ProtocolListsEveryMethod(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	require.NoError(t, err)
	methods := (&Server{}).handlers()
	require.Greater(t, len(methods), 20)
	for name := range methods {
		assert.Contains(t, string(b), "| `"+name+"` |", "docs/protocol.md has no row for %s", name)
	}
}
