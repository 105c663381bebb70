"""The arm64 scenarios: Debian's arm64 kernels under qemu-system-aarch64 -M virt with an SMMUv3.

The guest's root is an arm64 userland unpacked from Debian's packages by tests/vm/setup
(vmlib.ARCHES["arm64"]); it runs the arm64 build of iommuctl/iommud (scripts/build-arm64), which
the tests take as an input directory and fail without.  Devices: an NVMe on its own root port,
an e1000e on its own root port, an empty hot-pluggable root port (vmlib.DEVICES).  On virt the
root ports have no ACS quirks as on q35: each endpoint shares its group with its root port.

status (one boot each): the kernel's facts against `iommuctl status --json`, by the same
checker as x86 (check_status.py), and the scenario's own state (scenarios.scenario_problems).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import check_status
import scenarios
import vmlib

ARCH = "arm64"
DEVICES = ["nvme-solo", "e1000e", "hotplug-port"]
NVME, NIC = "0000:01:00.0", "0000:02:00.0"  # behind root ports 00:01.0 and 00:02.0


def _virt(iommu: str = "smmuv3", *cmdline: str) -> vmlib.Machine:
    return vmlib.Machine(arch=ARCH, iommu=iommu, cmdline=list(cmdline), devices=list(DEVICES))


def _virt_its(*cmdline: str) -> vmlib.Machine:
    """virt with an SMMUv3 and a GICv3 ITS, its 9p shares through the SMMU: the host that can earn
    level 2 on arm64 (docs/score.md)."""
    m = _virt("smmuv3", *cmdline)
    m.gic, m.shares_translated = 3, True
    return m


# Debian's arm64 kernels: CONFIG_IOMMU_DEFAULT_DMA_STRICT=y, CONFIG_ARM_SMMU_V3=y (docs/kernel.md §9).
STATUS_SCENARIOS: dict[str, scenarios.StatusScenario] = {
    "smmu": scenarios.StatusScenario(
        "SMMUv3, the distribution default: translated, strict invalidation: groups DMA; a GICv3 ITS",
        _virt_its(), "arm-smmu-v3", "Translated", "strict", group_type="DMA"),
    "smmu-lazy": scenarios.StatusScenario(
        "SMMUv3 with iommu.strict=0: lazy invalidation, groups DMA-FQ; a GICv3 ITS",
        _virt_its("iommu.strict=0"), "arm-smmu-v3", "Translated", "lazy", group_type="DMA-FQ"),
    "smmu-pt": scenarios.StatusScenario(
        "SMMUv3 with iommu.passthrough=1: identity for every group",
        _virt("smmuv3", "iommu.passthrough=1"), "arm-smmu-v3", "Passthrough", None, group_type="identity"),
    "none": scenarios.StatusScenario(
        "virt without an SMMU: no unit, no groups", _virt("none"), "none"),
    # docs/kernel.md §1.5: iommu= is x86's. On arm64 the kernel does not know it: the SMMU stays on,
    # translated and strict as the config says, and iommuctl must read it so (not "off", not identity).
    "smmu-x86-params": scenarios.StatusScenario(
        "SMMUv3 with x86's iommu=off iommu=pt, unknown to arm64: the distribution default stands, groups DMA; "
        "a GICv3 ITS",
        _virt_its("iommu=off", "iommu=pt"), "arm-smmu-v3", "Translated", "strict", group_type="DMA"),
}
# The protection level each status guest must get, by docs/score.md's rules (not by what iommuctl
# prints). No guest has an untrusted device or pcie_acs_override=, and arm64 firmware reports no
# pre-boot DMA protection, so level 3 is out of reach everywhere.
LEVELS = {
    # Every endpoint in a DMA group (the 9p shares translated too), MSIs through the ITS: level 2.
    "smmu": 2,
    "smmu-x86-params": 2,
    # DMA-FQ (mapped-window) costs only level 3's strict-invalidation: level 2 as well.
    "smmu-lazy": 2,
    # identity groups (and the shares bypassing the SMMU) reach all memory: level 0. Its GICv2m
    # keeps msi-isolation off, which this guest proves.
    "smmu-pt": 0,
    # No IOMMU: level 0, and a GICv2m.
    "none": 0,
}
X86_PARAMS = ("iommu=", "intel_iommu=", "amd_iommu=")
# One of them as a kernel parameter: not an XML attribute such as libvirt's <driver iommu='on'/>,
# which virtio-bypasses-iommu names on every architecture.
X86_PARAM = re.compile(r"\b(?:intel_|amd_)?iommu=(?!['\"])")


def binaries(build: Path) -> tuple[Path, Path]:
    """iommuctl and iommud of the arm64 build directory; SetupMissing unless both are AArch64."""
    out = []
    for name in ("iommuctl", "iommud"):
        p = build / "bin" / name
        if not p.is_file():
            raise vmlib.SetupMissing(f"{p} missing: build it with scripts/build-arm64 {build}")
        head = p.read_bytes()[:20]
        if head[:4] != b"\x7fELF" or int.from_bytes(head[18:20], "little") != 183:  # EM_AARCH64
            raise vmlib.SetupMissing(f"{p} is not an AArch64 ELF binary: build it with scripts/build-arm64")
        out.append(p)
    return out[0], out[1]


def _share(build: Path, more: dict) -> dict:
    """What a boot's share carries: the arm64 build's iommuctl (at /vm/in/iommuctl) and iommud, and `more`."""
    iommuctl, iommud = binaries(build)
    files, _ = scenarios._prepare_iommuctl(iommuctl)  # noqa: SLF001 (shared with the other scenarios)
    return {**files, "iommud": iommud, **more}


def run_status(name: str, series: str, build: Path, out_dir: Path | None = None,
               echo: bool = False) -> vmlib.Outcome:
    sc = STATUS_SCENARIOS[name]
    kernel = vmlib.find_kernel(series, ARCH)
    iommuctl, _ = binaries(build)
    files, guest_path = scenarios._prepare_iommuctl(iommuctl)
    # The kernel's own name for its architecture, which iommuctl reads too (docs/kernel.md §1.5).
    script = scenarios.guest_script(guest_path) + 'read -r m < /proc/sys/kernel/arch && echo "$m" > arch.txt\n'
    # The chip behind each interrupt, as the kernel names it (docs/kernel.md §4.2).
    script += 'cat /sys/kernel/irq/*/chip_name > irq-chips.txt\n'
    r = vmlib.boot(kernel, sc.machine, script, files_in=files, timeout=300, out_dir=out_dir, echo=echo)

    def arm64_problems(facts: check_status.KernelFacts) -> list[str]:
        problems = []
        arch_file = r.out_dir / "arch.txt"
        arch = arch_file.read_text().strip() if arch_file.is_file() else None
        if arch != "aarch64":
            problems.append(f"/proc/sys/kernel/arch reads {arch!r}, not 'aarch64'")
        problems += x86_param_problems(r.out_dir, [p for p in sc.machine.cmdline if p.startswith(X86_PARAMS)])
        problems += msi_and_level_problems(r.out_dir, sc.machine.gic, LEVELS[name])
        # Groups exist only for devices whose driver bound (device-tree hosts configure the IOMMU
        # at probe): both endpoints must be in one.
        if sc.group_type:
            members = {m for _, ms in facts.groups.values() for m in ms}
            problems += [f"scenario set-up: {a} is in no IOMMU group (its driver did not bind?)"
                         for a in (NVME, NIC) if a not in members]
        return problems

    return vmlib.judged(f"arm64 status {name} on {series}", r,
                        lambda out, notes: scenarios.status_problems(sc, out, notes, arm64_problems))


def msi_isolation_of(chips: list[str]) -> str:
    """What the kernel's interrupt chips say of MSI isolation (docs/kernel.md §4.2): on when every
    MSI goes through an ITS, off when any goes through a GICv2m or MBI frame, unknown with no MSI."""
    msi = [c for c in chips if c.startswith("ITS") or any(k in c for k in ("MSI", "v2m", "MBI"))]
    if not msi:
        return "unknown"
    return "on" if all(c.startswith("ITS") for c in msi) else "off"


def msi_and_level_problems(out: Path, gic: int, level: int) -> list[str]:
    """The guest's MSI isolation, from its own interrupt chips and boot log, against iommuctl's
    msi-isolation protection; and iommuctl's level against docs/score.md's for this guest."""
    problems = []
    chips = (out / "irq-chips.txt").read_text().split() if (out / "irq-chips.txt").is_file() else []
    truth = msi_isolation_of(chips)
    dmesg = (out / "dmesg.txt").read_text(errors="replace")
    its_logged = re.search(r"^.*\bITS\b.*$", dmesg, re.M) is not None
    want = "on" if gic == 3 else "off"
    if truth != want or its_logged != (gic == 3):
        problems.append(f"scenario set-up: a GICv{gic} guest's MSIs read {truth} from its chips "
                        f"({sorted(set(chips))}), ITS in the boot log: {its_logged}; expected {want}")
    status = json.loads((out / "status.json").read_text())
    host = {p.get("id"): p.get("state") for p in status.get("protections", {}).get("host", [])}
    if host.get("msi-isolation") != truth:
        problems.append(f"msi-isolation: iommuctl says {host.get('msi-isolation')!r}, the kernel's chips say {truth!r}")
    for x86 in ("interrupt-remapping", "x2apic"):
        if host.get(x86) != "not-applicable":
            problems.append(f"{x86}: iommuctl says {host.get(x86)!r} on arm64, not 'not-applicable'")
    got = status.get("score", {}).get("level")
    if got != level:
        unmet = [c.get("id") for c in status.get("score", {}).get("criteria", []) if not c.get("met")]
        problems.append(f"protection level: iommuctl says {got}, docs/score.md gives {level} (unmet: {unmet})")
    return problems


def x86_param_problems(out: Path, params: list[str]) -> list[str]:
    """x86's parameters on arm64: the kernel must say it does not know them, and iommuctl must say so
    too; and no remedy of iommuctl's may name one, whatever the command line (docs/kernel.md §1.5)."""
    problems = []
    status = json.loads((out / "status.json").read_text())
    for f in status.get("findings", []):
        for r in f.get("remedies", []):
            if X86_PARAM.search(r.get("action", "")):
                problems.append(f"finding {f.get('id')} suggests an x86 parameter on arm64: {r.get('action')!r}")
    if not params:
        return problems
    dmesg = (out / "dmesg.txt").read_text(errors="replace")
    m = re.search(r'Unknown kernel command line parameters "([^"]*)", will be passed to user space', dmesg)
    unknown = m.group(1).split() if m else []
    # init's environment holds one entry per name: a later iommu= replaces an earlier one
    # (init/main.c unknown_bootoption()), and the kernel lists what init gets.
    last = {p.split("=", 1)[0]: p for p in params}
    problems += [f"scenario set-up: the kernel does not call {p} unknown (its unknown parameters: {unknown})"
                 for p in last.values() if p not in unknown]
    conflict = " ".join(f.get("summary", "") for f in status.get("findings", []) if f.get("id") == "cmdline-conflict")
    problems += [f"iommuctl does not say that {p} is not a parameter of the arm64 kernel (cmdline-conflict: {conflict!r})"
                 for p in params if f"{p} is not a parameter of the arm64 kernel" not in conflict]
    return problems


# --------------------------------------------------------------------------
# apply: the Arm SMMU NIC remedy of policies/60-arm-smmu-nic.toml, as a user turns it on, and an
# NVMe group to identity and back.  One boot per kernel at the distribution default (strict: every
# group DMA).  The NIC's group is its root port (pcieport) + the e1000e: Linux 6.4 and later change
# it live (DMA -> DMA-FQ, drivers bound, pcieport may stay bound), 6.1 refuses any group of several
# devices (docs/kernel.md §2.2) and iommud must skip it saying so.

SHIPPED_NIC_POLICY = vmlib.HERE.parent.parent / "policies" / "60-arm-smmu-nic.toml"
NIC_RULE = "arm-smmu-internal-nic-lazy"
# What the policy's own comment tells a user to write in /etc/iommud/policies.d/90-local.toml.
NIC_OVERRIDE = f"""[[override]]
rule = "{NIC_RULE}"
mode = "apply"
accept = ["lazy-invalidation"]
"""
NVME_POLICY = scenarios.identity_rule("vm-nvme-identity", "identity for the NVMe drive, on arm64")

APPLY_GUEST = r"""#!/bin/bash
set -u
iommuctl=/vm/in/iommuctl
# Where this build reads shipped and admin policies, asked of a copy of iommud with nothing beside it.
mkdir -p /tmp/alone && cp /vm/in/iommud /tmp/alone/
/tmp/alone/iommud --print-policy-dirs --config /tmp/alone/none.conf > policy-dirs.txt || exit 1
mapfile -t dirs < policy-dirs.txt  # (no process substitution: the guest has no /dev/fd)
admin=${dirs[0]} shipped=${dirs[-1]}
mkdir -p "$admin" "$shipped"
cp /vm/in/60-arm-smmu-nic.toml "$shipped/"
facts() {  # facts NAME: for the NVMe and the NIC: group, the group's type, the bound driver
    for d in @NVME@ @NIC@; do
        g=$(basename "$(readlink -f /sys/bus/pci/devices/$d/iommu_group)")
        drv=$(basename "$(readlink /sys/bus/pci/devices/$d/driver 2>/dev/null)" 2>/dev/null)
        echo "$d $g $(cat /sys/kernel/iommu_groups/$g/type) ${drv:-none}"
    done > "$1.txt"
    cat "$1.txt"
}
# The status at the distribution default (checked by check_status.py like the status scenario).
/vm/in/collect-status $iommuctl
facts before
# The shipped rule alone advises; with the user's override it applies.
$iommuctl plan --json > plan-advise.json 2> plan-advise.err
cp /vm/in/90-local.toml "$admin/"
$iommuctl plan --json > plan-nic.json 2> plan-nic.err
$iommuctl apply > apply-nic.txt 2>&1; echo $? > apply-nic.rc
cat apply-nic.txt
facts nic-applied
$iommuctl status --json > status-nic.json 2> status-nic.err
# identity for the NVMe (a rule of its own; --hotplug: its driver is unbound and bound again).
mkdir -m 0755 -p /tmp/pol-nvme && cp /vm/in/50-nvme.toml /tmp/pol-nvme/
$iommuctl apply --hotplug --policies /tmp/pol-nvme --device @NVME@ > apply-nvme.txt 2>&1; echo $? > apply-nvme.rc
cat apply-nvme.txt
facts nvme-applied
$iommuctl revert > revert.txt 2>&1; echo $? > revert.rc
cat revert.txt
facts reverted
$iommuctl status --json > status-reverted.json 2> status-reverted.err
"""


def apply_problems(out: Path, series: str, notes: list[str]) -> list[str]:
    import json

    probs: list[str] = []
    facts, status_probs = check_status.check(out)
    notes.append(check_status.summary(facts))
    probs += [f"status at the default: {p}" for p in status_probs]
    before, nic_applied, nvme_applied, reverted = (
        scenarios.facts_of(out / f"{n}.txt") for n in ("before", "nic-applied", "nvme-applied", "reverted"))
    for dev in (NVME, NIC):
        if before[dev][1:] != ("DMA", before[dev][2]) or before[dev][2] == "none":
            probs.append(f"scenario set-up: {dev} is {before[dev]} at boot, not DMA with its driver bound")
    if probs:
        return probs
    live = series != "6.1"  # Linux 6.4: a group of several devices changes, DMA -> DMA-FQ first

    # 1. The shipped rule advises only: its change is planned in mode advise (where the kernel allows it).
    advise = json.loads((out / "plan-advise.json").read_text())
    nic_group = int(before[NIC][0])
    advised = [c for c in advise["changes"] if c["kind"] == "domain" and c.get("group") == nic_group]
    if any(c.get("mode") != "advise" for c in advised) or (live and not advised):
        probs.append(f"the shipped rule alone does not advise DMA-FQ for the NIC's group: {advise['changes']}")
    # 2. With the override: the NIC's group to DMA-FQ live on 6.4+, skipped as too old on 6.1.
    plan = json.loads((out / "plan-nic.json").read_text())
    planned = {c["group"]: c for c in plan["changes"] if c["kind"] == "domain"}
    skipped = {s["object"]: s for s in plan["skips"] if s["kind"] == "domain"}
    apply_txt = (out / "apply-nic.txt").read_text()
    if (out / "apply-nic.rc").read_text().strip() != "0":
        probs.append(f"iommuctl apply (the NIC rule) failed: {apply_txt}")
    if live:
        c = planned.get(nic_group)
        if (c is None or c.get("to") != "DMA-FQ" or c.get("rule", {}).get("name") != NIC_RULE
                or c.get("mode") != "apply"):
            probs.append(f"the plan has no DMA-FQ for the NIC's group {nic_group} from {NIC_RULE}: {plan['changes']}")
        if nic_applied[NIC][1:] != ("DMA-FQ", "e1000e"):
            probs.append(f"after apply the NIC is {nic_applied[NIC]}, not DMA-FQ with e1000e bound")
        if "done live" not in apply_txt:
            probs.append(f"apply does not say the NIC's change was done live: {apply_txt}")
        st = json.loads((out / "status-nic.json").read_text())
        rec = [c for c in st.get("changes", []) if c.get("group") == nic_group]
        if not rec or rec[0].get("to") != "DMA-FQ" or rec[0].get("irreversible") is not True:
            probs.append(f"status does not record the NIC's group as changed live (irreversible): {rec}")
    else:
        if nic_group in planned:
            probs.append(f"the plan on {series} changes the NIC's group {nic_group} (root port + NIC), which "
                         f"the kernel refuses before 6.4: {planned[nic_group]}")
        skip = skipped.get(f"group {nic_group}")
        if skip is None or skip["reason"] != "kernel-too-old" or "several devices" not in skip["message"]:
            probs.append(f"the plan on {series} does not skip the NIC's group {nic_group} with the reason: {skip}")
        if nic_applied[NIC][1] != "DMA":
            probs.append(f"after apply on {series} the NIC's group is {nic_applied[NIC][1]}, not DMA")
    # 3. The NVMe to identity (6.4+; its group holds its root port too), and back on revert.
    nvme_txt = (out / "apply-nvme.txt").read_text()
    want = "identity" if live else "DMA"
    if nvme_applied[NVME][1:] != (want, "nvme"):
        probs.append(f"after apply the NVMe is {nvme_applied[NVME]}, not {want} with nvme bound: {nvme_txt}")
    if not live and "only Linux 6.4 and later change the type of a group of several devices" not in nvme_txt:
        probs.append(f"apply on {series} does not say why the NVMe's group stays: {nvme_txt}")
    # 4. revert: the NVMe back to DMA; the live DMA-FQ stays (one-way until unbind), and says so.
    revert_txt = (out / "revert.txt").read_text()
    if (out / "revert.rc").read_text().strip() != "0":
        probs.append(f"iommuctl revert failed: {revert_txt}")
    if reverted[NVME][1:] != ("DMA", "nvme"):
        probs.append(f"after revert the NVMe is {reverted[NVME]}, not DMA with nvme bound")
    want_nic = ("DMA-FQ" if live else "DMA", "e1000e")
    if reverted[NIC][1:] != want_nic:
        probs.append(f"after revert the NIC is {reverted[NIC]}, not {want_nic}")
    if live and "stays until the devices are unbound" not in revert_txt:
        probs.append(f"revert does not say the NIC's live DMA-FQ stays: {revert_txt}")
    timing = re.findall(r"done(?: live)?[^\n]*? in ([0-9.]+ ms)", apply_txt + nvme_txt)
    notes.append(f"NIC: {before[NIC][1]} -> {nic_applied[NIC][1]}; NVMe: {before[NVME][1]} -> "
                 f"{nvme_applied[NVME][1]} -> {reverted[NVME][1]}; transactions {timing}")
    return probs


def run_apply(series: str, build: Path, out_dir: Path | None = None, echo: bool = False) -> vmlib.Outcome:
    kernel = vmlib.find_kernel(series, ARCH)
    files = _share(build, {"60-arm-smmu-nic.toml": SHIPPED_NIC_POLICY, "90-local.toml": NIC_OVERRIDE,
                           "50-nvme.toml": NVME_POLICY})
    script = APPLY_GUEST.replace("@NVME@", NVME).replace("@NIC@", NIC)
    r = vmlib.boot(kernel, _virt(), script, files_in=files, timeout=300, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"arm64 apply on {series}", r, lambda out, notes: apply_problems(out, series, notes))


# --------------------------------------------------------------------------
# daemon: iommud runs (fast path, udev running, no systemd), an NVMe is hot-added on the empty root
# port (QMP), and the daemon gives its group the policy's identity: a hotplug rule, the group of the
# new root port and the NVMe (6.4 and later change a group of several devices).  6.12 only.

HOTPLUG_NVME = "0000:03:00.0"  # behind hp0, the third root port (00:03.0)
DAEMON_POLICY = scenarios.identity_rule("vm-arm64-hotplug-identity", "identity for the NVMe hot-added on hp0, on arm64",
                                       "hotplug", HOTPLUG_NVME)
DAEMON_CONF = 'log-level = "debug"\n'  # "reacted to ... in N ms" is a debug line

DAEMON_GUEST = r"""#!/bin/bash
set -u
iommuctl=/vm/in/iommuctl dev=@DEV@
wait_for() {  # wait_for SECONDS CMD...: by the clock (under TCG each try's forks take longer than its sleep)
    local end=$((SECONDS + $1)); shift
    while ((SECONDS < end)); do "$@" && return 0; sleep 0.1; done
    return 1
}
group_type() {  # the hot-added device's group type and driver, or nothing
    local g drv
    g=$(readlink -f "/sys/bus/pci/devices/$dev/iommu_group" 2>/dev/null) || return 1
    drv=$(readlink "/sys/bus/pci/devices/$dev/driver" 2>/dev/null)
    echo "$(< "$g/type") ${drv##*/}"
}
is_identity() { [[ $(group_type) == "identity nvme" ]]; }
mkdir -p /etc/iommud/policies.d && cp /vm/in/50-hotplug.toml /etc/iommud/policies.d/
RUNTIME_DIRECTORY=/run/iommud STATE_DIRECTORY=/var/lib/iommud \
    /vm/in/iommud --config /vm/in/iommud.conf > iommud.log 2>&1 &
daemon=$!
wait_for 60 grep -q "iommud started" iommud.log || { echo "iommud did not start"; cat iommud.log; exit 1; }
/vm/in/collect-status $iommuctl before-
echo "@@ready-for-hotplug"
wait_for 120 test -e "/sys/bus/pci/devices/$dev" || { echo "$dev never appeared"; exit 1; }
echo "appeared $(cut -d' ' -f1 /proc/uptime)" > marks.txt
wait_for 60 is_identity; echo "settled $(cut -d' ' -f1 /proc/uptime)" >> marks.txt
group_type > hot-type.txt
cat hot-type.txt
udevadm settle --timeout=60
/vm/in/collect-status $iommuctl hot-
kill "$daemon"; wait "$daemon"; echo $? > iommud.rc
cat iommud.log | tail -30
exit 0
"""


def daemon_problems(out: Path, notes: list[str]) -> list[str]:
    """DAEMON_GUEST's files: the status before and after agree with the kernel, the hot-added NVMe's
    group reached identity with nvme bound, and iommud says which rule did it."""
    probs: list[str] = []
    for prefix in ("before-", "hot-"):
        facts, p = check_status.check(out, prefix)
        probs += [f"status ({prefix.rstrip('-')}): {x}" for x in p]
    notes.append(check_status.summary(facts))
    hot = (out / "hot-type.txt").read_text().split()
    if hot != ["identity", "nvme"]:
        probs.append(f"the hot-added NVMe {HOTPLUG_NVME} is {hot}, not identity with nvme bound")
    members = {m for _, ms in facts.groups.values() for m in ms}
    if HOTPLUG_NVME not in members:
        probs.append(f"the hot-added NVMe {HOTPLUG_NVME} is in no group after the hotplug")
    log = (out / "iommud.log").read_text()
    reacted = re.search(rf"reacted to {re.escape(HOTPLUG_NVME)} in ([0-9.]+ ms)", log)
    if "vm-arm64-hotplug-identity" not in log:
        probs.append(f"iommud's log does not name the rule it applied: {log[-1500:]}")
    marks = dict(line.split() for line in (out / "marks.txt").read_text().splitlines() if len(line.split()) == 2)
    notes.append(f"hot-added NVMe: appeared at {marks.get('appeared')} s, identity at {marks.get('settled')} s"
                 f" (guest uptime); iommud: reacted in {reacted.group(1) if reacted else '?'}")
    return probs


def run_daemon(series: str, build: Path, out_dir: Path | None = None, echo: bool = False) -> vmlib.Outcome:
    kernel = vmlib.find_kernel(series, ARCH)
    files = _share(build, {"iommud.conf": DAEMON_CONF, "50-hotplug.toml": DAEMON_POLICY})

    def driver(vm: vmlib.Vm) -> None:
        vm.wait_console(r"^@@ready-for-hotplug", timeout=240)
        vm.hotplug_nvme("hp_nvme", port="hp0")

    r = vmlib.boot(kernel, _virt(), DAEMON_GUEST.replace("@DEV@", HOTPLUG_NVME), files_in=files, udev=True,
                   driver=driver, timeout=360, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"arm64 daemon on {series}", r, lambda out, notes: daemon_problems(out, notes))
