package branch

import (
	"sort"

	"github.com/dshmount/dshmount/internal/provider"
)

// sortEntries orders directory entries by name.
func sortEntries(es []provider.DirEntry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
}
