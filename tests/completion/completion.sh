#!/usr/bin/env bash
# iommuctl's completions in the real shells: bash with Debian's bash-completion (complete.bash),
# zsh with compinit in a pseudo-terminal (complete.zsh). For both: the subcommands and every
# option that `iommuctl --help` and `iommuctl SUB --help` print (so an option added without its
# completion fails here), option values, files and directories, and the devices of a host root:
# a snapshot of this host taken by iommuctl, with synthetic devices added (add_devices.sh); every
# device offered must be one `iommuctl explain` accepts, and every one it lists must be offered.
set -euo pipefail
iommuctl=${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
src=${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"

command -v zsh >/dev/null || { echo "FAIL: zsh is not installed (Debian package zsh: scripts/setup --tests)" >&2; exit 1; }
[[ -r /usr/share/bash-completion/bash_completion ]] \
  || { echo "FAIL: no bash-completion library (Debian package bash-completion: scripts/setup --tests)" >&2; exit 1; }

complete_bash() { bash --norc --noprofile "$here/complete.bash" "$src/completions/iommuctl.bash" "$1"; }
# compinit reads every function on $fpath once, then its dump.
export IOMMUD_ZCOMPDUMP=$work/zcompdump
complete_zsh() { timeout 60 zsh -f "$here/complete.zsh" "$src/completions" "$1"; }

# expect SHELL LINE WORD...: completing at the end of LINE offers exactly the WORDs.
expect() {
  local shell=$1 line=$2 got want
  shift 2
  if ! got=$("complete_$shell" "$line" | LC_ALL=C sort -u); then
    fail "$shell: completing '$line' failed"
    return
  fi
  want=$(printf '%s\n' "$@" | LC_ALL=C sort -u)
  [[ $got == "$want" ]] || fail "$shell: '$line' offers [${got//$'\n'/ }], expected [${want//$'\n'/ }]"
}

# shellcheck source=SCRIPTDIR/../support/help.sh
source "$(dirname "$0")/../support/help.sh"
# The scripts themselves: shellcheck for bash, zsh's own parser for zsh.
command -v shellcheck >/dev/null || { echo "FAIL: shellcheck is not installed (scripts/setup --tests)" >&2; exit 1; }
shellcheck -x "$src/completions/iommuctl.bash" "$here"/*.sh "$here/complete.bash" "$src/tests/support/failures.sh" || fail "shellcheck"
zsh -n "$src/completions/_iommuctl" || fail "zsh -n _iommuctl"
zsh -n "$here/complete.zsh" || fail "zsh -n complete.zsh"

mapfile -t commands < <(help_commands)
((${#commands[@]} >= 7)) || { echo "FAIL: iommuctl --help lists ${#commands[@]} subcommands: ${commands[*]}" >&2; exit 1; }

# A host root: this host as iommuctl snapshots it, plus the synthetic devices.
root=$work/host
"$iommuctl" snapshot "$work/host.tar" >/dev/null
mkdir "$root" && tar -xf "$work/host.tar" -C "$root"
"$here/add_devices.sh" "$root"
# The names and addresses iommuctl knows on that root.
mapfile -t devices < <("$iommuctl" --root "$root" status --json | python3 -c '
import json, sys
for d in json.load(sys.stdin)["devices"]:
    print(d["address"])
    for n in d["netdevs"]: print(n["name"])
    for c in d["nvme"]:
        print(c["name"])
        for ns in c["namespaces"]: print(ns["name"])')
for d in 0000:00:1e.0 0000:00:1f.6 0001:00:02.0 enpsynth0 nvme7 nvme7n1; do
  [[ " ${devices[*]} " == *" $d "* ]] || fail "iommuctl status does not list the synthetic device $d: ${devices[*]}"
done
# Every device offered is one iommuctl accepts (with the short form of an address in domain 0000).
for d in "${devices[@]}" 00:1e.0; do
  "$iommuctl" --root "$root" explain "$d" --policies "$src/policies" >/dev/null 2>"$work/err" \
    || fail "iommuctl explain $d (a device the completions offer) failed: $(cat "$work/err")"
done

mkdir "$work/pol" "$work/polx" && touch "$work/pol.toml"

for shell in bash zsh; do
  expect $shell "iommuctl " "${commands[@]}"
  mapfile -t opts < <(help_options)
  expect $shell "iommuctl --" "${opts[@]}"
  for c in "${commands[@]}"; do
    mapfile -t opts < <(help_options "$c")
    ((${#opts[@]} >= 1)) || fail "iommuctl $c --help lists no option"
    expect $shell "iommuctl $c --" "${opts[@]}"
  done
  expect $shell "iommuctl st" status
  expect $shell "iommuctl status --format " text json prometheus nfd
  expect $shell "iommuctl status --format=p" prometheus
  expect $shell "iommuctl plan --color " auto always never
  expect $shell "iommuctl --root $root explain " "${devices[@]}"
  expect $shell "iommuctl --root $root status " "${devices[@]}"
  expect $shell "iommuctl --root $root status --json --device nvme" nvme7 nvme7n1
  expect $shell "iommuctl --root=$root plan --device nvme" nvme7 nvme7n1
  expect $shell "iommuctl --root $root apply --device enps" enpsynth0
  expect $shell "iommuctl --root $root revert --device 0001" 0001:00:02.0
  # --root after the subcommand: its devices, and after the device nothing more.
  expect $shell "iommuctl explain --root $root nvme" nvme7 nvme7n1
  expect $shell "iommuctl plan --root=$root --device enps" enpsynth0
  expect $shell "iommuctl explain --measure 2 --root $root nvme7 nvme"
done

# Where the shells differ: readline inserts after the last ':' typed, zsh the whole word; bash
# offers paths whole, zsh the last component.
expect bash "iommuctl --root $root explain 00:1" 1e.0 1f.6
expect zsh "iommuctl --root $root explain 00:1" 00:1e.0 00:1f.6
expect bash "iommuctl --root $root explain 0000:00:1" 1e.0 1f.6
expect zsh "iommuctl --root $root explain 0000:00:1" 0000:00:1e.0 0000:00:1f.6
expect bash "iommuctl --root $work/po" "$work/pol" "$work/polx"
expect zsh "iommuctl --root $work/po" pol polx
expect bash "iommuctl plan --policies $work/po" "$work/pol" "$work/polx"
expect zsh "iommuctl plan --policies $work/po" pol polx
expect bash "iommuctl check $work/po" "$work/pol" "$work/pol.toml" "$work/polx"
expect zsh "iommuctl check $work/po" pol pol.toml polx
expect bash "iommuctl snapshot $work/po" "$work/pol" "$work/pol.toml" "$work/polx"
expect zsh "iommuctl snapshot $work/po" pol pol.toml polx

finish
echo "completion: bash and zsh agree with iommuctl --help and with the devices of a snapshot of this host"
