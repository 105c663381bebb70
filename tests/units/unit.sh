#!/usr/bin/env bash
# A configured unit (iommud.service, iommud-early.service) as systemd reads it: `systemd-analyze verify` (which also checks
# that ExecStart= exists: the test points it at a stand-in, as the daemon may not be built or
# installed), and `systemd-analyze security --offline=yes` with an exposure of at most 2.2 (or as given).
# Usage: unit.sh CONFIGURED_UNIT [THRESHOLD_IN_TENTHS]
set -euo pipefail
unit=${1:?usage: unit.sh CONFIGURED_UNIT [THRESHOLD_IN_TENTHS]}
threshold=${2:-22}  # tenths: 2.2
command -v systemd-analyze >/dev/null || { echo "FAIL: systemd-analyze not found (Debian package systemd)" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '#!/bin/sh\nexit 0\n' >"$dir/iommud"
chmod +x "$dir/iommud"
name=$(basename "$unit")
grep -qE '^ExecStart=/[^ ]*/iommud( .*)?$' "$unit" || { echo "FAIL: $unit: no ExecStart=/.../iommud line" >&2; exit 1; }
sed -E "s|^ExecStart=/[^ ]*/iommud( .*)?$|ExecStart=$dir/iommud\1|" "$unit" >"$dir/$name"

fail=0
# verify also loads the units this one names (network-pre.target, multi-user.target) from the host.
if ! out=$(systemd-analyze verify --man=no "$dir/$name" 2>&1) || grep -q 'iommud' <<<"$out"; then
  echo "FAIL: systemd-analyze verify:" >&2
  echo "$out" >&2
  fail=1
else
  echo "ok: systemd-analyze verify"
fi

if ! out=$(systemd-analyze security --offline=yes --threshold=$threshold --no-pager "$dir/$name" 2>&1); then
  echo "FAIL: systemd-analyze security: exposure above ${threshold:0:1}.${threshold:1}:" >&2
  echo "$out" >&2
  fail=1
else
  echo "ok: $(grep -o 'Overall exposure level.*' <<<"$out")"
fi
exit $fail
