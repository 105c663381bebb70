#!/usr/bin/env bash
# iommuctl verify on a root whose records (a state directory of its own, as IOMMUD_STATE_DIRECTORY
# names one) say what iommud set: as recorded (exit 0), a value changed behind its back (exit 3,
# named with both values and when), the device removed (named as gone), a NIC setting under --root
# (not checked, exit 4), and no records at all (exit 0).
set -euo pipefail
iommuctl=${1:?usage: $0 PATH_TO_IOMMUCTL}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
root=$work/root
export IOMMUD_RUNTIME_DIRECTORY=/run/iommud-test IOMMUD_STATE_DIRECTORY=/var/lib/iommud-test
export COLUMNS=200  # each line whole, for grep (cli.terminal checks the wrapping of the others)

verify() {  # verify EXPECTED_STATUS ARGS...: the output in $work/out
  local want=$1 rc=0
  shift
  "$iommuctl" --root "$root" verify "$@" >"$work/out" 2>"$work/err" || rc=$?
  [[ $rc == "$want" ]] || fail "verify $* exited $rc, not $want: $(cat "$work/out" "$work/err")"
  [[ ! -s $work/err ]] || fail "verify $* wrote to stderr: $(cat "$work/err")"
}
record() {  # record KIND DEVICE GROUP OBJECT KEY WRITTEN RULE TIME: one record as iommud writes it
  printf '{"kind": "%s", "device": "%s", "group": %s, "object": "%s", "key": "%s", "original": "0", ' "$1" "$2" "$3" "$4" "$5"
  printf '"written": "%s", "existed": true, "rule": "%s", "rule_where": "/etc/iommud/policies.d/%s.toml:1:1", ' "$6" "$7" "$7"
  printf '"time": "%s", "irreversible": false, "ifindex": 2}' "$8"
}
expect() {  # expect TEXT: a fixed string verify printed
  grep -qF -- "$1" "$work/out" || fail "verify did not print '$1': $(cat "$work/out")"
}

mkdir -p "$root/sys/bus/pci/devices/0000:03:00.0" "$root/sys/kernel/iommu_groups/14" \
  "$root/sys/module/nvme/parameters" "$root/run/iommud-test" "$root/var/lib/iommud-test"
verify 0
expect "iommud has recorded no change on this host: nothing to verify."

echo identity >"$root/sys/kernel/iommu_groups/14/type"
echo Y >"$root/sys/module/nvme/parameters/use_threaded_interrupts"
echo "[$(record domain 0000:03:00.0 14 "group 14" type identity nvme-identity 2026-11-21T12:00:00Z),
 $(record module-param 0000:03:00.0 null nvme.use_threaded_interrupts use_threaded_interrupts 1 nvme-threads \
   2026-11-21T12:00:01Z)]" >"$root/run/iommud-test/changes.json"
verify 0
expect "as recorded  0000:03:00.0 group 14 type"
expect "as recorded  nvme.use_threaded_interrupts"
expect "2 changes iommud recorded: 2 as recorded"

# Something else set the group's type back: drift, named with the device, both values and when.
echo DMA-FQ >"$root/sys/kernel/iommu_groups/14/type"
verify 3
expect "drifted      0000:03:00.0 group 14 type"
expect "set to identity at 2026-11-21T12:00:00Z (rule nvme-identity); the host has DMA-FQ"
expect "2 changes iommud recorded: 1 drifted, 1 as recorded"
# Drift first, whatever order the records are in.
[[ $(head -1 "$work/out") == "drifted      0000:03:00.0 group 14 type" ]] || fail "drift is not first: $(cat "$work/out")"
verify 3 --json
python3 - "$work/out" <<'PY' || fail "verify --json does not name the drift: $(cat "$work/out")"
import json, sys
j = json.load(open(sys.argv[1]))
d = [r for r in j["records"] if r["state"] == "drifted"]
assert j["summary"]["drifted"] == 1 and len(d) == 1, j
assert (d[0]["device"], d[0]["set"], d[0]["now"], d[0]["set_at"]) == ("0000:03:00.0", "identity", "DMA-FQ", "2026-11-21T12:00:00Z"), d
PY

# The device removed: its change is gone, said so; the module's parameter is still as recorded.
rmdir "$root/sys/bus/pci/devices/0000:03:00.0"
verify 3
expect "gone         0000:03:00.0 group 14 type"
expect "device 0000:03:00.0 was removed"
expect "1 gone, 1 as recorded"

# A NIC setting in the state directory: read over netlink, which a --root does not have: not
# checked, and not the success status.
mkdir -p "$root/sys/bus/pci/devices/0000:03:00.0" "$root/sys/class/net/enp3s0"
echo identity >"$root/sys/kernel/iommu_groups/14/type"
echo 2 >"$root/sys/class/net/enp3s0/ifindex"
echo "[$(record rings 0000:03:00.0 14 enp3s0 rx 4096 nic-rings 2026-11-21T12:00:02Z)]" \
  >"$root/var/lib/iommud-test/changes.json"
verify 4
expect "not checked  0000:03:00.0 enp3s0 rings rx"
expect "not checked: NIC settings are read over ethtool netlink, not from a --root"
expect "3 changes iommud recorded: 1 not checked, 2 as recorded"

# The records are root's (0600): a user who cannot read them is told so, exit 1, not "nothing to verify".
# As root (CI), the user is nobody, through setpriv; unprivileged (a package's %check runs as
# nobody), the user is the one running the test and the file is made unreadable to its owner too.
chmod -R a+rX "$work"
rc=0
if [[ $EUID -eq 0 ]]; then
  chmod 0600 "$root/var/lib/iommud-test/changes.json"
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$iommuctl" --root "$root" verify >"$work/out" 2>"$work/err" || rc=$?
else
  chmod 0000 "$root/var/lib/iommud-test/changes.json"
  "$iommuctl" --root "$root" verify >"$work/out" 2>"$work/err" || rc=$?
fi
[[ $rc == 1 ]] || fail "verify as nobody exited $rc, not 1: $(cat "$work/out" "$work/err")"
grep -qF "iommuctl: cannot read what iommud recorded: $root/var/lib/iommud-test/changes.json: Permission denied (run as root)" \
  "$work/err" || fail "verify as nobody does not say why: $(cat "$work/err")"
echo "verify: all passed"
