#!/usr/bin/env bash
# iommuctl status DEVICE on the captured host of the README (docs/examples/workstation.tar): one
# device in full, by name, by address with and without its domain, and through --device, as text
# and as JSON; an unknown one is one line with the nearest names, exit 1.
set -euo pipefail
iommuctl=$(realpath "${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}")
src=$(cd "${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}" && pwd)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
mkdir "$work/snap"
tar -xf "$src/docs/examples/workstation.tar" -C "$work/snap"
cd "$work"
show() { "$iommuctl" --root snap status "$@" --policies "$src/policies"; }

# The same device by its NVMe name, its address, its short address and --device.
show nvme1 >name.txt 2>err.txt || fail "status nvme1 exited $?: $(cat err.txt)"
for l in 'Device   0000:04:00.0 nvme1' 'Driver   nvme' 'Trust    ' 'Group    ' 'Exposure ' 'Findings' 'Rules' \
  'Changed by iommud'; do
  grep -qF -- "$l" name.txt || fail "status nvme1 has no line '$l': $(cat name.txt)"
done
for args in "0000:04:00.0" "04:00.0" "--device nvme1"; do
  # shellcheck disable=SC2086 # the words of --device NAME
  show $args >other.txt 2>err.txt || fail "status $args exited $?: $(cat err.txt)"
  cmp -s name.txt other.txt || fail "status $args differs from status nvme1: $(diff name.txt other.txt)"
done
# Only that device: not the whole host's sections.
if grep -q '^Verdict\|^Groups' name.txt; then fail "status nvme1 prints the whole host: $(cat name.txt)"; fi

# A NIC by its interface name, as JSON.
show enp8s0 --json >nic.json 2>err.txt || fail "status enp8s0 --json exited $?: $(cat err.txt)"
python3 - nic.json <<'PY' || fail "status enp8s0 --json: $(cat nic.json)"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema_version"] == 1, j["schema_version"]
assert j["device"]["address"] == "0000:08:00.0", j["device"]["address"]
assert j["device"]["netdevs"][0]["name"] == "enp8s0"
assert isinstance(j["rules"], list) and isinstance(j["findings"], list) and isinstance(j["changes"], list)
assert j["exposure"]["level"] in ("all-memory", "mapped-window", "mapped", "mapped-subpage", "none", "unknown")
PY

# An unknown device: one line, the nearest names, exit 1, nothing on stdout.
rc=0
show nvme9 >out.txt 2>err.txt || rc=$?
((rc == 1)) || fail "status nvme9 exited $rc, not 1"
[[ $(wc -l <err.txt) -eq 1 ]] || fail "status nvme9 says more than one line: $(cat err.txt)"
grep -qF "iommuctl: no device nvme9 on this host; the nearest: nvme0, nvme1, nvme2" err.txt \
  || fail "status nvme9 does not name the nearest devices: $(cat err.txt)"
[[ ! -s out.txt ]] || fail "status nvme9 printed on stdout: $(cat out.txt)"
rc=0
show frobnicator >out.txt 2>err.txt || rc=$?
((rc == 1)) || fail "status frobnicator exited $rc, not 1"
grep -qF "iommuctl: no device frobnicator on this host (" err.txt || fail "status frobnicator: $(cat err.txt)"

# A whole-host format with a device is a usage error.
rc=0
show nvme1 --brief >out.txt 2>err.txt || rc=$?
((rc == 2)) || fail "status nvme1 --brief exited $rc, not 2"
finish
