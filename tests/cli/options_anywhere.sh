#!/usr/bin/env bash
# Options anywhere, as systemctl takes them: every subcommand run with its options after it (the
# reference), with the main command's --root after the subcommand, and with the subcommand's
# options before it must print the same and exit the same. On the captured host of the README
# (docs/examples/workstation.tar).
set -euo pipefail
iommuctl=$(realpath "${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}")
src=$(cd "${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/snap"
tar -xf "$src/docs/examples/workstation.tar" -C "$work/snap"
cd "$work"
pol=$src/policies
checked=0

run() {  # run NAME ARGS...: stdout, stderr and the exit status into NAME.*
  local name=$1 rc=0
  shift
  "$iommuctl" "$@" >"$name.out" 2>"$name.err" || rc=$?
  echo "$rc" >"$name.rc"
  # The one value that is the clock's, not the options': the textfile's time of writing.
  sed -i 's/^\(iommud_last_update_timestamp_seconds\) [0-9]*$/\1 T/' "$name.out"
}
same() {  # same SUB "SUBCOMMAND OPTIONS" "POSITIONALS": three spellings, one result
  local sub=$1 opts=$2 pos=$3
  # shellcheck disable=SC2086 # the option lists are word lists
  run ref --root snap "$sub" $opts $pos
  # shellcheck disable=SC2086
  run after "$sub" $opts $pos --root snap
  # shellcheck disable=SC2086
  run before $opts --root snap "$sub" $pos
  for form in after before; do
    for part in out err rc; do
      if ! cmp -s "ref.$part" "$form.$part"; then
        echo "FAIL: iommuctl $sub $opts $pos: the options $form the subcommand change its $part:" >&2
        diff -u "ref.$part" "$form.$part" >&2 || true
        exit 1
      fi
    done
  done
  checked=$((checked + 1))
}

same status "" ""
same status "--json" ""
same status "--format=prometheus" ""
same status "--format nfd --color never" ""
same status "--json --policies $pol" "nvme1"
same status "--device nvme1 --color never --policies $pol" ""
same plan "--policies $pol" ""
same plan "--json --hotplug --policies $pol --device nvme1" ""
same plan "--boot --color always --policies $pol" ""
same explain "--json --policies $pol" "nvme1"
same explain "--hotplug --color=never" "enp8s0"
same check "" "$pol"
same apply "--hotplug --device nvme1 --policies $pol" ""
cp ref.err apply.err
same revert "--device nvme1" ""
same snapshot "--no-redact" "again.tar"
same verify "--json --color never" ""
# The reference runs really ran: status printed the host, explain the device, apply refused.
grep -q '^Device 0000:04:00.0' <("$iommuctl" --root snap explain nvme1 --policies "$pol") || { echo "FAIL: explain" >&2; exit 1; }
grep -q 'changes the running system; --root only reads' apply.err || { echo "FAIL: apply: $(cat apply.err)" >&2; exit 1; }
# A subcommand's option before another subcommand is still refused, with CLI11's message.
if "$iommuctl" --no-redact status 2>err.txt >/dev/null; then echo "FAIL: --no-redact accepted by status" >&2; exit 1; fi
grep -q -- '--no-redact' err.txt || { echo "FAIL: unhelpful error: $(cat err.txt)" >&2; exit 1; }
echo "$checked passed, 0 failed"
