package fuse

import (
	"path"

	"golang.org/x/sys/unix"
)

// maxDotGitFile bounds the bytes of a ".git" file read to learn the git
// directory it points to ("gitdir: DIR\n").
const maxDotGitFile = 4096

// learnGitDir reads the ".git" regular file rel (looked up, or closed after
// a write through the mount) and tells the guard's GitDirs the git
// directory it points to (policy.GitDirs.Learn). Only names ".git" are
// read, so other lookups and closes cost a string compare. Nothing is
// learned when the guard covers git directories (serve --guard-git).
func (m *mountState) learnGitDir(rel string, st *unix.Stat_t) {
	if path.Base(rel) != ".git" || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	z := m.cfg.Engine.Zones()
	if z.GitDirs == nil || z.GuardGit {
		return
	}
	fd, err := m.be.open(rel, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	buf := make([]byte, maxDotGitFile)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil || n <= 0 {
		return
	}
	z.GitDirs.Learn(rel, buf[:n])
}
