package local

import (
	"testing"

	"github.com/dshmount/dshmount/internal/provider/providertest"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providertest.Subject {
		fs, root := newTestFS(t, Options{})
		return providertest.Subject{FS: fs, Root: root}
	})
}
