package seen

import (
	"runtime"

	"github.com/dshmount/dshmount/internal/provider"
)

func providerVersion(s string) provider.Version { return provider.Version(s) }

// runtimeMem is the live heap after a collection.
type runtimeMem struct{ heap int64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = int64(ms.HeapAlloc)
}
