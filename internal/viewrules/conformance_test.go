package viewrules

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/provider/providertest"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Subject {
		root := t.TempDir()
		fs, err := local.New(root, local.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = fs.Close() })
		v, err := New(fs, Rules{Hide: []string{"*.key"}})
		require.NoError(t, err)
		return providertest.Subject{FS: v, Root: fs.Root()}
	})
}
