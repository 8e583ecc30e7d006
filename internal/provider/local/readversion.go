package local

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// readVersioned reads the whole probed regular file and returns its bytes
// with the version of exactly those bytes: the guard of an edit or a patch
// is checked against the content the edit then transforms, read once (a
// hash and then a second read would read the file twice). Like
// Versioner.Fresh, a file whose stat moved while it was read is read again
// (at most version.HashAttempts times), and the digest is remembered only when the
// stat held still.
func (fs *FS) readVersioned(ctx context.Context, p *probe) ([]byte, provider.Version, error) {
	before := p.st // taken after the open, before any read
	for attempt := 1; ; attempt++ {
		start := fs.vers.Now()
		data, err := p.readAll(ctx)
		if err != nil {
			return nil, "", err
		}
		ver := version.OfBytes(data)
		var after unix.Stat_t
		if err := retryEINTR0(func() error { return unix.Fstat(int(p.file.Fd()), &after) }); err != nil {
			return nil, "", ioFailure(p.op, p.disp, pathErr("fstat", p.rel, err))
		}
		if version.StatKeyOf(&after) == version.StatKeyOf(&before) {
			fs.vers.RememberVersion(&after, ver, start)
			return data, ver, nil
		}
		if attempt == version.HashAttempts {
			return data, ver, nil
		}
		before = after
	}
}
