package control

import "net"

// newUnlinkLessListener listens on path and leaves the socket file behind on
// Close, as a crashed daemon would.
func newUnlinkLessListener(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	return ln, nil
}
