"""The tests/vm scenarios: machines, what their kernel must show, and checks.

Each status scenario boots once and batches everything into that boot: the
kernel's own facts are collected, checked against what the scenario set up
(so a harness mistake cannot pass silently), then `iommuctl status --json` is
checked against those facts (check_status.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import check_status
import vmlib

# Guest-side helpers travel in the boot's share: the guest has its own /tmp, so a checkout under
# the host's /tmp (a CI clone) is not visible through the shared root.
COLLECT_SOURCE = vmlib.HERE / "guest" / "collect-status"
COLLECT = "/vm/in/collect-status"


@dataclasses.dataclass
class StatusScenario:
    """A machine + command line, and the kernel state it must produce."""

    description: str
    machine: vmlib.Machine
    vendor: str  # intel | amd | none
    default_type: str | None = None  # boot log: Translated | Passthrough
    tlb_policy: str | None = None  # boot log: strict | lazy (None: not printed)
    forced_strict: bool = False  # "... due to virtualization"
    group_type: str | None = None  # every group's type; None: no groups


def _intel(cm: bool, *cmdline: str) -> vmlib.Machine:
    return vmlib.Machine(iommu="intel", caching_mode=cm, cmdline=list(cmdline))


STATUS_SCENARIOS: dict[str, StatusScenario] = {
    "vtd-cm1": StatusScenario(
        "VT-d with Caching Mode (a vIOMMU as a hypervisor gives it): the driver forces strict",
        _intel(True), "intel", "Translated", "lazy", forced_strict=True, group_type="DMA"),
    "vtd-cm0": StatusScenario(
        "VT-d without Caching Mode (like bare metal): lazy DMA-FQ by the config default",
        _intel(False), "intel", "Translated", "lazy", group_type="DMA-FQ"),
    "vtd-cm1-lazy": StatusScenario(
        "iommu.strict=0 asks for lazy, Caching Mode still forces strict DMA",
        _intel(True, "iommu.strict=0"), "intel", "Translated", "lazy", forced_strict=True,
        group_type="DMA"),
    "vtd-strict": StatusScenario(
        "iommu.strict=1 on VT-d without Caching Mode: strict DMA",
        _intel(False, "iommu.strict=1"), "intel", "Translated", "strict", group_type="DMA"),
    "vtd-pt": StatusScenario(
        "iommu=pt on VT-d: identity (passthrough) for every group",
        _intel(False, "iommu=pt"), "intel", "Passthrough", None, group_type="identity"),
    "vtd-off": StatusScenario(
        "intel_iommu=off: a DMAR table but no VT-d unit and no groups",
        _intel(False, "intel_iommu=off"), "none"),
    # QEMU 7.2's amd-iommu breaks translated NVMe DMA: use it passthrough only.
    "amd-pt": StatusScenario(
        "AMD-Vi with iommu=pt (the sysfs shape of an AMD host)",
        vmlib.Machine(iommu="amd", cmdline=["iommu=pt"]), "amd", "Passthrough", None,
        forced_strict=True, group_type="identity"),
    "none": StatusScenario(
        "q35 without any IOMMU",
        vmlib.Machine(iommu="none"), "none"),
}


def scenario_problems(sc: StatusScenario, k: check_status.KernelFacts) -> list[str]:
    """Did the guest kernel end up in the state the scenario is about?"""
    out = []

    def want(what, got, expected):
        if got != expected:
            out.append(f"scenario set-up: {what} is {got!r}, scenario needs {expected!r}")

    want("IOMMU vendor", k.vendor, sc.vendor)
    if sc.vendor != "none":
        want("boot log default domain type", k.default_type, sc.default_type)
        want("boot log TLB invalidation policy", k.tlb_policy, sc.tlb_policy)
        want("driver forced strict", k.forced_strict, sc.forced_strict)
    if sc.machine.iommu == "intel" and sc.vendor == "intel":
        cm = any(u.cap is not None and u.cap & check_status.INTEL_CAP_CM for u in k.units.values())
        want("VT-d Caching Mode bit", cm, sc.machine.caching_mode)
    types = {t for t, _ in k.groups.values()}
    want("group types", types, {sc.group_type} if sc.group_type else set())
    if sc.group_type and "nvme-pair" in sc.machine.devices:
        # The pcie-pci-bridge and both NVMe behind it: one group (no ACS).
        shapes = [sorted(k.classes.get(m, "?")[:6] for m in members) for _, members in k.groups.values()]
        if ["0x0108", "0x0108", "0x0604"] not in shapes:
            out.append(f"scenario set-up: no group of bridge + two NVMe; groups: {shapes}")
    return out


def status_problems(sc: StatusScenario, out: Path, notes: list[str],
                    more: Callable[[check_status.KernelFacts], list[str]] = lambda _: []) -> list[str]:
    """A status boot's files: the kernel is in the scenario's state (and what `more` asks of its
    facts), and iommuctl agrees with it."""
    facts, probs = check_status.check(out)
    notes.append(check_status.summary(facts))
    return scenario_problems(sc, facts) + more(facts) + probs


def guest_script(iommuctl: str) -> str:
    return f"#!/bin/bash\n{COLLECT} {iommuctl}\n"


Outcome = vmlib.Outcome


def _prepare_iommuctl(iommuctl: Path) -> tuple[dict, str]:
    """Snapshot the binary into the boot's share: a rebuild running on the
    host meanwhile must not swap it under the guest."""
    if not iommuctl.is_file() or not iommuctl.stat().st_mode & 0o111:
        raise vmlib.SetupMissing(f"iommuctl not found or not executable at {iommuctl}: build first")
    return {"iommuctl": iommuctl, "collect-status": COLLECT_SOURCE}, "/vm/in/iommuctl"


def run_status(name: str, series: str, iommuctl: Path, out_dir: Path | None = None,
               echo: bool = False) -> Outcome:
    sc = STATUS_SCENARIOS[name]
    kernel = vmlib.find_kernel(series)
    files, guest_path = _prepare_iommuctl(iommuctl)
    r = vmlib.boot(kernel, sc.machine, guest_script(guest_path), files_in=files,
                   timeout=240, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"status {name} on {series}", r, lambda out, notes: status_problems(sc, out, notes))


# --------------------------------------------------------------------------
# Hotplug: QMP device_add / device_del of an NVMe on the empty root port while
# the guest watches with udev, and iommuctl's view before, during and after.

HOTPLUG_GUEST = r"""#!/bin/bash
set -u
iommuctl=$1
wait_for() {  # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1)); shift
    until "$@"; do
        (( SECONDS < end )) || { echo "timed out waiting for: $*"; return 1; }
        sleep 0.2
    done
}
collect=@COLLECT@
$collect "$iommuctl" before- || exit 1

udevadm monitor --kernel --udev --subsystem-match=pci --subsystem-match=nvme \
    --subsystem-match=block > udev.log 2>&1 &
monitor=$!
wait_for 10 grep -q 'UDEV - the event' udev.log || exit 1
echo "@@ready-for-hotplug"

find_ctrl() { grep -l '^hp_nvme' /sys/class/nvme/*/serial 2>/dev/null | head -1; }
ctrl_present() { [[ -n $(find_ctrl) ]]; }
wait_for 60 ctrl_present || exit 1
udevadm settle --timeout=60
addr=$(basename "$(readlink -f "$(dirname "$(find_ctrl)")/device")")
echo "$addr" > hotplug-addr.txt
echo "hot-added NVMe at $addr"
wait_for 30 test -e "/dev/$(basename "$(dirname "$(find_ctrl)")")n1" || exit 1
$collect "$iommuctl" added- || exit 1
echo "@@hotplug-added"

wait_for 90 test ! -e "/sys/bus/pci/devices/$addr" || exit 1
udevadm settle --timeout=60
echo "hot-removed $addr"
$collect "$iommuctl" removed- || exit 1
# What the host checks in udev.log, printed by the monitor before it is stopped: udev's pci remove.
wait_for 60 grep -Eq '^UDEV .* remove +\S+ \(pci\)' udev.log
kill "$monitor"
"""


def run_hotplug(series: str, iommuctl: Path, out_dir: Path | None = None,
                echo: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    files, guest_path = _prepare_iommuctl(iommuctl)
    machine = vmlib.Machine(iommu="intel", caching_mode=True)
    timing: dict[str, float] = {}

    def driver(vm: vmlib.Vm) -> None:
        vm.wait_console(r"^@@ready-for-hotplug", timeout=180)
        t = time.monotonic()
        vm.hotplug_nvme("hp_nvme", port="hp0")
        vm.wait_console(r"^@@hotplug-added", timeout=120)
        timing["add"] = time.monotonic() - t
        t = time.monotonic()
        vm.unplug("hp_nvme", timeout=90)  # waits for QMP's DEVICE_DELETED
        timing["del"] = time.monotonic() - t

    script = HOTPLUG_GUEST.replace("@COLLECT@", COLLECT)
    r = vmlib.boot(kernel, machine, script.replace("iommuctl=$1", f"iommuctl={guest_path}"),
                   files_in=files, udev=True, driver=driver, timeout=300, out_dir=out_dir,
                   echo=echo)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        addr = (r.out_dir / "hotplug-addr.txt").read_text().strip()
        notes.append(f"hot-added NVMe at {addr}; device_add->guest saw it {timing.get('add', 0):.1f}s, "
                     f"device_del->DEVICE_DELETED {timing.get('del', 0):.1f}s")
        for prefix in ("before-", "added-", "removed-"):
            facts, probs = check_status.check(r.out_dir, prefix)
            problems += [f"{prefix[:-1]}: {p}" for p in probs]
            present = [gid for gid, (_, m) in facts.groups.items() if addr in m]
            if (prefix == "added-") != bool(present):
                problems.append(f"{prefix[:-1]}: {addr} in groups {present} (sysfs)")
        udev = (r.out_dir / "udev.log").read_text()
        for action, subsystem in (("add", "pci"), ("add", "nvme"), ("add", "block"),
                                  ("remove", "pci")):
            if not re.search(rf"^UDEV .* {action} +\S+ \({subsystem}\)", udev, re.M):
                problems.append(f"udev never reported {action} for {subsystem}")
    except (vmlib.GuestFailed, FileNotFoundError) as e:
        problems.append(str(e))
    return Outcome(f"hotplug on {series}", r.seconds, r.accel, problems, notes, r.out_dir)


# --------------------------------------------------------------------------
# systemd as PID 1 with a unit and a udev rule installed: the harness API that
# the daemon's service tests build on.

SYSTEMD_UNIT = """[Unit]
Description=tests/vm: a unit installed from the host
DefaultDependencies=no
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'echo unit-ran > /vm/out/unit-ran'
"""

# ACTION!="remove", not =="add": the NVMe driver follows its controller's
# "add" with a "change", and udev rebuilds the device's properties from the
# rules on every event, so a property set only on "add" is gone at once.
SYSTEMD_RULE = 'ACTION!="remove", SUBSYSTEM=="nvme", ENV{IOMMUD_VM_TAGGED}="1"\n'

SYSTEMD_GUEST = r"""#!/bin/bash
set -u
fail=0
echo "PID 1: $(cat /proc/1/comm)"
[[ $(cat /proc/1/comm) == systemd ]] || { echo "PID 1 is not systemd"; fail=1; }
systemctl is-active vm-marker.service || fail=1
[[ -f /vm/out/unit-ran ]] || { echo "vm-marker.service did not run"; fail=1; }
udevadm settle --timeout=60
udevadm info /dev/nvme0 | grep -q IOMMUD_VM_TAGGED=1 || { echo "udev rule not applied"; fail=1; }
[[ $(systemd-detect-virt --container) == none ]] || { echo "systemd thinks it is in a container"; fail=1; }
findmnt -n -o FSTYPE /tmp | grep -q tmpfs || { echo "/tmp is not the guest's own tmpfs"; fail=1; }
systemctl --failed --no-legend > failed-units.txt
cat failed-units.txt
@IOMMUCTL@ status > status.txt 2>&1 || { echo "iommuctl status failed under systemd"; fail=1; }
echo "guest uptime at the end of the test: $(cut -d' ' -f1 /proc/uptime)s" | tee uptime.txt
if [[ $fail != 0 ]]; then  # diagnostics for the host-side report
    udevadm info /dev/nvme0 /dev/nvme0n1 > udev-nvme0.txt 2>&1
    udevadm test --action=add /sys/class/nvme/nvme0 > udev-test.txt 2>&1
    ls -l /etc/udev/rules.d /dev/nvme* > ls.txt 2>&1
    systemctl list-jobs > jobs.txt 2>&1
    journalctl -b --no-pager > journal.txt 2>&1
fi
exit $fail
"""


def run_systemd(series: str, iommuctl: Path, out_dir: Path | None = None,
                echo: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    files, guest_path = _prepare_iommuctl(iommuctl)
    staging = Path(tempfile.mkdtemp(prefix="iommud-vm-units-"))
    (staging / "vm-marker.service").write_text(SYSTEMD_UNIT)
    (staging / "90-iommud-vm-test.rules").write_text(SYSTEMD_RULE)
    r = vmlib.boot(kernel, vmlib.Machine(iommu="intel", caching_mode=True),
                   SYSTEMD_GUEST.replace("@IOMMUCTL@", guest_path), init="systemd",
                   files_in=files, systemd_units=[staging / "vm-marker.service"],
                   udev_rules=[staging / "90-iommud-vm-test.rules"],
                   systemd_wants=["vm-marker.service"], timeout=300, out_dir=out_dir, echo=echo)
    shutil.rmtree(staging, ignore_errors=True)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        notes.append((r.out_dir / "uptime.txt").read_text().strip())
    except (vmlib.GuestFailed, FileNotFoundError, IndexError) as e:
        problems.append(str(e))
    return Outcome(f"systemd on {series}", r.seconds, r.accel, problems, notes, r.out_dir)


# --------------------------------------------------------------------------
# Apply and revert on the real kernel: a policy that puts every NVMe group at
# identity, `iommuctl apply`, then `iommuctl revert`; the kernel's own sysfs is
# the judge (group types, driver links), read by the guest script, not by iommuctl.

def identity_rule(name: str, description: str, when: str | None = None, address: str | None = None) -> str:
    """A policy rule that puts the groups of the NVMe drives (those at `address`, a glob) at identity."""
    return (f'[[rule]]\nname = "{name}"\ndescription = "{description} (tests/vm)"\ndomain = "identity"\n'
            + (f'when = "{when}"\n' if when else "") + 'accept = ["no-isolation"]\n[rule.match]\nkind = "nvme"\n'
            + (f'address = "{address}"\n' if address else ""))


APPLY_POLICY = identity_rule("vm-nvme-identity", "identity for every NVMe drive") + """
[[rule]]
name = "vm-e1000e-rings"
description = "the largest rings on the e1000e (tests/vm)"
[rule.match]
driver = "e1000e"
[rule.rings]
rx = "max"
tx = "max"
"""

APPLY_GUEST = r"""#!/bin/bash
set -u
iommuctl=@IOMMUCTL@
mkdir -m 0755 -p /tmp/pol
cp /vm/in/50-vm.toml /tmp/pol/ && chmod 0644 /tmp/pol/50-vm.toml
nic=$(basename /sys/bus/pci/devices/0000:04:00.0/net/*)
facts() {  # facts NAME: every NVMe's group, the group's type and the bound driver; the NIC's rings
    for d in 0000:01:00.0 0000:03:01.0 0000:03:02.0; do
        g=$(basename "$(readlink -f /sys/bus/pci/devices/$d/iommu_group)")
        drv=$(basename "$(readlink /sys/bus/pci/devices/$d/driver 2>/dev/null)" 2>/dev/null)
        echo "$d $g $(cat /sys/kernel/iommu_groups/$g/type) ${drv:-none}"
    done > "$1.txt"
    cat "$1.txt"
    ethtool -g "$nic" > "$1-rings.txt" 2>&1
}
facts before
$iommuctl apply --hotplug --policies /tmp/pol > apply.txt 2>&1; echo $? > apply.rc
cat apply.txt
facts applied
$iommuctl revert > revert.txt 2>&1; echo $? > revert.rc
cat revert.txt
facts reverted
ls /run/iommud > run-iommud.txt 2>&1
# A drive something holds (here a device-mapper target) is never unbound: apply must refuse.
modprobe dm-mod
ns=$(basename "$(ls -d /sys/bus/pci/devices/0000:01:00.0/nvme/nvme*/nvme*n1 | head -1)")
dmsetup create --noudevsync iommud-hold --table "0 2048 linear /dev/$ns 0" > dmsetup.txt 2>&1 || cat dmsetup.txt
$iommuctl apply --hotplug --policies /tmp/pol --device 0000:01:00.0 > held-apply.txt 2>&1; echo $? > held.rc
cat held-apply.txt
facts held
dmsetup remove --noudevsync iommud-hold

# The file-backed NVMe on the hot-plug port ("disk"): a mounted filesystem on it is refused too.
disk=$(for c in /sys/class/nvme/nvme*; do  # the serial is padded with blanks; read trims them
    read -r serial < "$c/serial"; [[ $serial == disk ]] && basename "$(readlink -f "$c/device")"; done)
[[ -n $disk ]] || { echo "no NVMe with serial 'disk'"; exit 1; }
echo "$disk" > disk-addr.txt
disk_facts() {  # disk_facts NAME: the disk's group type and driver
    g=$(basename "$(readlink -f "/sys/bus/pci/devices/$disk/iommu_group")")
    drv=$(basename "$(readlink "/sys/bus/pci/devices/$disk/driver" 2>/dev/null)" 2>/dev/null)
    echo "$disk $g $(cat "/sys/kernel/iommu_groups/$g/type") ${drv:-none}" | tee "$1.txt"
}
wait_for() {  # wait_for TEST-ARGS...: up to 120 s
    for _ in $(seq 1200); do test "$@" && return 0; sleep 0.1; done
    echo "timed out waiting for: test $*"; return 1
}
dns=$(basename "$(ls -d /sys/bus/pci/devices/$disk/nvme/nvme*/nvme*n1 | head -1)")
modprobe ext4
mkdir -p /mnt/disk
{ mkfs.ext4 -q -F "/dev/$dns" && mount "/dev/$dns" /mnt/disk; } > mount.txt 2>&1 || cat mount.txt
$iommuctl apply --hotplug --policies /tmp/pol --device "$disk" > mounted-apply.txt 2>&1
cat mounted-apply.txt
disk_facts mounted
umount /mnt/disk

stopped() {  # stopped PID: the process stopped itself (state T)
    local state
    read -r _ _ state _ < "/proc/$1/stat" 2>/dev/null && [[ $state == T ]]
}
stop_after() {  # stop_after STEP LOG CMD...: CMD in the background, stopped by its test hook after STEP
    # (IOMMUD_TEST_STOP_AFTER); sets pid; fails if CMD ended without stopping
    local at=$1 log=$2; shift 2
    IOMMUD_TEST_STOP_AFTER=$at "$@" > "$log" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do  # up to 120 s
        stopped $pid && return 0
        [[ -e /proc/$pid ]] || break
        sleep 0.1
    done
    echo "never stopped after $at: $(< "$log")"; return 1
}
# Killed right after the unbind: the next writer (here `iommuctl revert`) finds the journal and rebinds.
stop_after "unbind $disk" killed-apply.txt $iommuctl apply --hotplug --policies /tmp/pol --device "$disk"
disk_facts killed-paused
kill -KILL $pid; wait $pid
ls /run/iommud > killed-run.txt
$iommuctl revert > recover.txt 2>&1; echo $? > recover.rc
cat recover.txt
disk_facts recovered
ls /run/iommud > recovered-run.txt

# Removed (QMP device_del from the host) while stopped right after the unbind: the transaction ends
# without error and every remaining device is bound.
stop_after "unbind $disk" removed-apply.txt $iommuctl apply --hotplug --policies /tmp/pol --device "$disk"
echo "@@paused-after-unbind"
wait_for ! -e "/sys/bus/pci/devices/$disk"
kill -CONT $pid
wait $pid; echo $? > removed.rc
cat removed-apply.txt
facts removed
ls /run/iommud > removed-run.txt
"""


def facts_of(path: Path) -> dict[str, tuple[str, str, str]]:
    """A `facts` file of a guest script: device -> (its group, the group's type, its driver)."""
    out = {}
    for line in path.read_text().splitlines():
        dev, group, typ, drv = line.split()
        out[dev] = (group, typ, drv)
    return out


def _rings(path: Path) -> dict[str, tuple[str, str]]:
    """`ethtool -g` output: (RX, TX) of the pre-set maximums and of the current settings."""
    out, section = {}, None
    for line in path.read_text().splitlines():
        if line.startswith("Pre-set maximums"):
            section = "maximum"
        elif line.startswith("Current hardware settings"):
            section = "current"
        elif section and ":" in line:
            key, value = (x.strip() for x in line.split(":", 1))
            if key in ("RX", "TX"):
                rx, tx = out.get(section, ("", ""))
                out[section] = (value, tx) if key == "RX" else (rx, value)
    if "maximum" not in out or "current" not in out:
        raise ValueError(f"unexpected ethtool -g output in {path.name}: {path.read_text()[:300]}")
    return out


def _disk_problems(out: Path, removal: dict[str, float]) -> list[str]:
    """The mounted, killed and removed cases on the file-backed NVMe (APPLY_GUEST's second half)."""
    problems = []
    text = {n: (out / f"{n}.txt").read_text() for n in
            ("mounted-apply", "recover", "removed-apply", "killed-run", "recovered-run", "removed-run")}
    rc = {n: (out / f"{n}.rc").read_text().strip() for n in ("recover", "removed")}
    disk = (out / "disk-addr.txt").read_text().strip()
    (mounted,), (paused,), (recovered,) = (facts_of(out / f"{n}.txt").values()
                                           for n in ("mounted", "killed-paused", "recovered"))
    # The plan already leaves a device in use alone ("skipped", with the reason); apply's preflight
    # would refuse it too if it got mounted after planning.
    if not re.search(r"^skipped: group \d+ type identity .*nvme\S+ is mounted at /mnt/disk; unbinding it would "
                     r"take it away", text["mounted-apply"], re.M):
        problems.append(f"apply on the NVMe with a mounted filesystem did not refuse and say why: "
                        f"{text['mounted-apply']}")
    if mounted[2] != "nvme" or mounted[1] == "identity":
        problems.append(f"the mounted NVMe {disk} was changed: {mounted}")
    if paused[2] != "none":
        problems.append(f"at the pause point {disk} is still bound to {paused[2]}: the pause is not after the unbind")
    if "transaction.journal" not in text["killed-run"]:
        problems.append(f"no journal left by the killed apply: /run/iommud has {text['killed-run'].split()}")
    if rc["recover"] != "0" or not re.search(r"^recovered: group \d+, .*rolled back; rebound 1 device",
                                             text["recover"], re.M):
        problems.append(f"the next writer did not recover the killed transaction (rc {rc['recover']}): "
                        f"{text['recover']}")
    if recovered[2] != "nvme" or recovered[1] != mounted[1]:
        problems.append(f"after recovery {disk} is {recovered}, not bound to nvme at {mounted[1]}")
    if "transaction.journal" in text["recovered-run"]:
        problems.append("the journal is still there after recovery")
    if "seconds" not in removal:
        problems.append("the host never removed the paused NVMe (no @@paused-after-unbind, or no DEVICE_DELETED)")
    if rc["removed"] != "0" or "went away during the change" not in text["removed-apply"]:
        problems.append(f"apply of a removed device (rc {rc['removed']}) did not end cleanly: {text['removed-apply']}")
    if "transaction.journal" in text["removed-run"]:
        problems.append("the journal is still there after the removed device's transaction")
    for dev, (_, _, drv) in facts_of(out / "removed.txt").items():
        if drv != "nvme":
            problems.append(f"after {disk} was removed mid-transaction, {dev} is bound to {drv}, not nvme")
    return problems


# --------------------------------------------------------------------------
# Killed at each step of a domain transaction (issue 28), in the apply scenario's boot after its
# other parts: the solo NVMe's group DMA -> identity, `iommuctl apply` stopped by its test hook
# (IOMMUD_TEST_STOP_AFTER: it SIGSTOPs itself after the named step) and SIGKILLed there; then
# `iommuctl status` must name every device it left unbound, the next apply must recover and finish
# the change, and `iommuctl revert` must leave the group's type and the driver as they were.
# The exhaustive sweep (every step, every member) is the fake kernel's (tests/unit/app/change).

KILL_STEPS = (  # (name, IOMMUD_TEST_STOP_AFTER, (type, driver) at the kill, journal left)
    ("pending-record", "save /run/iommud/changes.json", ("DMA", "nvme"), False),  # the write-ahead record
    ("unbind", "unbind 0000:01:00.0", ("DMA", "none"), True),
    ("type", "write identity", ("identity", "none"), True),
    ("bind", "bind 0000:01:00.0", ("identity", "nvme"), True),  # done, before its record is settled
    ("record", "save /run/iommud/changes.json#2", ("identity", "nvme"), False),  # the settled record
    ("record-copy", "save /var/lib/iommud/runtime-changes.json", ("identity", "nvme"), False),  # once, at the end
)

KILL_GUEST = r"""
# --- killed at each step of a domain transaction (KILL_GUEST) ---
solo=0000:01:00.0
solo_group=$(basename "$(readlink -f /sys/bus/pci/devices/$solo/iommu_group)")
solo_facts() {  # solo_facts NAME: the solo NVMe's group type, its driver and whether a journal is left
    local t drv=none j=no
    read -r t < "/sys/kernel/iommu_groups/$solo_group/type"
    [[ -e /sys/bus/pci/devices/$solo/driver ]] && drv=$(readlink /sys/bus/pci/devices/$solo/driver)
    [[ -e /run/iommud/transaction.journal ]] && j=yes
    echo "$t ${drv##*/} $j" > "$1.txt"
}
solo_facts kill-start
while read -r name at; do
    stop_after "$at" "kill-$name-apply.txt" $iommuctl apply --hotplug --policies /tmp/pol --device $solo &&
        echo stopped > "kill-$name-stopped.txt"
    solo_facts "kill-$name-at"
    kill -KILL $pid; wait $pid; echo $? > "kill-$name.rc"
    $iommuctl status --json > "kill-$name-status.json" 2> "kill-$name-status.err"
    $iommuctl apply --hotplug --policies /tmp/pol --device $solo > "kill-$name-next.txt" 2>&1; echo $? > "kill-$name-next.rc"
    solo_facts "kill-$name-recovered"
    $iommuctl revert > "kill-$name-revert.txt" 2>&1; echo $? > "kill-$name-revert.rc"
    solo_facts "kill-$name-reverted"
    cp /run/iommud/changes.json "kill-$name-records.json" 2>/dev/null
    echo "killed after $name: at $(< "kill-$name-at.txt"), after the next apply $(< "kill-$name-recovered.txt"), reverted $(< "kill-$name-reverted.txt")"
done <<'STEPS'
@KILL_STEPS@
STEPS
"""


def _kill_problems(out: Path, notes: list[str]) -> list[str]:
    """KILL_GUEST: each kill point, what status said, the recovery by the next apply, and the revert."""
    problems = []

    def facts(name: str) -> tuple[str, str, bool]:
        t, drv, journal = (out / f"{name}.txt").read_text().split()
        return t, drv, journal == "yes"

    start = facts("kill-start")
    if start != ("DMA", "nvme", False):
        return [f"before the kills the solo NVMe is {start}, not at DMA, bound, without a journal: they test nothing"]
    for name, _, (want_type, want_drv), journal in KILL_STEPS:
        p = f"kill-{name}"
        text = {n: (out / f"{p}-{n}.txt").read_text() for n in ("apply", "next", "revert")}
        rc = {n: (out / f"{p}{n}.rc").read_text().strip() for n in ("", "-next", "-revert")}
        checked = []
        if not (out / f"{p}-stopped.txt").exists():
            problems.append(f"apply never stopped after {name} (rc {rc['']}): {text['apply']}")
            continue
        at, nxt, reverted = facts(f"{p}-at"), facts(f"{p}-recovered"), facts(f"{p}-reverted")
        if rc[""] != "137":
            problems.append(f"{name}: apply was not killed at its stop (rc {rc['']}): {text['apply']}")
        if at != (want_type, want_drv, journal):
            problems.append(f"{name}: at the kill the group, driver, journal are {at}, not "
                            f"{(want_type, want_drv, journal)}: the stop is not after that step")
        checked.append(f"at the kill {at[0]}/{at[1]}" + (" + journal" if at[2] else ""))
        status = json.loads((out / f"{p}-status.json").read_text())
        unbound = {d for f in status["findings"] if f["id"] == "device-left-unbound" for d in f["devices"]}
        if (at[1] == "none") != ("0000:01:00.0" in unbound):
            problems.append(f"{name}: iommuctl status names {sorted(unbound)} as left unbound, the solo NVMe "
                            f"being bound to {at[1]}")
        checked.append("status names it unbound" if unbound else "status: all bound")
        if rc["-next"] != "0" or nxt[:2] != ("identity", "nvme") or nxt[2]:
            problems.append(f"{name}: the next apply (rc {rc['-next']}) left {nxt}, not identity, nvme, no "
                            f"journal: {text['next']}")
        recovered = re.search(r"^recovered: group \d+, .*", text["next"], re.M)
        if journal != bool(recovered):
            problems.append(f"{name}: the next apply {'did not say' if journal else 'said'} it recovered a "
                            f"transaction: {text['next']}")
        checked.append(f"next apply {nxt[0]}/{nxt[1]}" + (f" ({recovered[0]})" if recovered else ""))
        kept = out / f"{p}-records.json"
        records = json.loads(kept.read_text()) if kept.exists() else []
        if rc["-revert"] != "0" or reverted != start or records:
            problems.append(f"{name}: revert (rc {rc['-revert']}) left {reverted}, records {records}, not {start} "
                            f"and none: {text['revert']}")
        checked.append(f"revert {reverted[0]}/{reverted[1]}")
        notes.append(f"killed after {name}: " + ", ".join(checked))
    return problems


# --------------------------------------------------------------------------
# DMA-FQ for every NVMe on a strict boot (VT-d CM=0, iommu.strict=1), in the apply scenario's boot
# after its other parts: DMA -> DMA-FQ is the kernel's live change (drivers stay bound), but
# before Linux 6.4 iommu_group_store_type() refuses a group of several devices with EINVAL before
# it looks at the live path (docs/kernel.md §2.2). The plan must skip the NVMe pair's group on 6.1
# with the reason, and apply must succeed for everything it plans.

# --------------------------------------------------------------------------
# The records file damaged on a real kernel (issue 43): after `iommuctl apply` put the NVMe groups
# at identity, /run/iommud/changes.json cut by 3 bytes. status must name the damage, verify exit
# 5, revert give every group back its type with its driver bound (from the intact records and the
# state directory's copy), and `revert --from` the file kept aside end with it renamed *.reverted.
# Every way to damage each file, enumerated, is the unit tests' (DamageSweep.*).

DAMAGE_GUEST = r"""
# --- the records file damaged (DAMAGE_GUEST) ---
facts damage-before
$iommuctl apply --hotplug --policies /tmp/pol > damage-apply.txt 2>&1; echo $? > damage-apply.rc
facts damage-applied
size=$(stat -c %s /run/iommud/changes.json)
truncate -s $((size - 3)) /run/iommud/changes.json
$iommuctl status --json > damage-status.json 2> damage-status.err; echo $? > damage-status.rc
$iommuctl verify > damage-verify.txt 2>&1; echo $? > damage-verify.rc
$iommuctl revert > damage-revert.txt 2>&1; echo $? > damage-revert.rc
cat damage-revert.txt
facts damage-reverted
ls /run/iommud > damage-run.txt
kept=$(ls /run/iommud/changes.json.damaged-* 2>/dev/null | grep -v reverted | head -1)
echo "$kept" > damage-kept.txt
$iommuctl revert --from "$kept" > damage-from.txt 2>&1; echo $? > damage-from.rc
cat damage-from.txt
$iommuctl verify > damage-verify-after.txt 2>&1; echo $? > damage-verify-after.rc
ls /run/iommud > damage-run-after.txt
"""


def _damage_problems(out: Path, series: str) -> list[str]:
    """DAMAGE_GUEST: a records file cut short is reported, kept and loses no change."""
    problems = []
    before, applied, reverted = (facts_of(out / f"{n}.txt") for n in
                                 ("damage-before", "damage-applied", "damage-reverted"))
    text = {n: (out / f"{n}.txt").read_text() for n in
            ("damage-apply", "damage-verify", "damage-revert", "damage-run", "damage-from", "damage-run-after",
             "damage-verify-after")}
    rc = {n: (out / f"{n}.rc").read_text().strip() for n in
          ("damage-apply", "damage-status", "damage-verify", "damage-revert", "damage-from", "damage-verify-after")}
    changed = [d for d in before if applied[d][1] != before[d][1]]
    want = 2 if series != "6.1" else 1  # the pair's group changes on Linux 6.4 and later only
    if rc["damage-apply"] != "0" or len({applied[d][0] for d in changed}) != want:
        return [f"the apply before the damage did not change {want} groups (rc {rc['damage-apply']}): "
                f"{text['damage-apply']}"]
    status = json.loads((out / "damage-status.json").read_text()) if rc["damage-status"] == "0" else {}
    if not any(f["id"] == "state-file-damaged" for f in status.get("findings", [])):
        problems.append(f"status (rc {rc['damage-status']}) names no state-file-damaged finding: "
                        f"{[f['id'] for f in status.get('findings', [])]}")
    if rc["damage-verify"] != "5" or "iommud's records are damaged" not in text["damage-verify"]:
        problems.append(f"verify on a damaged records file exits {rc['damage-verify']}, not 5: {text['damage-verify']}")
    for dev, (group, typ, drv) in reverted.items():
        if typ != before[dev][1] or drv != "nvme":
            problems.append(f"after revert on the damaged file, {dev}'s group {group} is {typ} with {drv}, not "
                            f"{before[dev][1]} with nvme: {text['damage-revert']}")
    if "moved aside as /run/iommud/changes.json.damaged-" not in text["damage-revert"]:
        problems.append(f"revert does not say it kept the damaged file aside: {text['damage-revert']}")
    if not re.search(r"^changes\.json\.damaged-\S+$", text["damage-run"], re.M):
        problems.append(f"no changes.json.damaged-* kept in /run/iommud: {text['damage-run'].split()}")
    if rc["damage-from"] != "0" or "kept as" not in text["damage-from"]:
        problems.append(f"revert --from the kept file (rc {rc['damage-from']}): {text['damage-from']}")
    if not re.search(r"^changes\.json\.damaged-\S+\.reverted$", text["damage-run-after"], re.M):
        problems.append(f"the kept file was not renamed *.reverted: {text['damage-run-after'].split()}")
    if rc["damage-verify-after"] != "0":
        problems.append(f"verify after revert --from exits {rc['damage-verify-after']}: {text['damage-verify-after']}")
    return problems


LAZY_POLICY = """[[rule]]
name = "vm-nvme-lazy"
description = "DMA-FQ for every NVMe drive (tests/vm)"
domain = "DMA-FQ"
accept = ["lazy-invalidation"]
[rule.match]
kind = "nvme"
"""

LAZY_GUEST = r"""
# --- DMA-FQ for every NVMe (LAZY_GUEST) ---
mkdir -m 0755 -p /tmp/pol-fq
cp /vm/in/50-vm-fq.toml /tmp/pol-fq/ && chmod 0644 /tmp/pol-fq/50-vm-fq.toml
facts lazy-before
$iommuctl plan --json --policies /tmp/pol-fq > lazy-plan.json 2> lazy-plan.err; echo $? > lazy-plan.rc
$iommuctl apply --policies /tmp/pol-fq > lazy-apply.txt 2>&1; echo $? > lazy-apply.rc
cat lazy-apply.txt
facts lazy-applied
"""


def _lazy_problems(out: Path, series: str) -> list[str]:
    """LAZY_GUEST: the plan skips what the kernel would refuse, and apply does all it plans."""
    problems = []
    before, applied = (facts_of(out / f"{n}.txt") for n in ("lazy-before", "lazy-applied"))
    solo, pair = "0000:01:00.0", ("0000:03:01.0", "0000:03:02.0")
    for dev, (group, typ, _) in before.items():
        if typ != "DMA":
            problems.append(f"iommu.strict=1 did not leave {dev}'s group {group} at DMA (it is {typ}): "
                            "the DMA-FQ part tests nothing")
    if problems:
        return problems
    if (out / "lazy-plan.rc").read_text().strip() != "0":
        return [f"iommuctl plan failed: {(out / 'lazy-plan.err').read_text()}"]
    plan = json.loads((out / "lazy-plan.json").read_text())
    planned = {c["group"]: c for c in plan["changes"] if c["kind"] == "domain"}
    skipped = {s["object"]: s for s in plan["skips"] if s["kind"] == "domain"}
    solo_group, pair_group = int(before[solo][0]), int(before[pair[0]][0])
    multi = series != "6.1"  # Linux 6.4 and later change a group of several devices
    if planned.get(solo_group, {}).get("to") != "DMA-FQ":
        problems.append(f"the plan has no DMA-FQ for the solo NVMe's group {solo_group}: {plan['changes']}")
    if multi and planned.get(pair_group, {}).get("to") != "DMA-FQ":
        problems.append(f"the plan on {series} has no DMA-FQ for the NVMe pair's group {pair_group}: "
                        f"{plan['changes']}")
    if not multi:
        if pair_group in planned:
            problems.append(f"the plan on {series} changes the NVMe pair's group {pair_group} (3 devices) to "
                            f"DMA-FQ, which the kernel refuses before 6.4: {planned[pair_group]}")
        skip = skipped.get(f"group {pair_group}")
        if skip is None or skip["reason"] != "kernel-too-old" or "several devices" not in skip["message"]:
            problems.append(f"the plan on {series} does not skip the NVMe pair's group {pair_group} with the "
                            f"reason: {skip}")
    apply_txt = (out / "lazy-apply.txt").read_text()
    if (out / "lazy-apply.rc").read_text().strip() != "0":
        problems.append(f"iommuctl apply of the DMA-FQ plan failed: {apply_txt}")
    for dev in (solo, *pair):
        group = int(applied[dev][0])
        want = "DMA-FQ" if group in planned else before[dev][1]
        if applied[dev][1] != want:
            problems.append(f"after the DMA-FQ apply, {dev}'s group {group} is {applied[dev][1]}, not {want}")
        if applied[dev][2] != "nvme":
            problems.append(f"after the DMA-FQ apply, {dev} is bound to {applied[dev][2]}, not nvme")
    return problems


def run_apply(series: str, iommuctl: Path, out_dir: Path | None = None,
              echo: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    files, guest_path = _prepare_iommuctl(iommuctl)
    staging = Path(tempfile.mkdtemp(prefix="iommud-vm-policy-"))
    (staging / "50-vm.toml").write_text(APPLY_POLICY)
    files["50-vm.toml"] = staging / "50-vm.toml"
    # A file-backed NVMe on the hot-plug port: the guest can mount a filesystem on it, and the
    # host can take it away while a transaction is paused.
    image = staging / "disk.img"
    with image.open("wb") as f:
        f.truncate(64 << 20)
    # iommu.strict=1: every group boots at DMA, so that the DMA-FQ part (LAZY_GUEST) has live changes to plan.
    machine = _intel(False, "iommu.strict=1")
    machine.extra_qemu = [
        "-blockdev", f"driver=file,node-name=disk_file,filename={image}",
        "-blockdev", "driver=raw,node-name=disk,file=disk_file",
        "-device", "nvme,id=nvme_disk,serial=disk,drive=disk,bus=hp0",
    ]
    removal: dict[str, float] = {}

    def driver(vm: vmlib.Vm) -> None:
        vm.wait_console(r"^@@paused-after-unbind", timeout=240)
        t = time.monotonic()
        vm.unplug("nvme_disk", timeout=90)  # waits for QMP's DEVICE_DELETED
        removal["seconds"] = time.monotonic() - t

    (staging / "50-vm-fq.toml").write_text(LAZY_POLICY)
    files["50-vm-fq.toml"] = staging / "50-vm-fq.toml"
    kill_steps = "\n".join(f"{name} {at}" for name, at, _, _ in KILL_STEPS)
    script = (APPLY_GUEST + KILL_GUEST + DAMAGE_GUEST + LAZY_GUEST).replace("@KILL_STEPS@", kill_steps)
    r = vmlib.boot(kernel, machine, script.replace("@IOMMUCTL@", guest_path), files_in=files,
                   driver=driver, timeout=420, out_dir=out_dir, echo=echo)
    shutil.rmtree(staging, ignore_errors=True)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        before, applied, reverted = (facts_of(r.out_dir / f"{n}.txt") for n in ("before", "applied", "reverted"))
        apply_txt = (r.out_dir / "apply.txt").read_text()
        if (r.out_dir / "apply.rc").read_text().strip() != "0":
            problems.append(f"iommuctl apply failed: {apply_txt}")
        if (r.out_dir / "revert.rc").read_text().strip() != "0":
            problems.append(f"iommuctl revert failed: {(r.out_dir / 'revert.txt').read_text()}")
        solo, pair = "0000:01:00.0", ("0000:03:01.0", "0000:03:02.0")
        # Linux 6.4 and later change a group of several devices; 6.1 must leave it alone.
        multi = series != "6.1"
        for dev in (solo, *pair):
            want = "identity" if dev == solo or multi else before[dev][1]
            if applied[dev][1] != want:
                problems.append(f"after apply, {dev}'s group {applied[dev][0]} is {applied[dev][1]}, not {want}")
            for name, facts in (("applied", applied), ("reverted", reverted)):
                if facts[dev][2] != "nvme":
                    problems.append(f"{name}: {dev} is bound to {facts[dev][2]}, not nvme")
            if reverted[dev][1] != before[dev][1]:
                problems.append(f"after revert, {dev}'s group is {reverted[dev][1]}, not {before[dev][1]} as before")
        if not multi and "only Linux 6.4 and later change the type of a group of several devices" not in apply_txt:
            problems.append(f"apply on {series} does not say why the NVMe pair's group stays: {apply_txt}")
        rings = {n: _rings(r.out_dir / f"{n}-rings.txt") for n in ("before", "applied", "reverted")}
        if rings["applied"]["current"] != rings["before"]["maximum"]:
            problems.append(f"e1000e rings after apply: {rings['applied']['current']}, not the maximum "
                            f"{rings['before']['maximum']}")
        if rings["reverted"]["current"] != rings["before"]["current"]:
            problems.append(f"e1000e rings after revert: {rings['reverted']['current']}, not "
                            f"{rings['before']['current']} as before")
        held, held_txt = facts_of(r.out_dir / "held.txt"), (r.out_dir / "held-apply.txt").read_text()
        if held[solo][1] != before[solo][1] or held[solo][2] != "nvme":
            problems.append(f"a held NVMe was changed: {held[solo]}; apply said: {held_txt}")
        if "held by dm-0" not in held_txt or "unbinding it would take it away" not in held_txt:
            problems.append(f"apply does not say the held NVMe is in use: {held_txt}")
        problems += _disk_problems(r.out_dir, removal)
        problems += _kill_problems(r.out_dir, notes)
        problems += _damage_problems(r.out_dir, series)
        problems += _lazy_problems(r.out_dir, series)
        timing = re.findall(r"done in ([0-9.]+ ms) \(([0-9.]+ ms) of it in the kernel", apply_txt)
        rings_timing = re.findall(r"rings \S+ \d+ -> \d+ in ([0-9.]+ ms) \(([0-9.]+ ms) of it in the kernel", apply_txt)
        notes.append(f"before: {before[solo][1]}; domain transactions: " +
                     ", ".join(f"{t} ({k} kernel)" for t, k in timing) + "; e1000e ring changes: " +
                     ", ".join(f"{t} ({k} kernel)" for t, k in rings_timing) + f"; 6.4+ group change: {multi}"
                     + f"; device_del of the paused NVMe -> DEVICE_DELETED {removal.get('seconds', 0):.1f}s")
    except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError) as e:
        problems.append(str(e))
    return Outcome(f"apply on {series}", r.seconds, r.accel, problems, notes, r.out_dir)


# --------------------------------------------------------------------------
# The daemon as a service: systemd is PID 1 and starts the installed, hardened iommud.service
# (the unit configured by CMake, the udev rules, the journal catalog and the binary at the path
# ExecStart names, as a package installs them); policies in /etc/iommud/policies.d. In one boot:
# the coldplug writes a group type, a hot-added NVMe gets its hotplug-only rule, the journal
# entries carry their fields and catalog text, reloads (good and broken), and a kill after unbind
# (by iommuctl, the service stopped) recovered by the service's next start.

DAEMON_HOTPLUG_ADDR = "0000:05:00.0"  # the first function behind the hot-pluggable port hp0
MSG_WEAKENED = "ec3ed2b1eb094e9da215ec6cd8347600"
MSG_STARTED = "16f439e513b4481aa99d04094596ffda"
MSG_LOADED = "40dd2a3790f1493684b1a4d3b4e3b6ec"
MSG_REJECTED = "94f8437cb3474d33b97e1e3d733b8c90"
MSG_RECOVERED = "7bbdac1154a4447f8f3726189cf35385"

# At start: the solo NVMe (not mounted, alone in its group) goes to identity. `when` is spelled
# out: a domain change acts only at hotplug by default.
DAEMON_COLDPLUG_POLICY = identity_rule("vm-solo-identity", "identity for the solo NVMe, at start too",
                                       "always", "0000:01:00.0")

# When a device appears: the NVMe hot-added on hp0, and the NVMe pair's group (which nothing
# hot-adds: only `iommuctl apply --hotplug` acts on it, the kill-after-unbind case).
DAEMON_HOTPLUG_POLICY = (
    identity_rule("vm-hotplug-identity", "identity for the NVMe hot-added on hp0", "hotplug",
                  DAEMON_HOTPLUG_ADDR) + "\n"
    + identity_rule("vm-pair-identity", "identity for the NVMe pair behind the PCI bridge, at hotplug only",
                    "hotplug", "0000:03:*"))

# A reload with this file must be refused, naming the file, line 4 and a column.
DAEMON_BROKEN_POLICY = """[[rule]]
name = "vm-broken"
description = "a misspelt key (tests/vm daemon)"
domian = "identity"
[rule.match]
kind = "nvme"
"""
DAEMON_BROKEN_AT = r"/etc/iommud/policies\.d/60-vm-broken\.toml:4:\d+"

DAEMON_CONF = 'log-level = "debug"\n'  # "reacted to ... in N ms" is a debug line

DAEMON_GUEST = r"""#!/bin/bash
set -u
iommuctl=@IOMMUCTL@
solo=0000:01:00.0 pair_a=0000:03:01.0 pair_b=0000:03:02.0 hp=@HOTPLUG@
exec {napfd}<> <(:)  # read -t on it sleeps without a fork: each fork costs ~0.1 s under TCG
nap() { read -r -t "$1" -u "$napfd" || true; }
mark() { local up; read -r up _ < /proc/uptime; echo "$1 $up" >> marks.txt; }
group_of() { local l; l=$(readlink -f "/sys/bus/pci/devices/$1/iommu_group" 2>/dev/null) && echo "${l##*/}"; }
facts() {  # facts NAME DEV...: each device's group, the group's type and the bound driver
    local name=$1 d g t drv; shift
    for d; do
        g=$(group_of "$d"); t=none; drv=none
        [[ -n $g ]] && read -r t < "/sys/kernel/iommu_groups/$g/type"
        [[ -e /sys/bus/pci/devices/$d/driver ]] && { drv=$(readlink "/sys/bus/pci/devices/$d/driver"); drv=${drv##*/}; }
        echo "$d ${g:-none} $t $drv"
    done > "$name.txt"
    echo "== $name"; cat "$name.txt"
}
show() {  # show NAME: what systemd says of the service
    systemctl show iommud.service -p ActiveState,SubState,StatusText,MainPID,NRestarts,Result \
        -p ExecMainStartTimestampMonotonic,ActiveEnterTimestampMonotonic > "$1.txt"
    echo "== $1"; cat "$1.txt"
}
entries() { journalctl -b -q -o json "$1" | grep -c '^{'; }  # entries FIELD=VALUE
wait_entries() {  # wait_entries FIELD=VALUE N: until the journal holds N entries with that field (60 s)
    local end=$((SECONDS + 60))
    until (( $(entries "$1") >= $2 )); do (( SECONDS < end )) || return 1; nap 0.2; done
}
# PID 1 logs each uevent it handles at debug (SIGRTMIN+22 below): "DEV: Processing udev action
# (SEQNUM=N, ACTION=A)", and wants a unit started in that same step.
pid1_saw() { journalctl -b -q -o cat _PID=1 | grep -c "^$1: Processing udev action (.*ACTION=$2)"; }
wait_pid1() {  # wait_pid1 DEV ACTION N: until PID 1 has handled N such uevents (60 s)
    local end=$((SECONDS + 60))
    until (( $(pid1_saw "$1" "$2") >= $3 )); do (( SECONDS < end )) || return 1; nap 0.2; done
}
# The daemon's debug entry after each worker, per PCI function it handled (IOMMUD_HANDLED=ADDRESS).
wait_handled() {  # wait_handled DEV...: until the daemon handled a "change" of each DEV sent now
    local d n=() i=0
    for d; do n+=("$(entries "IOMMUD_HANDLED=$d")"); done
    # Sent after the device's earlier uevents: udev keeps one device's events in order, and the
    # daemon reads its monitor socket in order, so once this change is handled, so are they.
    for d; do udevadm trigger --action=change "/sys/bus/pci/devices/$d"; done
    for d; do
        wait_entries "IOMMUD_HANDLED=$d" $((n[i] + 1)) || { echo "the daemon never handled a change of $d" | tee -a harness.txt; }
        i=$((i + 1))
    done
}
settle_service() {  # until systemd no longer sees a reload under way (60 s)
    local end=$((SECONDS + 60))
    while [[ $(systemctl show -p SubState --value iommud.service) == reload ]]; do
        (( SECONDS < end )) || return 1; nap 0.1
    done
}
reload() {  # reload NAME MESSAGE_ID: systemctl reload, then wait for the daemon's answer
    local before; before=$(entries "MESSAGE_ID=$2")
    mark "$1"
    systemctl reload iommud.service > "$1.out" 2>&1; echo $? > "$1.rc"
    wait_entries "MESSAGE_ID=$2" $((before + 1)) || echo "no $2 entry after $1" | tee -a harness.txt
    settle_service
    show "$1"
}

idle() {  # until udev's queue is empty and the daemon has had no worker for 2 s (120 s)
    local main kids= quiet=0 end=$((SECONDS + 120))
    udevadm settle --timeout=120
    main=$(systemctl show -p MainPID --value iommud.service)
    while (( quiet < 20 && SECONDS < end )); do
        kids=
        [[ $main != 0 ]] && read -r kids < "/proc/$main/task/$main/children"
        if [[ -z $kids ]]; then quiet=$((quiet + 1)); else quiet=0; fi
        nap 0.1
    done
}

journalctl --update-catalog
mark test-start
# (1) Started by systemd (the test unit is ordered after it: READY=1 came, or it failed).
show started
systemctl status iommud.service --no-pager -l > status-started.txt 2>&1
# (2) The coldplug, under the unit's hardening; udev's own coldplug (the trigger's replayed "add"
# uevents, which udevd may pass on after READY=1) included.
idle
mark coldplug-settled
facts coldplug $solo $pair_a $pair_b

# (3) An NVMe hot-added through QMP: the kernel shows it, then the daemon applies its rule.
echo "@@ready-for-hotplug"
mark hotplug-asked
end=$((SECONDS + 180))
until [[ -e /sys/bus/pci/devices/$hp ]]; do (( SECONDS < end )) || break; nap 0.05; done
seen=$EPOCHREALTIME
mark hotplug-seen
ok=0 g=
end=$((SECONDS + @DEADLINE@))
while [[ -e /sys/bus/pci/devices/$hp ]] && (( SECONDS < end )); do
    [[ -n $g ]] || g=$(group_of "$hp")
    t=
    [[ -n $g ]] && read -r t < "/sys/kernel/iommu_groups/$g/type"
    if [[ $t == identity && -e /sys/bus/pci/drivers/nvme/$hp ]]; then ok=1; break; fi
    nap 0.05
done
echo "$ok $seen $EPOCHREALTIME" > hotplug-reaction.txt
mark hotplug-done
echo "@@hotplug-handled"
udevadm settle --timeout=60
serial=none
for s in /sys/bus/pci/devices/$hp/nvme/nvme*/serial; do [[ -e $s ]] && read -r serial < "$s"; done
echo "$serial" > hotplug-serial.txt
ls /sys/bus/pci/devices > pci-devices.txt
facts hotplug $solo $pair_a $pair_b $hp

# (4) The journal: the entries with their fields, and the catalog's text.
journalctl -b -o json MESSAGE_ID=@WEAKENED@ > weakened.json
journalctl -b -x --no-pager MESSAGE_ID=@WEAKENED@ > weakened-x.txt 2>&1

# (4b) D-Bus: the distribution's dbus-daemon (socket-activated) with the installed bus policy,
# the daemon under its hardening. iommuctl goes through it; nobody may read, not apply.
busctl get-property org.iommud1 /org/iommud1 org.iommud1.Manager State > dbus-state.txt 2>&1
busctl --json=short get-property org.iommud1 /org/iommud1 org.iommud1.Manager Groups > dbus-groups.json 2>&1
$iommuctl status > dbus-status.txt 2>&1
$iommuctl apply --device $solo > dbus-apply.txt 2>&1; echo $? > dbus-apply.rc
setpriv --reuid=65534 --regid=65534 --clear-groups busctl get-property org.iommud1 /org/iommud1 \
    org.iommud1.Manager Mode > dbus-nobody-mode.txt 2>&1
setpriv --reuid=65534 --regid=65534 --clear-groups gdbus call --system --dest org.iommud1 \
    --object-path /org/iommud1 --method org.iommud1.Manager.Apply false "" > dbus-nobody-apply.txt 2>&1
echo $? > dbus-nobody-apply.rc

# (5) Reloads. PID 1 logs every notification it gets at debug level (SIGRTMIN+22; +23: info).
kill -s RTMIN+22 1
reload reload @LOADED@
cp /vm/in/60-vm-broken.toml /etc/iommud/policies.d/ && chmod 0644 /etc/iommud/policies.d/60-vm-broken.toml
reload broken-reload @REJECTED@
journalctl -b -o json MESSAGE_ID=@REJECTED@ > rejected.json
rm /etc/iommud/policies.d/60-vm-broken.toml
reload fixed-reload @LOADED@

# (6) Killed after the unbind, the service stopped: the service's next start recovers.
mark stop
systemctl stop iommud.service > stop.out 2>&1; echo $? > stop.rc
show stopped
# Stopped stays stopped when a driver is rebound (by hand here; iommuctl revert does the same).
mark rebind
binds=$(pid1_saw "$hp" bind)
echo "$hp" > /sys/bus/pci/drivers/nvme/unbind; echo "$hp" > /sys/bus/pci/drivers/nvme/bind
# The moment has passed once PID 1 has handled the bind uevent: a start it wanted is queued in that
# step, which ends before PID 1 answers systemctl; the journal is synced before the closing mark.
wait_pid1 "$hp" bind $((binds + 1)) || echo "PID 1 never handled the bind of $hp" | tee -a harness.txt
show after-rebind
journalctl --sync
mark rebind-checked
kill -s RTMIN+23 1
# From here on nothing but the test may start it (the udev rule's start is checked just above).
systemctl stop iommud.service; systemctl mask --runtime iommud.service > mask.out 2>&1
facts stopped-pair $pair_a $pair_b
# The apply below needs something to change: undo an earlier change of the pair's group (check (2)
# reports one), through the records, as an administrator would.
if [[ $(cut -d' ' -f3 stopped-pair.txt | sort -u) == identity ]]; then
    $iommuctl revert --device $pair_a > pre-revert.txt 2>&1
fi
facts before-kill $pair_a $pair_b
after_unbind() {  # after_unbind SIGNAL LOG CMD...: CMD under strace, which sends it SIGNAL as it
    # closes the first nvme unbind file it wrote: the unbind is done, nothing after it is (the apply scenario uses
    # iommuctl's test hook IOMMUD_TEST_STOP_AFTER instead)
    local sig=$1 log=$2; shift 2
    strace -qq -f -o /dev/null -P /sys/bus/pci/drivers/nvme/unbind -e trace=close \
        -e "inject=close:signal=$sig:when=1" "$@" > "$log" 2>&1
}
after_unbind SIGKILL killed-apply.txt $iommuctl apply --hotplug --device $pair_a
facts paused $pair_a $pair_b
ls /run/iommud > killed-run.txt 2>&1
systemctl unmask --runtime iommud.service >> mask.out 2>&1
mark restart
systemctl start iommud.service > restart.out 2>&1; echo $? > restart.rc
show restarted
facts recovered $solo $pair_a $pair_b $hp
ls /run/iommud > recovered-run.txt 2>&1
journalctl -b -o json MESSAGE_ID=@RECOVERED@ > recovered.json
# A later change of the pair (the recovery's rebind seen as a "bind" uevent) would come before the
# daemon's handling of a change sent now.
udevadm settle --timeout=60
wait_handled $pair_a $pair_b
facts recovered-later $pair_a $pair_b
mark restart-done

# (7) How exposed the service is, by systemd's own measure (informative).
systemd-analyze security iommud.service --no-pager > security.txt 2>&1; echo $? > security.rc
if [[ $(< security.rc) != 0 ]]; then  # fall back to the unit file alone
    systemd-analyze security --offline=true /usr/lib/systemd/system/iommud.service --no-pager \
        > security-offline.txt 2>&1
fi
grep -h 'Overall exposure level' security*.txt
systemd-analyze verify iommud.service > verify.txt 2>&1

journalctl -b -u iommud.service -o json > journal-iommud.json
journalctl -b -u iommud.service -o short-monotonic --no-pager > journal-iommud.txt
journalctl -b -o short-monotonic --no-pager > journal.txt
systemctl --failed --no-legend > failed-units.txt
echo "guest uptime at the end: $(cut -d' ' -f1 /proc/uptime)s"
"""

DBUS_POLICY = vmlib.HERE.parent.parent / "dbus" / "org.iommud1.conf"

DAEMON_HOTPLUG_DEADLINE = 60  # seconds from the NVMe's appearance to its group at identity, bound


@dataclasses.dataclass
class DaemonFiles:
    """What a package installs: the configured unit, the udev rules, the catalog, the binaries."""

    iommud: Path
    service: Path
    rules: list[Path]
    catalog: Path


def _exec_path(unit_text: str, binary: str) -> str | None:
    """The absolute path the unit's ExecStart= runs, if it runs `binary`."""
    m = re.search(rf"^ExecStart=[-@:+!]*(/\S*/{re.escape(binary)})(\s|$)", unit_text, re.M)
    return m.group(1) if m else None


def _journal(path: Path) -> list[dict]:
    """`journalctl -o json` output: one entry per line; binary-safe fields (byte arrays) decoded."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        e = json.loads(line)
        out.append({k: bytes(v).decode(errors="replace") if isinstance(v, list) and
                    all(isinstance(x, int) for x in v) else v for k, v in e.items()})
    return out


def _show(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _marks(path: Path) -> dict[str, float]:
    """The guest's phase marks: name -> CLOCK_MONOTONIC (= the journal's) in microseconds."""
    return {n: float(t) * 1e6 for n, t in (line.split() for line in path.read_text().splitlines())}


def _catalog_subject(catalog: Path, message_id: str) -> str | None:
    m = re.search(rf"^-- {message_id}\n(?:.*\n)*?Subject: (.*)$", catalog.read_text(), re.M)
    return m.group(1) if m else None


def _dbus_problems(out: Path, solo: tuple[str, str, str]) -> list[str]:
    """(4b): org.iommud1 on the guest's real system bus, from the hardened service."""
    problems = []
    text = {n: (out / n).read_text().strip() for n in
            ("dbus-state.txt", "dbus-groups.json", "dbus-status.txt", "dbus-apply.txt", "dbus-apply.rc",
             "dbus-nobody-mode.txt", "dbus-nobody-apply.txt", "dbus-nobody-apply.rc")}
    if text["dbus-state.txt"] != 's "running"':
        problems.append(f"busctl get-property State: {text['dbus-state.txt']!r}, not 's \"running\"'")
    try:
        groups = {g[0]: g for g in json.loads(text["dbus-groups.json"])["data"]}
        if groups.get(int(solo[0]), [None, None])[1] != solo[1]:
            problems.append(f"the Groups property says group {solo[0]} is {groups.get(int(solo[0]))}, sysfs: {solo[1]}")
    except (ValueError, KeyError, TypeError) as e:
        problems.append(f"the Groups property: {e}: {text['dbus-groups.json'][:300]!r}")
    if "iommud is running" not in text["dbus-status.txt"]:
        problems.append(f"iommuctl status does not show the daemon: {text['dbus-status.txt'][-400:]!r}")
    if text["dbus-apply.rc"] != "0" or "lock" in text["dbus-apply.txt"]:
        problems.append(f"iommuctl apply through the daemon exited {text['dbus-apply.rc']}: {text['dbus-apply.txt']!r}")
    if not text["dbus-nobody-mode.txt"].startswith('s "'):
        problems.append(f"nobody could not read the Mode property: {text['dbus-nobody-mode.txt']!r}")
    # The shipped bus policy lets it through; iommud refuses it without polkit's yes, naming the action.
    if (text["dbus-nobody-apply.rc"] == "0" or "org.freedesktop.DBus.Error.AccessDenied" not in text["dbus-nobody-apply.txt"]
            or "org.iommud1.apply" not in text["dbus-nobody-apply.txt"]):
        problems.append(f"Apply as nobody was not refused for want of org.iommud1.apply: {text['dbus-nobody-apply.txt']!r}")
    return problems


def _daemon_problems(out: Path, files: DaemonFiles, notes: list[str], timing: dict[str, float]) -> list[str]:
    problems: list[str] = []
    facts = {n: facts_of(out / f"{n}.txt") for n in
             ("coldplug", "hotplug", "stopped-pair", "before-kill", "paused", "recovered", "recovered-later")}
    show = {n: _show(out / f"{n}.txt") for n in
            ("started", "reload", "broken-reload", "fixed-reload", "stopped", "after-rebind", "restarted")}
    marks = _marks(out / "marks.txt")
    unit_log = _journal(out / "journal-iommud.json")
    tail = "\n".join((out / "journal-iommud.txt").read_text().splitlines()[-25:])
    solo, pair_a, pair_b, hp = "0000:01:00.0", "0000:03:01.0", "0000:03:02.0", DAEMON_HOTPLUG_ADDR

    def ts(e: dict) -> int:
        return int(e.get("__MONOTONIC_TIMESTAMP", 0))

    def uevents_before(e: dict) -> list[str]:
        """The uevents the daemon logged (at debug) in the 5 s before entry e."""
        return [x.get("MESSAGE", "") for x in unit_log if ts(e) - 5e6 <= ts(x) < ts(e)
                and re.match(r"(pci|nvme|block|net) (add|bind|change) ", x.get("MESSAGE", ""))]

    def running(name: str, pid: str | None = None) -> None:
        s = show[name]
        if (s.get("ActiveState"), s.get("SubState")) != ("active", "running"):
            problems.append(f"{name}: iommud.service is {s.get('ActiveState')} ({s.get('SubState')}, result "
                            f"{s.get('Result')}), not active (running); the unit's journal ends:\n{tail}")
        elif pid is not None and s.get("MainPID") != pid:
            problems.append(f"{name}: the main PID changed from {pid} to {s.get('MainPID')}")

    # (1) started and READY=1 (Type=notify: active only after READY=1)
    s = show["started"]
    running("started")
    if not re.fullmatch(r"\d+ devices tuned, \d+ advised, \d+ refused, \d+ failed", s.get("StatusText", "")):
        problems.append(f"started: STATUS= is {s.get('StatusText')!r}, not 'N devices tuned, N advised, ...'")
    elif not s["StatusText"].endswith(" 0 failed"):
        problems.append(f"started: {s['StatusText']}")
    if s.get("ActiveEnterTimestampMonotonic", "0") != "0":
        ready = (int(s["ActiveEnterTimestampMonotonic"]) - int(s["ExecMainStartTimestampMonotonic"])) / 1e6
        notes.append(f"READY=1 {ready:.2f}s after systemd started iommud (guest clock, TCG); "
                     f"status: {s.get('StatusText')}")
    if not any(e.get("MESSAGE_ID") == MSG_STARTED for e in unit_log):
        problems.append(f"no 'started' entry (MESSAGE_ID={MSG_STARTED}) from the service")

    weakened = _journal(out / "weakened.json")

    def weakened_entry(rule: str, group: str) -> dict | None:
        for e in weakened:
            if e.get("IOMMUD_RULE") == rule and e.get("IOMMUD_GROUP") == group and e.get("IOMMUD_TO") == "identity":
                return e
        problems.append(f"no weakened entry (MESSAGE_ID={MSG_WEAKENED}) with IOMMUD_RULE={rule}, "
                        f"IOMMUD_GROUP={group}, IOMMUD_TO=identity; there are: "
                        + "; ".join(e.get("MESSAGE", "") for e in weakened))
        return None

    # (2) the coldplug wrote the solo NVMe's group type, as the service
    group, typ, drv = facts["coldplug"][solo]
    if (typ, drv) != ("identity", "nvme"):
        problems.append(f"coldplug: {solo}'s group {group} is {typ}, bound to {drv}: not identity and nvme")
    cold = weakened_entry("vm-solo-identity", group)
    if cold is not None:
        if cold.get("_SYSTEMD_UNIT") != "iommud.service":
            problems.append(f"the coldplug's entry comes from {cold.get('_SYSTEMD_UNIT')}, not iommud.service")
        notes.append(f"coldplug: group {group} {cold.get('IOMMUD_FROM')} -> identity by the service")
    # A rule with when = "hotplug" must not act on a device present at boot: udev's coldplug replays
    # an "add" uevent for each (the trigger's), which is no device appearing.
    ready_at = int(show["started"].get("ActiveEnterTimestampMonotonic") or 0)
    for e in weakened:
        if e.get("IOMMUD_RULE") in ("vm-pair-identity", "vm-hotplug-identity") and ts(e) < marks["hotplug-asked"]:
            problems.append(f"before any device was hot-added, rule {e.get('IOMMUD_RULE')} (when = \"hotplug\") "
                            f"changed group {e.get('IOMMUD_GROUP')}, whose devices were there at boot, "
                            f"{(ts(e) - ready_at) / 1e6:.1f}s after READY=1: {e.get('MESSAGE')!r}; the uevents the "
                            f"daemon logged in the 5 s before: {uevents_before(e)}")
    if facts["coldplug"][pair_a][1] == "identity":
        problems.append(f"with udev's coldplug done, the pair's group {facts['coldplug'][pair_a][0]} is identity, "
                        f"but its rule acts at hotplug only")

    # (3) the hot-added NVMe got its hotplug rule within the deadline
    ok, seen, done = (out / "hotplug-reaction.txt").read_text().split()
    serial = (out / "hotplug-serial.txt").read_text().strip()
    if "seen" not in timing:
        problems.append("the host never hot-added the NVMe (no @@ready-for-hotplug?)")
    elif hp not in (out / "pci-devices.txt").read_text().split():
        problems.append(f"scenario set-up: no device at {hp} after the hot-add; PCI devices: "
                        f"{(out / 'pci-devices.txt').read_text().split()}")
    elif serial != "hp_nvme":
        problems.append(f"scenario set-up: {hp} is NVMe serial {serial!r}, not the hot-added hp_nvme")
    elif ok != "1":
        problems.append(f"hotplug: {hp} not at identity and bound to nvme within {DAEMON_HOTPLUG_DEADLINE}s of "
                        f"appearing: now {facts['hotplug'].get(hp)}; the unit's journal ends:\n{tail}")
    else:
        reacted = [e.get("MESSAGE", "") for e in unit_log if e.get("MESSAGE", "").startswith(f"reacted to {hp}")]
        notes.append(f"hotplug: {hp} at identity and bound {float(done) - float(seen):.1f}s after it appeared in "
                     f"sysfs (device_add -> guest saw it handled {timing.get('handled', 0):.1f}s); daemon: "
                     + ("; ".join(reacted) or "no 'reacted to' line"))
    if hp in facts["hotplug"]:
        hot = weakened_entry("vm-hotplug-identity", facts["hotplug"][hp][0])
        if hot is not None and hot.get("_SYSTEMD_UNIT") != "iommud.service":
            problems.append(f"the hotplug entry comes from {hot.get('_SYSTEMD_UNIT')}, not iommud.service")

    # (4) every weakened entry has its fields; journalctl -x shows the catalog's text for it
    explained = (out / "weakened-x.txt").read_text()
    subject = _catalog_subject(files.catalog, MSG_WEAKENED)
    if subject is None:
        problems.append(f"{files.catalog} has no entry for {MSG_WEAKENED}")
    for e in weakened:
        missing = [f for f in ("IOMMUD_DEVICE", "IOMMUD_GROUP", "IOMMUD_RULE", "IOMMUD_POLICY", "IOMMUD_FROM",
                               "IOMMUD_TO", "IOMMUD_RISK") if not e.get(f)]
        if missing:
            problems.append(f"weakened entry {e.get('MESSAGE')!r} lacks {', '.join(missing)}")
        if e.get("PRIORITY") != "4":
            problems.append(f"weakened entry {e.get('MESSAGE')!r} has priority {e.get('PRIORITY')}, not 4 (warning)")
        if subject is not None:
            want = re.sub(r"@(\w+)@", lambda m: e.get(m.group(1), m.group(0)), subject)
            if f"░░ Subject: {want}" not in explained:
                problems.append(f"journalctl -x does not show the catalog subject {want!r} for "
                                f"{e.get('MESSAGE')!r}:\n{explained[-1500:]}")
    if not weakened:
        problems.append(f"journalctl -o json MESSAGE_ID={MSG_WEAKENED} found nothing")

    # (5) reloads: RELOADING=1 then READY=1 from the daemon, still running; a broken file is refused
    pid = show["started"].get("MainPID")
    for name in ("reload", "broken-reload", "fixed-reload"):
        running(name, pid)
        rc = (out / f"{name}.rc").read_text().strip()
        if rc != "0":
            problems.append(f"{name}: systemctl reload exited {rc}: {(out / f'{name}.out').read_text()}")
    t0, t1 = marks["reload"], marks["broken-reload"]
    said = [e.get("MESSAGE", "") for e in unit_log if e.get("_PID") == "1"
            and t0 <= ts(e) < t1 and "notification message" in e.get("MESSAGE", "")]
    states = [m for m in said if re.search(r"\((RELOADING=1|READY=1)", m)]
    if not (len(states) >= 2 and "RELOADING=1" in states[0] and any("READY=1" in m for m in states[1:])):
        problems.append("reload: PID 1 did not get RELOADING=1 then READY=1 from iommud; it got: "
                        + ("; ".join(said) or "no notification"))
    else:
        notes.append("reload: " + " then ".join(re.sub(r".*\((.*)\)$", r"\1", m) for m in states))
    rejected = [e for e in _journal(out / "rejected.json") if ts(e) >= t1]
    if not rejected:
        problems.append(f"broken reload: no entry MESSAGE_ID={MSG_REJECTED}; the unit's journal ends:\n{tail}")
    elif not re.search(DAEMON_BROKEN_AT, rejected[0].get("MESSAGE", "")):
        problems.append(f"broken reload: the entry does not name {DAEMON_BROKEN_AT}: {rejected[0].get('MESSAGE')!r}")
    else:
        notes.append("broken reload refused: " + rejected[0]["MESSAGE"].replace("\n", " | "))

    # (6) stopped, killed after unbind by iommuctl, recovered by the service's start
    if show["stopped"].get("ActiveState") != "inactive":
        problems.append(f"systemctl stop: the service is {show['stopped'].get('ActiveState')}: "
                        f"{(out / 'stop.out').read_text()}")
    s = show["after-rebind"]
    # PID 1 logs at debug here: the start job it enqueues (not run yet, perhaps) as it handles the bind.
    queued = [line for line in (out / "journal.txt").read_text().splitlines()
              if line.startswith("[") and marks["rebind"] <= float(line[1:line.index("]")]) * 1e6 < marks["rebind-checked"]
              and "Trying to enqueue job iommud.service/start" in line]
    if s.get("ActiveState") != "inactive" or queued:
        # PID 1 logs at debug here: the udev action that made it enqueue the start job, and the job.
        lines = [line for line in (out / "journal.txt").read_text().splitlines()
                 if line.startswith("[") and marks["stop"] <= float(line[1:line.index("]")]) * 1e6 < marks["restart"]]
        started = [i for i, line in enumerate(lines) if "Trying to enqueue job iommud.service/start" in line]
        cause = [line for line in lines[:started[0]] if "Processing udev action" in line][-1:] if started else []
        started = cause + [lines[i] for i in started[:1]] + [line for line in lines if "Started iommud" in line][:1]
        problems.append(f"systemctl stop did not keep iommud stopped: after {hp} was unbound from nvme and bound "
                        f"again, the service is {s.get('ActiveState')} ({s.get('SubState')}, PID {s.get('MainPID')}); "
                        f"PID 1 said: {started}")
    if (out / "pre-revert.txt").exists():
        notes.append(f"the service stopped, the pair's group was reverted first: "
                     f"{(out / 'pre-revert.txt').read_text().strip()}")
    if facts["before-kill"][pair_a][1] == "identity":
        problems.append("the pair's group is identity before the killed apply: nothing left to unbind")
    if facts["paused"][pair_a][2] != "none":
        problems.append(f"at the pause {pair_a} is still bound to {facts['paused'][pair_a][2]}: "
                        f"{(out / 'killed-apply.txt').read_text()}")
    if "transaction.journal" not in (out / "killed-run.txt").read_text():
        problems.append(f"no transaction journal left by the killed apply: {(out / 'killed-run.txt').read_text()}")
    restart_rc = (out / "restart.rc").read_text().strip()
    if restart_rc != "0":
        problems.append(f"systemctl start after the kill exited {restart_rc}: {(out / 'restart.out').read_text()}")
    running("restarted")
    pair_group = facts["before-kill"][pair_a][0]
    # Nothing was hot-added: the pair's rule (when = "hotplug") must leave the rolled-back group alone.
    again = [e for e in unit_log if e.get("MESSAGE_ID") == MSG_WEAKENED and e.get("IOMMUD_GROUP") == pair_group
             and ts(e) >= marks["restart"]]
    for e in again:
        problems.append(f"after its start rolled group {pair_group} back, the daemon changed it again by rule "
                        f"{e.get('IOMMUD_RULE')} (when = \"hotplug\") "
                        f"{(ts(e) - int(show['restarted'].get('ActiveEnterTimestampMonotonic') or 0)) / 1e6:.1f}s "
                        f"after READY=1, with no device hot-added: {e.get('MESSAGE')!r}; the uevents the daemon "
                        f"logged in the 5 s before: {uevents_before(e)}")
    for dev in (pair_a, pair_b):
        before, after, later = facts["before-kill"][dev], facts["recovered"][dev], facts["recovered-later"][dev]
        if after[2] != "nvme" or (after[1] != before[1] and not again):
            problems.append(f"after the service's start {dev} is {after[1]} bound to {after[2]}, not {before[1]} "
                            f"bound to nvme as before the killed apply")
        if later[1:] != after[1:]:
            notes.append(f"after the recovery {dev} went on to {later[1]} bound to {later[2]}")
    recovered = [e for e in _journal(out / "recovered.json") if ts(e) >= marks["restart"]]
    if not recovered:
        problems.append(f"no entry MESSAGE_ID={MSG_RECOVERED} after the restart; the unit's journal ends:\n{tail}")
    else:
        r = recovered[0]
        if r.get("IOMMUD_GROUP") != pair_group or r.get("_SYSTEMD_UNIT") != "iommud.service":
            problems.append(f"the recovered entry is for group {r.get('IOMMUD_GROUP')} from "
                            f"{r.get('_SYSTEMD_UNIT')}, not group {pair_group} from iommud.service")
        notes.append(f"recovered at start: {r.get('MESSAGE')}")
    if "transaction.journal" in (out / "recovered-run.txt").read_text():
        problems.append("the transaction journal is still in /run/iommud after the service's start")

    if (out / "harness.txt").exists():
        problems.append(f"the guest waited in vain: {(out / 'harness.txt').read_text().strip()}")

    problems += _dbus_problems(out, facts["hotplug"][solo])

    # (7) systemd-analyze security: informative
    sec = " ".join(p.read_text() for p in sorted(out.glob("security*.txt")))
    m = re.search(r"Overall exposure level for iommud\.service: ([0-9.]+) (\S+)", sec)
    notes.append(f"systemd-analyze security in the guest: {m.group(1)} {m.group(2)}" if m else
                 f"systemd-analyze security gave no score: {sec[-300:]}")
    return problems


def run_daemon(series: str, iommuctl: Path, files: DaemonFiles, out_dir: Path | None = None,
               echo: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    for what, p in (("iommud", files.iommud), ("iommud.service (configured by CMake)", files.service),
                    ("the journal catalog", files.catalog), *(("a udev rules file", r) for r in files.rules)):
        if not p.is_file():
            raise vmlib.SetupMissing(f"{what} not found at {p}: build first")
    if not files.rules:
        raise vmlib.SetupMissing("no udev rules (udev/*.rules) to install")
    unit = files.service.read_text()
    exec_path = _exec_path(unit, "iommud")
    if exec_path is None:
        raise vmlib.SetupMissing(f"{files.service}: no ExecStart= running an absolute .../iommud")
    files_in, guest_iommuctl = _prepare_iommuctl(iommuctl)
    files_in["60-vm-broken.toml"] = DAEMON_BROKEN_POLICY
    # Where a package puts them; the binary is copied now, so a rebuild cannot swap it mid-boot.
    root = {
        "/usr/lib/systemd/system/iommud.service": files.service,
        exec_path: files.iommud,
        "/usr/lib/systemd/catalog/iommud.catalog": files.catalog,
        "/etc/iommud/iommud.conf": DAEMON_CONF,
        "/etc/iommud/policies.d/50-vm-coldplug.toml": DAEMON_COLDPLUG_POLICY,
        "/etc/iommud/policies.d/50-vm-hotplug.toml": DAEMON_HOTPLUG_POLICY,
        **{f"/usr/lib/udev/rules.d/{r.name}": r for r in files.rules},
        "/usr/share/dbus-1/system.d/org.iommud1.conf": DBUS_POLICY,
    }
    timing: dict[str, float] = {}

    def driver(vm: vmlib.Vm) -> None:
        # systemd prefixes the test's console lines ("[ 65.2] run-test[233]: @@...")
        vm.wait_console(r"@@ready-for-hotplug$", timeout=360)
        t = time.monotonic()
        vm.hotplug_nvme("hp_nvme", port="hp0")
        timing["seen"] = t
        vm.wait_console(r"@@hotplug-handled$", timeout=300)
        timing["handled"] = time.monotonic() - t

    script = (DAEMON_GUEST.replace("@IOMMUCTL@", guest_iommuctl).replace("@HOTPLUG@", DAEMON_HOTPLUG_ADDR)
              .replace("@DEADLINE@", str(DAEMON_HOTPLUG_DEADLINE)).replace("@WEAKENED@", MSG_WEAKENED)
              .replace("@LOADED@", MSG_LOADED).replace("@REJECTED@", MSG_REJECTED)
              .replace("@RECOVERED@", MSG_RECOVERED))
    r = vmlib.boot(kernel, _intel(False), script, init="systemd", files_in=files_in, root_files=root,
                   systemd_wants=["dbus.socket", "iommud.service"], driver=driver, timeout=540, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"daemon on {series}", r, lambda out, notes: _daemon_problems(out, files, notes, timing))
