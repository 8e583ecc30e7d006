#!/usr/bin/env bash
# deps.sh [test|demo]: make sure the Debian packages the tests (default) or the
# demo drive are installed. Fast when everything is present: it only reads the
# dpkg database and PATH. As root it installs what is missing (running
# `apt-get update` first, only then); otherwise it stops at once and prints the
# exact apt-get line to run.
set -euo pipefail

what=${1:-test}

# The one list of Debian packages, each with the command that proves it is
# there (a program may also come from elsewhere, such as a pyenv python3).
#   python3     the demo's and the tests' scripts
#   vim         editor saves (integration/programs_test.go)
#   attr        getfattr / setfattr (integration/guard_test.go, programs_test.go)
#   git         the benchmark's workload
#   make        the README's commands
#   gcc         cc for go test -race (cgo) and the branch mount's build test
#   e2fsprogs   small loop filesystems
#   util-linux  setpriv, mount, umount
#   kmod        modprobe fuse (.ci/run, when /dev/fuse is missing)
#   procps      ps, for looking at stuck daemons
#   perl        the request-count workloads (integration/requests_test.go)
#   etcd-server the README's etcd (integration/several_machines_test.go)
demo_pkgs=(python3:python3)
test_pkgs=("${demo_pkgs[@]}" vim:vim attr:getfattr git:git make:make gcc:cc e2fsprogs:mke2fs
  util-linux:setpriv kmod:modprobe procps:ps perl:perl etcd-server:etcd)

case $what in
  test) wanted=("${test_pkgs[@]}") ;;
  demo) wanted=("${demo_pkgs[@]}") ;;
  *) echo "usage: $0 [test|demo]" >&2; exit 2 ;;
esac
# Without root the mounts go through fusermount3 (package fuse3).
if [ "$(id -u)" -ne 0 ]; then
  wanted+=(fuse3:fusermount3)
fi

# present PKG CMD: the package is installed, or its command is in PATH (also
# the sbin directories, which a non-root PATH often lacks).
present() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ] && return 0
  PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$2" >/dev/null 2>&1
}

missing=()
for entry in "${wanted[@]}"; do
  present "${entry%%:*}" "${entry#*:}" || missing+=("${entry%%:*}")
done

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
  echo "deps: Go is missing: install Go 1.26 from https://go.dev/dl (into /usr/local/go)" >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0

install_line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}" >&2
  echo "deps: as root, run:  apt-get update && $install_line" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: missing packages (${missing[*]}) and no apt-get on this machine; install them by hand" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 # the list is meant to split into words
apt-get install -y -qq --no-install-recommends ${missing[*]}
