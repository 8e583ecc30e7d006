// Package fsx is a file-system exerciser in the spirit of fsx: workers
// perform seeded random operations (write at an offset, truncate, read and
// compare, mmap read and write, rename between a few names, fsync, close
// and reopen, fallocate, punch hole, copy_file_range, hard link and unlink)
// on files under one directory while keeping an in-memory model of every
// file, and compare every read with the model. A mismatch stops the run with
// the seed and the log of the last operations.
//
// An optional Remote lets another path (dshmount's control socket) replace
// files: inline, on a file the worker closed first, with the model updated
// after the acknowledgement; and concurrently, on a separate file set whose
// every version carries its sequence number, which the workers read through
// the directory and check against the acknowledged range.
//
// An operation the file system does not implement (mmap's ENODEV,
// fallocate's EOPNOTSUPP, copy_file_range's EXDEV or EINVAL) is turned off
// at its first refusal and reported in Result.Unsupported.
//
// The package knows only directories and the Remote interface; it must not
// know dshmount's daemon, socket protocol or mount.
package fsx
