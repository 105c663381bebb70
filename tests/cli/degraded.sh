#!/usr/bin/env bash
# Measuring degrades, never blanks (issue 29), on this machine's own kernel: in a private mount
# namespace whose tracefs and debugfs mount points are covered by empty directories (as a host
# that mounts neither shows them), `status --measure` prints the whole status, says in one line
# why it could not measure and how to enable it, and exits 1; the missing debugfs is in
# `unreadable`. Needs unshare(1) with a mount namespace: root, or unprivileged user namespaces.
#   degraded.sh PATH_TO_IOMMUCTL
set -euo pipefail
iommuctl=$(realpath "${1:?usage: $0 PATH_TO_IOMMUCTL}")
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
command -v unshare >/dev/null || { echo "FAIL: unshare not found (util-linux)" >&2; exit 1; }
[[ -d /sys/kernel/debug && -d /sys/kernel/tracing ]] \
  || { echo "FAIL: this kernel has no /sys/kernel/debug or /sys/kernel/tracing to cover" >&2; exit 1; }

# run FORMAT: status --measure in the namespace; stdout, stderr and the exit status into $work.
run() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount --map-root-user --propagation private sh -c '
    mount -t tmpfs -o mode=0755 none /sys/kernel/debug &&
    mount -t tmpfs -o mode=0755 none /sys/kernel/tracing || exit 99
    rc=0; "$1" status --measure 0.2 --format "$2" >"$3/out" 2>"$3/err" || rc=$?
    echo $rc >"$3/rc"' sh "$iommuctl" "$1" "$work" \
    || fail "could not cover the mount points in a mount namespace (exit $?)"
}

run json
[[ $(cat "$work/rc") == 1 ]] || fail "status --measure without tracefs: exit $(cat "$work/rc"), expected 1"
lines=$(wc -l <"$work/err")
[[ $lines == 1 ]] || fail "expected one line on stderr, got $lines: $(cat "$work/err")"
grep -qF "iommuctl: not measured, so what follows has no measurements: " "$work/err" \
  || fail "stderr does not say it did not measure: $(cat "$work/err")"
grep -qF "mount -t tracefs tracefs /sys/kernel/tracing" "$work/err" \
  || fail "stderr does not say how to enable measuring: $(cat "$work/err")"
python3 - "$work/out" <<'PY' || fail "the JSON status is not whole, or lacks the unmounted debugfs"
import json, sys
status = json.load(open(sys.argv[1]))
assert status["groups"] or status["devices"], "no groups nor devices"
notes = [u for u in status["unreadable"] if u["path"] == "/sys/kernel/debug"]
assert notes and "debugfs is not mounted" in notes[0]["reason"], status["unreadable"]
PY

run text
[[ $(cat "$work/rc") == 1 ]] || fail "status --measure (text) without tracefs: exit $(cat "$work/rc"), expected 1"
grep -q '^Kernel' "$work/out" || fail "the text status was not printed: $(head -5 "$work/out")"
grep -qF "debugfs is not mounted" "$work/out" || fail "the text status does not name the unmounted debugfs"
finish
