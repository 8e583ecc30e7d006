package mountinfo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:30 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw
61 22 0:52 / /tmp/a\040b rw,nosuid,nodev master:3 - fuse.dshmount dshmount rw,user_id=0
62 22 0:53 /sub /tmp/a\040b rw - fuse.dshmount other rw
bad line
`

func TestParse_FieldsEscapesAndTypes(t *testing.T) {
	es, err := Parse(strings.NewReader(table))
	require.NoError(t, err)
	require.Len(t, es, 4, "a malformed line is skipped")
	assert.Equal(t, Entry{Root: "/", MountPoint: "/sys/fs/cgroup", Device: "0:30", FSType: "cgroup2"}, es[1])
	assert.Equal(t, "/tmp/a b", es[2].MountPoint, "\\040 is a space")
	assert.Equal(t, "fuse.dshmount", es[2].FSType, "the type follows the separator after optional fields")
	assert.Equal(t, "/sub", es[3].Root)
}

func TestUnescape(t *testing.T) {
	assert.Equal(t, "plain", Unescape("plain"))
	assert.Equal(t, "a b\tc\nd\\e", Unescape(`a\040b\011c\012d\134e`))
	assert.Equal(t, `bad\9xx`, Unescape(`bad\9xx`), "not an octal escape: kept")
	assert.Equal(t, `end\04`, Unescape(`end\04`), "too short: kept")
}

func TestFind_TheRootIsMounted(t *testing.T) {
	e, ok, err := Find("/")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "/", e.MountPoint)
	assert.NotEmpty(t, e.FSType)
	_, ok, err = Find("/no/such/mount/point")
	require.NoError(t, err)
	assert.False(t, ok)
}
