// Package local is the host-disk backend of the provider seam: a
// provider.FileSystem rooted at one workspace directory.
//
// It owns path resolution inside the workspace (canonical real-path keys, the
// sandbox fence against "..", absolute paths and symbolic links that lead
// outside the root), text decoding and binary rejection, the per-target
// mutation locks, atomic publication (temp file, fsync, rename, directory
// fsync) and the content versions shared with the FUSE layer (Versioner:
// SHA-256 of the bytes, a stat-keyed digest cache for reports, a fresh hash
// for every guard).
//
// Every read and every mutation goes through a directory descriptor opened
// on the root with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS), so a
// symbolic link swapped in between resolution and I/O cannot make the call
// leave the workspace.
//
// It must not know about the policy store, FUSE or the control socket:
// guards arrive as optional arguments, and the persistent digest cache comes
// in through provider.DigestCache.
package local
