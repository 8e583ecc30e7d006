// Package patch owns the apply_patch language that coding agents emit: it
// parses a patch text into ordered file operations (Parse) and applies the
// hunks of one Update to a file's LF text (ApplyHunks), with the reference
// matcher's sequential cursor, anchors, end-of-file anchoring and four-pass
// fuzz ladder.
//
// The package is pure: it must not know about the filesystem, paths beyond
// the strings written in the patch, guards, sessions or line endings other
// than LF. Resolving paths, reading and writing files, CRLF handling and
// guarding each operation belong to the callers (control, policy, provider).
//
// The grammar and matching rules are documented in docs/patch-format.md; the
// scenarios under testdata/ show each rule as an input tree, a patch and the
// expected tree or error.
package patch
