// Package merge owns the three-way line merge: Merge takes a base and two
// texts changed from it and returns the merged text or the conflicted
// regions, with the semantics of `git merge-file -p ours base theirs`
// (git 2.39: Myers line diff, XDL_MERGE_ZEALOUS_ALNUM, plain markers).
//
// Lines are byte strings ending in '\n' (the last may lack it); "\r\n" is
// just a line's last two bytes, so CRLF files merge as git merges them.
// Changes that touch (adjacent lines, or an insertion next to a change)
// conflict, as in git; identical changes on both sides do not.
//
// Cost: the sides are split against the base (their whole lines shared
// with it at both ends are found by comparing bytes), and each diff gives
// classes only to the lines between its pair's common ends, hashing the
// other lines once to count them; a small change in a large text so costs
// a few passes over its bytes and lines, not a table entry per line.
//
// The package is pure: it must not know about files, paths, guards,
// sessions or stores. Reading the three versions and writing the result
// belong to the callers (control, fuse branches).
//
// The corpus under testdata/ was written by gen_corpus.go from git's own
// answers (go generate); the test checks every triple against it.
package merge

//go:generate go run gen_corpus.go
