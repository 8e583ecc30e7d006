#!/bin/bash
# Build the public judges from their public repositories into $JUDGES
# (default /tmp/dsh-judges): pjdfstest (github.com/pjd/pjdfstest) and
# xfstests' fsx (github.com/kdave/xfstests). Run as root on Debian/Ubuntu
# (it installs the build packages); takes about 3 minutes.
# Usage: build.sh [JUDGES]
# PJDFSTEST_GIT and XFSTESTS_GIT may name existing git directories (a clone's
# .git or a bare mirror) instead of cloning.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
JUDGES=${1:-${JUDGES:-/tmp/dsh-judges}}
mkdir -p "$JUDGES/src" "$JUDGES/pjdfstest" "$JUDGES/xfstests"
apt-get install -y autoconf automake libtool gcc make perl libaio-dev liburing-dev git bc
gitdir() { # gitdir REPO NAME VAR: the git directory of REPO, cloned unless VAR names one
  if [ -n "${!3:-}" ]; then echo "${!3}"; return; fi
  [ -d "$JUDGES/src/$2/.git" ] || git clone -q --depth 1 "https://github.com/$1" "$JUDGES/src/$2" >&2
  echo "$JUDGES/src/$2/.git"
}
pjd_git=$(gitdir pjd/pjdfstest pjdfstest PJDFSTEST_GIT)
xfs_git=$(gitdir kdave/xfstests xfstests XFSTESTS_GIT)
git --git-dir="$pjd_git" archive HEAD | tar -x -C "$JUDGES/pjdfstest"
git --git-dir="$xfs_git" archive HEAD ltp include lib m4 src/global.h src/statx.h | tar -x -C "$JUDGES/xfstests"
(cd "$JUDGES/pjdfstest" && autoreconf -ifs && ./configure && make pjdfstest)
mkdir -p "$JUDGES/xfstests/fsxbuild"
cp "$here/fsx-config.h" "$JUDGES/xfstests/fsxbuild/config.h"
(cd "$JUDGES/xfstests" && gcc -O2 -o fsxbuild/fsx ltp/fsx.c -Ifsxbuild -Isrc -Iinclude -DAIO -DURING \
  -DHAVE_COPY_FILE_RANGE -DFALLOCATE -laio -luring -lpthread)
echo "built $JUDGES/pjdfstest/pjdfstest and $JUDGES/xfstests/fsxbuild/fsx"
