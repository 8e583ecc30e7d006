package branch

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider/providertest"
)

// TestConformance runs the suite on a branch over an empty workspace; the
// files the suite places appear in the workspace, under the branch.
func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Subject {
		e := newEnv(t)
		b, err := e.m.Create("conf")
		require.NoError(t, err)
		return providertest.Subject{FS: b, Root: e.lower.Root()}
	})
}
