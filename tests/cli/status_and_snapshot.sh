#!/usr/bin/env bash
# iommuctl as a user runs it: on this host, on a bad root, and through a snapshot unpacked by
# GNU tar, whose status must equal the live one.
set -euo pipefail
iommuctl=${1:?usage: $0 PATH_TO_IOMMUCTL}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The version, as bug reports quote it: the project's, alone on its line (cli/usage.sh checks the commit).
version=$("$iommuctl" --version) || fail "--version exited $?"
[[ $version =~ ^iommuctl\ [0-9]+\.[0-9]+\.[0-9]+( \(git [0-9a-f]{12}\))?$ ]] || fail "--version printed '$version'"

"$iommuctl" status >"$work/status.txt" || fail "status on this host exited $?"
grep -q '^Kernel' "$work/status.txt" || fail "status printed no Kernel line"
"$iommuctl" status --json >"$work/live.json" || fail "status --json exited $?"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["schema_version"]==1' "$work/live.json" \
  || fail "status --json is not valid JSON with schema_version 1"

mkdir "$work/empty"
if "$iommuctl" --root "$work/empty" status 2>"$work/err.txt"; then fail "status on an empty root succeeded"; fi
grep -q "$work/empty/proc/sys/kernel/osrelease: No such file or directory" "$work/err.txt" \
  || fail "the error does not name the path and the reason: $(cat "$work/err.txt")"

# Without root: show what could be read and name what could not.
mini="$work/mini"
mkdir -p "$mini/proc/sys/kernel" "$mini/sys/kernel/debug/swiotlb" "$mini/sys/bus/pci/devices"
echo 6.1.0-56-amd64 >"$mini/proc/sys/kernel/osrelease"
echo 32768 >"$mini/sys/kernel/debug/swiotlb/io_tlb_nslabs"
chmod 0400 "$mini/sys/kernel/debug/swiotlb/io_tlb_nslabs"
chmod -R a+rX "$work" && chmod 0400 "$mini/sys/kernel/debug/swiotlb/io_tlb_nslabs"
if [[ $EUID -eq 0 ]]; then
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$iommuctl" --root "$mini" status >"$work/nonroot.txt" \
    || fail "status as nobody exited $?"
  grep -q "Not readable" "$work/nonroot.txt" || fail "status as nobody does not say what it could not read"
  grep -q "$mini/sys/kernel/debug/swiotlb/io_tlb_nslabs: Permission denied" "$work/nonroot.txt" \
    || fail "status as nobody does not name the unreadable file: $(cat "$work/nonroot.txt")"
else
  echo "FAIL: this test must run as root to check the non-root view with setpriv" >&2
  exit 1
fi

# A hostile root: a link out of it, a link to a device, a FIFO. status reads none of them and ends
# (timeout only bounds a failure: the old reader hung on the FIFO); the snapshot holds no byte
# from outside the root and only root can read it.
hostile="$work/hostile"
mkdir -p "$hostile/proc/sys/kernel" "$hostile/sys/bus/pci/devices"
echo 6.1.0-56-amd64 >"$hostile/proc/sys/kernel/osrelease"
echo "OUTSIDE-SECRET" >"$work/outside"
ln -s "$work/outside" "$hostile/proc/cmdline"
ln -s /dev/zero "$hostile/proc/version"
mkfifo "$hostile/proc/version_signature"
timeout 60 "$iommuctl" --root "$hostile" status >"$work/hostile.txt" || fail "status on a hostile root exited $?"
if grep -q OUTSIDE-SECRET "$work/hostile.txt"; then fail "status on a hostile root read a file outside it"; fi
grep -q "$hostile/proc/version_signature: a FIFO, not a regular file: refused" "$work/hostile.txt" \
  || fail "status on a hostile root does not name the refused FIFO: $(cat "$work/hostile.txt")"
(umask 022 && timeout 60 "$iommuctl" --root "$hostile" snapshot --no-redact "$work/hostile.tar" >/dev/null) \
  || fail "snapshot of a hostile root exited $?"
[[ $(stat -c %a "$work/hostile.tar") == 600 ]] || fail "the snapshot is mode $(stat -c %a "$work/hostile.tar"), not 600"
if grep -qa OUTSIDE-SECRET "$work/hostile.tar"; then fail "the snapshot holds a file from outside the root"; fi

"$iommuctl" snapshot --no-redact "$work/snap.tar" >/dev/null || fail "snapshot exited $?"
mkdir "$work/snap"
tar -xf "$work/snap.tar" -C "$work/snap"
"$iommuctl" --root "$work/snap" status --json >"$work/snap.json"
python3 - "$work/live.json" "$work/snap.json" <<'PY' || fail "status of the unpacked snapshot differs from the live status"
import json, sys
live, snap = (json.load(open(p)) for p in sys.argv[1:3])
# Permission failures cannot be replayed from a tar; everything else must be identical.
live.pop("unreadable"); snap.pop("unreadable")
if live != snap:
    for k in live:
        if live[k] != snap.get(k):
            print("differs:", k, json.dumps(live[k])[:400], "!=", json.dumps(snap.get(k))[:400])
    sys.exit(1)
PY

"$iommuctl" snapshot "$work/redacted.tar" >/dev/null || fail "redacted snapshot exited $?"
mkdir "$work/redacted"
tar -xf "$work/redacted.tar" -C "$work/redacted"
grep -q 'redacted: yes' "$work/redacted/SNAPSHOT" || fail "SNAPSHOT does not say it is redacted"
"$iommuctl" --root "$work/redacted" status >/dev/null || fail "status of a redacted snapshot failed"
# Counting needs the running kernel: under --root each --measure says so in one line, exit 2, and
# apply changes nothing (it would say "done:" or "nothing to do" on stdout).
for cmd in "status --measure 1" "apply --measure 1"; do
  rc=0
  # shellcheck disable=SC2086  # $cmd is words
  "$iommuctl" --root "$work/redacted" $cmd >"$work/measure.out" 2>"$work/measure.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$cmd under --root exited $rc, not 2"
  [[ $(wc -l <"$work/measure.err") -eq 1 ]] && grep -q "cannot work under --root" "$work/measure.err" \
    || fail "$cmd under --root did not say in one line why: $(cat "$work/measure.err")"
  [[ ! -s $work/measure.out ]] || fail "$cmd under --root printed: $(cat "$work/measure.out")"
done
echo "cli: status, errors and snapshot round trip ok"
