// Package daemon opens what a dshmount daemon serves and builds its
// service: the policy store the --store URL names (Badger or etcd), the
// workspace directory on the host disk, the view's rules, the branches,
// the guarded engine, the process bindings and the tree watcher. The
// program hands what Open returns to the mount and the control socket; it
// never builds the core itself.
//
// It must not know the transports: the mount's cache drops and caller
// resets, and the branch mounts, come in as functions and interfaces.
package daemon
