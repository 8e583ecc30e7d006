// Package integration holds dshmount's end-to-end tests: each one starts the
// real dshmount binary on a temporary workspace, mounts it with FUSE, and
// drives real programs (shells, coreutils, sed, python, vim, git, tar) and the
// control socket against it.
//
// The tests skip with a clear reason when /dev/fuse is missing or mounting is
// not permitted; with DSH_REQUIRE_FUSE=1 (set by .ci/run) such a skip is a
// failure instead. They never touch anything outside their temporary
// directories.
package integration
