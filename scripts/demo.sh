#!/usr/bin/env bash
# make demo: mount the example workspace with the embedded defaults and show the
# guard at work. Everything lives in a temporary directory removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/dshmount}
work=$(mktemp -d /tmp/dshmount-demo.XXXXXX)
src=$work/workspace mnt=$work/mnt state=$work/state
cp -a examples/workspace "$src"
mkdir -p "$mnt"
export DSH_SOCKET=$state/run/control.sock

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# quote prints one argument as a shell would need it typed.
quote() {
  case $1 in
    '' | *[!A-Za-z0-9_./=:@%+,-]*) printf "'%s'" "${1//\'/\'\\\'\'}" ;;
    *) printf '%s' "$1" ;;
  esac
}
# show prints a command with its quoting, then runs it.
show() {
  local sep='$'
  for a in "$@"; do printf '%s ' "$sep"; quote "$a"; sep=''; done
  printf '\n'
  "$@"
}

cleanup() {
  if [ -n "${serve_pid:-}" ] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -INT "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if grep -qs " $mnt " /proc/mounts; then "$BIN" unmount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step "Mount $src at $mnt"
"$BIN" serve --state "$state" "$src" "$mnt" >"$work/serve.out" 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 1 300); do
  grep -q '^ready' "$work/serve.out" 2>/dev/null && break
  if ! kill -0 "$serve_pid" 2>/dev/null; then cat "$work/serve.log" >&2; echo "serve exited" >&2; exit 1; fi
  sleep 0.1
done
grep -q '^ready' "$work/serve.out" || { cat "$work/serve.log" >&2; echo "serve not ready" >&2; exit 1; }
cat "$work/serve.out"
show ls -la "$mnt"
show "$BIN" status

step "The agent opens a session and reads src/greet.py over the socket"
DSH_SESSION=$("$BIN" session open --name agent)
export DSH_SESSION
echo "session: $DSH_SESSION"
show "$BIN" read src/greet.py

step "The agent edits it (guarded by the version it read)"
show "$BIN" edit src/greet.py --old '"Hello, "' --new '"Hi there, "'
show cat "$mnt/src/greet.py"

step "A person's shell changes the same file through the mount"
show sh -c "echo '# tweaked by hand' >> '$mnt/src/greet.py'"
show python3 "$mnt/src/greet.py"

step "The agent's next edit still rests on the version it saw: refused"
set +e
show "$BIN" edit src/greet.py --old '"world"' --new '"dshmount"'
code=$?
set -e
echo "exit status: $code (1 = filesystem error)"
[ "$code" -eq 1 ] || { echo "expected FS_STALE_VERSION" >&2; exit 1; }

step "The agent reads again and retries: accepted"
show "$BIN" read src/greet.py
show "$BIN" edit src/greet.py --old '"world"' --new '"dshmount"'
show python3 "$mnt/src/greet.py"

step "The audit log, newest first"
show "$BIN" log --limit 10

step "Unmount cleanly"
kill -INT "$serve_pid"
wait "$serve_pid"
serve_pid=
grep -qs " $mnt " /proc/mounts && { echo "still mounted" >&2; exit 1; }
echo "unmounted; backing file:"
cat "$src/src/greet.py"
