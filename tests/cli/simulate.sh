#!/usr/bin/env bash
# iommuctl apply --simulate on the README's captured host (docs/examples/workstation.tar), as a
# user runs it: what would be done, refused and left to advise, the exit status (0, or 3 when
# something would be refused), and afterwards the snapshot byte for byte as it was and no state
# directory made. iommud --once --root refuses in one line, exit 2, and changes nothing either.
#   simulate.sh PATH_TO_IOMMUCTL SOURCE_DIR PATH_TO_IOMMUD
set -euo pipefail
iommuctl=$(realpath "${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR PATH_TO_IOMMUD}")
src=$(cd "${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR PATH_TO_IOMMUD}" && pwd)
iommud=$(realpath "${3:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR PATH_TO_IOMMUD}")
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
snap=$work/snap
mkdir "$snap"
tar -xf "$src/docs/examples/workstation.tar" -C "$snap"
chmod 0755 "$work"
# Every entry of the tree with its type, mode, size and link target, and every file's digest.
tree() {
  (cd "$snap" && find . -printf '%y %m %s %p %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum)
}
tree >"$work/before"

# simulate NAME STATUS ARGS...: iommuctl --root SNAP apply --simulate ARGS exits STATUS; its text,
# lines joined (the prose wraps), in NAME.txt.
simulate() {
  local name=$1 want=$2 rc=0
  shift 2
  "$iommuctl" --root "$snap" apply --simulate "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  ((rc == want)) || fail "apply --simulate $*: exit status $rc, expected $want: $(cat "$work/$name.err")"
  tr '\n' ' ' <"$work/$name.out" | tr -s ' ' >"$work/$name.txt"
}
# says NAME TEXT: the joined text of NAME holds TEXT (a fixed string).
says() { grep -qF -- "$2" "$work/$1.txt" || fail "$1 does not say '$2': $(cat "$work/$1.out")"; }

# The shipped policies at start: the Thunderbolt NIC's coalescing would be set (assumed taken: a
# snapshot holds no ethtool values), the shared NVMe group's identity is advice; nothing refused.
simulate start 0
says start "Rehearsal (the rules of Linux 6.12.38; nothing is written, no lock is taken)"
says start "Would be done 0000:08:00.0 enp8s0 enp8s0 coalesce rx-frames: unknown -> 0"
says start "enp8s0 coalesce rx-usecs: unknown -> 128"
says start "no current value was read (a snapshot holds no ethtool values), so the write is assumed to be taken"
says start "Left to advise 0000:04:00.0 nvme1 group 14 type: DMA-FQ -> identity"
says start "4 would be done, 0 refused, 1 left to advise; nothing was written."

# Policies that ask identity of the scratch pair's group, and of the untrusted Thunderbolt NIC:
# the first is taken after unbinding both drives (6.12 changes a group of several devices, its
# ports stay with pcieport), the second refused, by the kernel (EINVAL) and by iommud.
mkdir -m 0755 "$work/pol"
cat >"$work/pol/50-test.toml" <<'TOML'
[[rule]]
name = "scratch-identity"
description = "identity for the scratch NVMe pair"
when = "always"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"

[[rule]]
name = "tb-identity"
description = "identity for the Thunderbolt NIC"
when = "always"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
untrusted = true
TOML
simulate refused 3 --policies "$work/pol"
says refused "group 14 type: DMA-FQ -> identity after unbinding nvme from 0000:04:00.0, nvme from 0000:05:00.0; rebound after the write"
says refused "Would be refused"
says refused "the kernel would refuse the write: a device of the group is untrusted or needs another type: EINVAL"

# Nothing was written: the snapshot is as it was, and no state directory was made in it.
tree >"$work/after"
diff -u "$work/before" "$work/after" >"$work/tree.diff" || fail "apply --simulate changed the snapshot: $(head -20 "$work/tree.diff")"
for d in run/iommud var/lib/iommud; do [[ ! -e $snap/$d ]] || fail "apply --simulate made $d"; done

# Without --simulate, apply under --root refuses and names it.
rc=0
"$iommuctl" --root "$snap" apply >/dev/null 2>"$work/apply.err" || rc=$?
((rc == 1)) || fail "apply under --root: exit status $rc, expected 1"
grep -qF "changes the running system; --root only reads (try \`iommuctl apply --simulate\`)" "$work/apply.err" ||
  fail "apply under --root: $(cat "$work/apply.err")"

# iommud --once --root: one line, exit 2, nothing touched.
rc=0
"$iommud" --once --root "$snap" >"$work/iommud.out" 2>"$work/iommud.err" || rc=$?
((rc == 2)) || fail "iommud --once --root: exit status $rc, expected 2: $(cat "$work/iommud.err")"
[[ $(wc -l <"$work/iommud.err") -eq 1 && ! -s $work/iommud.out ]] || fail "iommud --once --root said more than one line: $(cat "$work/iommud.err" "$work/iommud.out")"
grep -qF "rehearse with iommuctl apply --root $snap --simulate" "$work/iommud.err" || fail "iommud --once --root: $(cat "$work/iommud.err")"
tree >"$work/after"
diff -q "$work/before" "$work/after" >/dev/null || fail "iommud --once --root changed the snapshot"
finish
echo "ok"
