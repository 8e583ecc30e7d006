#!/bin/bash
# Fuzz one target for a while on top of its committed corpus.
# Usage: fuzz.sh PKG TARGET FUZZTIME     (e.g. fuzz.sh ./patch/ FuzzParse 60s)
#
# Go 1.26's fuzzing coordinator can report its own -fuzztime deadline as a
# failure of the target: "--- FAIL: FuzzX (60.1s)" followed by nothing but
# "context deadline exceeded", with no input written (golang/go#75804, fixed in
# Go 1.27). A real finding always names the failing input and writes it under
# testdata/fuzz/. So a run whose only failure is that bare deadline is not taken
# as a finding: the target's corpus is replayed instead (go test -run, the
# deterministic gate), and that decides. Any other failure fails.
set -u
pkg=${1:?usage: fuzz.sh PKG TARGET FUZZTIME}
target=${2:?usage: fuzz.sh PKG TARGET FUZZTIME}
fuzztime=${3:?usage: fuzz.sh PKG TARGET FUZZTIME}
GO=${GO:-go}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && exit 0

# What the failure said: the lines between "--- FAIL:" and the closing "FAIL".
said=$(awk '/^--- FAIL: /{s=1; next} /^FAIL/{s=0} s' "$log" | sed 's/^[[:space:]]*//; /^$/d')
if [ "$said" = "context deadline exceeded" ] && ! grep -q 'Failing input written' "$log"; then
  echo "fuzz.sh: $target: the fuzzing engine reported its own -fuzztime deadline (golang/go#75804), no input failed; replaying the corpus"
  "$GO" test -count=1 -run "^${target}\$" "$pkg"
  exit $?
fi
exit "$rc"
