"""The package scenario: the Debian package (scripts/build-deb) installed, upgraded, removed and
purged with dpkg in a guest that runs systemd as PID 1 (packaging/README.md says what each step
must do; this checks it).

In one boot (6.12, VT-d CM=0), the guest:
1. gives the e1000e an address (a NIC in use) and records the paths the package could leave
   behind (SNAPSHOT_PRUNE and scan_dirs() below say which);
2. seeds an admin policy, as a reinstall after `dpkg -r` would find it: apply mode,
   when = "always", the e1000e's rx ring at its maximum. A ring change resets the link, and the
   NIC is in use: the daemon's start must skip it and say so;
3. `dpkg -i`: `dpkg -L` against package-files.txt, `systemd-analyze verify` of the installed
   units, iommud.service enabled and active (dpkg waits for READY=1), iommud-early.service not
   enabled, org.iommud1 on the bus, `iommuctl status`, dpkg's database clean (the update-initramfs
   trigger); the rings and the link's carrier count unchanged;
4. `dpkg -i` again (an upgrade): the service restarted (a new main PID);
5. `dpkg -r`: the service stopped, binaries and units gone, iommud.conf and the admin policy kept;
6. `dpkg -P`: every path recorded in 1. as it was, nothing of iommud left.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import scenarios
import vmlib

EXPECTED_FILES = vmlib.HERE / "package-files.txt"
NIC = "0000:04:00.0"

ADMIN_POLICY = """[[rule]]
name = "vm-test-rx-ring"
description = "the largest rx ring on the guest's e1000e (tests/vm package)"
mode = "apply"
when = "always"
[rule.match]
driver = "e1000e"
[rule.rings]
rx = "max"
"""

# The file lists: every path under /etc, /var and /run but what changes by itself or belongs to the
# test bed, and under /usr and /lib the entries of each directory the package installs into and of
# their parents (scan_dirs()). A full walk of /usr (180,000 paths) takes about 5 minutes over 9p
# under TCG; a leftover of the package's own files shows in its directory, and maintainer scripts
# write only below /etc, /var and /run. Left out:
#   /var/log, /var/cache           logs; man-db's trigger rebuilds its cache for the man pages
#   /var/lib/dpkg, /var/lib/apt    dpkg's and apt's own bookkeeping
#   /var/lib/systemd/catalog       systemd's trigger rebuilds the catalog database (not iommud's)
#   /run/systemd, /run/udev, /run/log, /run/dbus, /run/user, /run/mount   PID 1's, udev's,
#                                  journald's, the bus's state: the boot goes on while the test runs
SNAPSHOT_PRUNE = ["/var/log", "/var/cache", "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd/catalog",
                  "/run/systemd", "/run/udev", "/run/log", "/run/dbus", "/run/user", "/run/mount"]


def scan_dirs() -> list[str]:
    """The directories below /usr and /lib the expected files are in, and their parents."""
    dirs = set()
    for f in expected_files():
        parent = Path(f).parent
        while parent.parts[1:2] and parent.parts[1] in ("usr", "lib"):
            dirs.add(str(parent))
            parent = parent.parent
    return sorted(dirs)


GUEST = r"""#!/bin/bash
set -u
problem() { echo "PROBLEM: $*" | tee -a problems.txt; }
snapshot() {  # snapshot FILE: the paths (with their type) that the package could leave behind
    { find /etc /var /run \( @PRUNE@ \) -prune -o -printf '%y %p\n'
      find -H @SCAN_DIRS@ -maxdepth 1 -printf '%y %p\n' 2>/dev/null; } | LC_ALL=C sort -u > "$1"
}
units=/lib/systemd/system
# The guest's root is the host's: the test starts from a host without iommud.
dpkg-query -W iommud > /dev/null 2>&1 && problem "the host has iommud installed (dpkg): purge it, the test needs a clean start"
[[ -e /etc/iommud ]] && problem "the host has /etc/iommud: the test needs a host without it"
# iommuctl's umockdev tests run on this host as root and leave records in its /var/lib/iommud and
# /run/iommud (a known defect of those tests: they should get state directories of their own). A
# machine that never had iommud has neither: start from that, in the guest's overlay only.
rm -rf /var/lib/iommud /run/iommud
# The host is a container image whose policy-rc.d forbids starting services; the guest is a
# machine, where invoke-rc.d/deb-systemd-invoke start what a package enables.
rm -f /usr/sbin/policy-rc.d
# man-db's dpkg trigger rebuilds its whole index (about 35 s of forks under TCG) on each of the four
# dpkg runs; it is not iommud's, and its cache is left out of the file lists anyway.
rm -f /var/lib/man-db/auto-update

udevadm settle --timeout=60
for _ in $(seq 600); do [[ -e /sys/bus/pci/devices/@NIC@/net ]] && break; sleep 0.1; done
nic=$(basename /sys/bus/pci/devices/@NIC@/net/*)
ip link set "$nic" up && ip addr add 192.0.2.10/24 dev "$nic" || problem "could not give $nic an address"
# The carrier comes up once after "up": counted from when it is up, so that a change iommud makes
# counts alone.
carrier_up() { local c=; read -r c < "/sys/class/net/$nic/carrier" 2>/dev/null; [[ $c == 1 ]]; }
for _ in $(seq 600); do carrier_up && break; sleep 0.1; done
carrier_up || problem "the carrier of $nic never came up"
ethtool -g "$nic" > rings-before.txt 2>&1
cat "/sys/class/net/$nic/carrier_changes" > carrier-before.txt
start=$(date +%s)
snapshot files-before.txt
echo "snapshot took $(( $(date +%s) - start )) s" | tee snapshot-time.txt

# The admin's policy, as a reinstall after `dpkg -r` finds it.
install -d -m 0755 /etc/iommud /etc/iommud/policies.d
install -m 0644 /vm/in/90-test.toml /etc/iommud/policies.d/90-test.toml

echo "=== dpkg -i"
dpkg -i /vm/in/iommud.deb > dpkg-install.txt 2>&1 || problem "dpkg -i failed: $(tail -5 dpkg-install.txt)"
cat dpkg-install.txt
dpkg -L iommud > dpkg-L.txt
while read -r f; do [[ -d $f ]] || echo "$f"; done < dpkg-L.txt | LC_ALL=C sort > installed-files.txt
[[ $(dpkg-query -W -f='${Status}' iommud) == "install ok installed" ]] ||
    problem "dpkg says iommud is $(dpkg-query -W -f='${Status}' iommud)"
dpkg --audit > dpkg-audit.txt 2>&1
[[ -s dpkg-audit.txt ]] && problem "dpkg --audit after install: $(cat dpkg-audit.txt)"
dpkg-deb -I /vm/in/iommud.deb triggers > triggers.txt 2>&1
grep -qx 'activate-noawait update-initramfs' triggers.txt || problem "no update-initramfs trigger in the .deb"
systemd-analyze verify "$units/iommud.service" "$units/iommud-early.service" > verify.txt 2>&1 ||
    problem "systemd-analyze verify: $(cat verify.txt)"
[[ $(systemctl is-enabled iommud.service) == enabled ]] || problem "iommud.service is not enabled"
[[ $(systemctl is-enabled iommud-early.service) == disabled ]] ||
    problem "iommud-early.service is $(systemctl is-enabled iommud-early.service), not disabled"
systemctl show iommud.service -p ActiveState,SubState,StatusText,MainPID > show-installed.txt
cat show-installed.txt
grep -qx ActiveState=active show-installed.txt || problem "iommud.service not active after dpkg -i"
grep -q '^StatusText=.' show-installed.txt || problem "iommud.service has no STATUS= (READY=1 not reached?)"
busctl get-property org.iommud1 /org/iommud1 org.iommud1.Manager State > dbus-state.txt 2>&1
grep -qx 's "running"' dbus-state.txt || problem "org.iommud1 State: $(cat dbus-state.txt)"
iommuctl status > status.txt 2>&1 || problem "iommuctl status failed: $(tail -5 status.txt)"
iommuctl plan > plan.txt 2>&1
ethtool -g "$nic" > rings-installed.txt 2>&1
cat "/sys/class/net/$nic/carrier_changes" > carrier-installed.txt
journalctl -b -u iommud.service -o cat --no-pager > journal-installed.txt 2>&1

echo "=== dpkg -i again (upgrade)"
pid1=$(systemctl show -p MainPID --value iommud.service)
dpkg -i /vm/in/iommud.deb > dpkg-upgrade.txt 2>&1 || problem "dpkg -i (upgrade) failed: $(tail -5 dpkg-upgrade.txt)"
pid2=$(systemctl show -p MainPID --value iommud.service)
[[ $(systemctl is-active iommud.service) == active ]] || problem "iommud.service not active after the upgrade"
[[ $pid1 != "$pid2" && $pid2 != 0 ]] || problem "iommud.service not restarted by the upgrade (main PID $pid1, then $pid2)"

# What iommud would have written for a rule with at = "load" (none of the policies here has one),
# so that the purge below has one to remove.
echo "options e1000e InterruptThrottleRate=3000" > /etc/modprobe.d/iommud-e1000e.conf

echo "=== dpkg -r"
dpkg -r iommud > dpkg-remove.txt 2>&1 || problem "dpkg -r failed: $(tail -5 dpkg-remove.txt)"
state=$(systemctl is-active iommud.service)
[[ $state == active || $state == activating ]] && problem "iommud.service still $state after dpkg -r"
for f in /usr/bin/iommuctl /usr/sbin/iommud $units/iommud.service $units/iommud-early.service \
         /usr/share/iommud/policies; do
    [[ -e $f ]] && problem "$f still there after dpkg -r"
done
for f in /etc/iommud/iommud.conf /etc/iommud/policies.d/90-test.toml; do
    [[ -f $f ]] || problem "$f gone after dpkg -r (the admin's configuration must stay)"
done
[[ $(dpkg-query -W -f='${Status}' iommud) == "deinstall ok config-files" ]] ||
    problem "after dpkg -r dpkg says $(dpkg-query -W -f='${Status}' iommud)"

echo "=== dpkg -P"
dpkg -P iommud > dpkg-purge.txt 2>&1 || problem "dpkg -P failed: $(tail -5 dpkg-purge.txt)"
dpkg-query -W iommud > /dev/null 2>&1 && problem "dpkg still knows iommud after dpkg -P"
snapshot files-purged.txt
touch problems.txt
"""


@dataclasses.dataclass
class PackageFiles:
    deb: Path


def expected_files() -> list[str]:
    return [ln.strip() for ln in EXPECTED_FILES.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def _rx(path: Path) -> tuple[str, str]:
    rings = scenarios._rings(path)
    return rings["maximum"][0], rings["current"][0]


def _problems(out: Path, notes: list[str]) -> list[str]:
    problems = [ln.removeprefix("PROBLEM: ") for ln in (out / "problems.txt").read_text().splitlines()]
    notes.append((out / "snapshot-time.txt").read_text().strip())

    want, got = set(expected_files()), set((out / "installed-files.txt").read_text().split())
    if missing := sorted(want - got):
        problems.append(f"dpkg -L lacks {missing}")
    if extra := sorted(got - want):
        problems.append(f"dpkg -L has files package-files.txt does not list: {extra}")

    # A link in use is not flapped: the ring change the admin's rule wants is skipped at start.
    maximum, before = _rx(out / "rings-before.txt")
    _, after = _rx(out / "rings-installed.txt")
    if before == maximum:
        problems.append(f"the e1000e's rx ring is at its maximum {maximum} already: the test proves nothing")
    if after != before:
        problems.append(f"installing changed the rx ring of a NIC in use: {before} -> {after}")
    carrier = [(out / f"carrier-{w}.txt").read_text().strip() for w in ("before", "installed")]
    if carrier[0] != carrier[1]:
        problems.append(f"installing flapped the link: carrier_changes {carrier[0]} -> {carrier[1]}")
    said = [ln for ln in (out / "journal-installed.txt").read_text().splitlines()
            if "vm-test-rx-ring" in ln and re.search(r"in use", ln, re.I)]
    if said:
        notes.append(f"journal: {said[0].strip()}")
    else:
        problems.append("iommud's journal does not say that vm-test-rx-ring was skipped as in use "
                        f"(journal-installed.txt, plan.txt in {out})")

    before_list = (out / "files-before.txt").read_text().splitlines()
    purged_list = (out / "files-purged.txt").read_text().splitlines()
    gone = [e for e in sorted(set(before_list) - set(purged_list)) if not _host_did(e, exists=False)]
    left = [e for e in sorted(set(purged_list) - set(before_list)) if not _host_did(e, exists=True)]
    if gone:
        problems.append(f"after dpkg -P, gone since before the install: {gone[:20]}")
    if left:
        problems.append(f"after dpkg -P, left since before the install: {left[:20]}")
    return problems


def _host_did(entry: str, exists: bool) -> bool:
    """Whether a difference between the guest's two file lists is the host's doing: the guest's
    root is the live host's / under an overlay, so a package installed on the host meanwhile shows
    through. What the guest writes stays in its overlay (and /run is the guest's own tmpfs): a
    path the guest left behind is not on the host, a path it removed is still there."""
    path = entry.split(" ", 1)[1]
    if path == "/run" or path.startswith("/run/"):
        return False
    return os.path.lexists(path) == exists


def run_package(series: str, files: PackageFiles, out_dir: Path | None = None,
                echo: bool = False) -> scenarios.Outcome:
    if not files.deb.is_file():
        raise vmlib.SetupMissing(f"no package at {files.deb}: run scripts/build-deb first")
    kernel = vmlib.find_kernel(series)
    prune = " -o ".join(f"-path {p}" for p in SNAPSHOT_PRUNE)
    script = GUEST.replace("@PRUNE@", prune).replace("@SCAN_DIRS@", " ".join(scan_dirs())).replace("@NIC@", NIC)
    # The .deb is copied into the boot's share now: a rebuild cannot swap it mid-boot.
    files_in = {"iommud.deb": files.deb, "90-test.toml": ADMIN_POLICY}
    r = vmlib.boot(kernel, scenarios._intel(False), script, init="systemd", files_in=files_in,
                   systemd_wants=["dbus.socket"], timeout=540, out_dir=out_dir, echo=echo)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        problems += _problems(r.out_dir, notes)
    except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError) as e:
        problems.append(f"{type(e).__name__}: {e}")
    return scenarios.Outcome(f"package on {series}", r.seconds, r.accel, problems, notes, r.out_dir)
