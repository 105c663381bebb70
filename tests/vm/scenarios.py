"""The tests/vm scenarios: machines, what their kernel must show, and checks.

Each status scenario boots once and batches everything into that boot: the
kernel's own facts are collected, checked against what the scenario set up
(so a harness mistake cannot pass silently), then `iommuctl status --json` is
checked against those facts (check_status.py).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
import time
from pathlib import Path

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


def guest_script(iommuctl: str) -> str:
    return f"#!/bin/bash\n{COLLECT} {iommuctl}\n"


@dataclasses.dataclass
class Outcome:
    name: str
    seconds: float
    accel: str
    problems: list[str]
    notes: list[str]
    out_dir: Path


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
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        facts, probs = check_status.check(r.out_dir)
        notes.append(check_status.summary(facts))
        problems += scenario_problems(sc, facts) + probs
    except (vmlib.GuestFailed, FileNotFoundError) as e:
        problems.append(str(e))
    return Outcome(f"status {name} on {series}", r.seconds, r.accel, problems, notes, r.out_dir)


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
sleep 0.5
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

APPLY_POLICY = """[[rule]]
name = "vm-nvme-identity"
description = "identity for every NVMe drive (tests/vm)"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"

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

# Killed right after the unbind: the next writer (here `iommuctl revert`) finds the journal and rebinds.
mkdir /tmp/pause-kill
$iommuctl apply --hotplug --policies /tmp/pol --device "$disk" --test-pause-after-unbind /tmp/pause-kill \
    > killed-apply.txt 2>&1 &
pid=$!
wait_for -f /tmp/pause-kill/paused
disk_facts killed-paused
kill -9 $pid; wait $pid
ls /run/iommud > killed-run.txt
$iommuctl revert > recover.txt 2>&1; echo $? > recover.rc
cat recover.txt
disk_facts recovered
ls /run/iommud > recovered-run.txt

# Removed (QMP device_del from the host) while paused right after the unbind: the transaction ends
# without error and every remaining device is bound.
mkdir /tmp/pause-del
$iommuctl apply --hotplug --policies /tmp/pol --device "$disk" --test-pause-after-unbind /tmp/pause-del \
    > removed-apply.txt 2>&1 &
pid=$!
wait_for -f /tmp/pause-del/paused
echo "@@paused-after-unbind"
wait_for ! -e "/sys/bus/pci/devices/$disk"
touch /tmp/pause-del/resume
wait $pid; echo $? > removed.rc
cat removed-apply.txt
facts removed
ls /run/iommud > removed-run.txt
"""


def _facts(path: Path) -> dict[str, tuple[str, str, str]]:
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
    (mounted,), (paused,), (recovered,) = (_facts(out / f"{n}.txt").values()
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
    for dev, (_, _, drv) in _facts(out / "removed.txt").items():
        if drv != "nvme":
            problems.append(f"after {disk} was removed mid-transaction, {dev} is bound to {drv}, not nvme")
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
    machine = _intel(False)
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

    r = vmlib.boot(kernel, machine, APPLY_GUEST.replace("@IOMMUCTL@", guest_path), files_in=files,
                   driver=driver, timeout=420, out_dir=out_dir, echo=echo)
    shutil.rmtree(staging, ignore_errors=True)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        before, applied, reverted = (_facts(r.out_dir / f"{n}.txt") for n in ("before", "applied", "reverted"))
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
        held, held_txt = _facts(r.out_dir / "held.txt"), (r.out_dir / "held-apply.txt").read_text()
        if held[solo][1] != before[solo][1] or held[solo][2] != "nvme":
            problems.append(f"a held NVMe was changed: {held[solo]}; apply said: {held_txt}")
        if "held by dm-0" not in held_txt or "unbinding it would take it away" not in held_txt:
            problems.append(f"apply does not say the held NVMe is in use: {held_txt}")
        problems += _disk_problems(r.out_dir, removal)
        timing = re.findall(r"done in ([0-9.]+ ms) \(([0-9.]+ ms) of it in the kernel", apply_txt)
        rings_timing = re.findall(r"rings \S+ \d+ -> \d+ in ([0-9.]+ ms) \(([0-9.]+ ms) of it in the kernel", apply_txt)
        notes.append(f"before: {before[solo][1]}; domain transactions: " +
                     ", ".join(f"{t} ({k} kernel)" for t, k in timing) + "; e1000e ring changes: " +
                     ", ".join(f"{t} ({k} kernel)" for t, k in rings_timing) + f"; 6.4+ group change: {multi}"
                     + f"; device_del of the paused NVMe -> DEVICE_DELETED {removal.get('seconds', 0):.1f}s")
    except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError) as e:
        problems.append(str(e))
    return Outcome(f"apply on {series}", r.seconds, r.accel, problems, notes, r.out_dir)
