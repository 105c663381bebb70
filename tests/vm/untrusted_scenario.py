"""The untrusted scenario: a NIC behind a root port the firmware marks external-facing.

As on a Thunderbolt/USB4 host, an SSDT (acpi/external-port.asl) puts the _DSD property
ExternalFacingPort = 1 on the root port 00:10.0; the kernel then makes the e1000e below it
removable and untrusted, with a strict `DMA` group while the host default is lazy (`DMA-FQ`).
One boot (script mode, udev running) checks, in order:

1. the kernel: the port's ACPI path is the one the SSDT names, the NIC is `removable`, its group
   is `DMA` and every other group `DMA-FQ`; then `iommuctl status --json` against the kernel
   (check_status.py, which reads `removable` itself): exactly that device untrusted,
   `untrusted-bounce` raised, every other device trusted;
2. the shipped policies/30-thunderbolt-nic.toml (installed where this build reads it): `iommuctl
   apply --hotplug` sets its rings to the maximum and its rx-usecs, read back with ethtool;
3. user rules asking identity and DMA-FQ for it (accepting the cost): the planner refuses both
   as `untrusted`, and `apply` leaves the group `DMA`;
4. direct writes of the group's `type`, errno recorded: identity with the driver bound, DMA-FQ
   (the live change), identity with the driver unbound; then `DMA` and the driver again;
5. the daemon: the NIC is unplugged (QMP), iommud starts with the shipped policy, a new e1000e
   is hot-added behind the same port (QMP) and gets the rings and coalescing of step 2 from the
   daemon; `status` agrees with the kernel again.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import subprocess
from pathlib import Path

import check_status
import scenarios
import vmlib

REPO = vmlib.HERE.parents[1]
SHIPPED_POLICY = REPO / "policies" / "30-thunderbolt-nic.toml"
NIC = "0000:06:00.0"  # the e1000e behind the external-facing port, with the default devices
RX_USECS = 128  # what the shipped rule asks (checked against the file below)


def _user_rule(domain: str, accept: str) -> str:
    return (f'[[rule]]\nname = "vm-untrusted-{domain.lower()}"\n'
            f'description = "{domain} for the NIC behind the external port (tests/vm untrusted)"\n'
            f'domain = "{domain}"\nwhen = "always"\naccept = ["{accept}"]\n'
            f'[rule.match]\naddress = "{NIC}"\n')


GUEST = r"""#!/bin/bash
set -u
iommuctl=/vm/in/iommuctl nic=@NIC@ port=@PORT@
mkfifo /tmp/nap && exec {napfd}<> /tmp/nap  # read -t on it sleeps without a fork (~0.1 s each under TCG)
nap() { read -r -t "$1" -u "$napfd" || true; }
wait_for() {  # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1)); shift
    until "$@"; do (( SECONDS < end )) || { echo "timed out waiting for: $*"; return 1; }; nap 0.2; done
}
netdev_of() { local n=(/sys/bus/pci/devices/$1/net/*); [[ -e ${n[0]} ]] && echo "${n[0]##*/}"; }
group_of() { local l; l=$(readlink -f "/sys/bus/pci/devices/$1/iommu_group") && echo "${l##*/}"; }
ethtool_facts() {  # ethtool_facts PREFIX DEV: rings and coalescing as ethtool reads them
    local ifc; ifc=$(netdev_of "$2") || { echo "no netdev for $2"; return 1; }
    ethtool -g "$ifc" > "$1rings.txt" 2>&1
    ethtool -c "$ifc" > "$1coalesce.txt" 2>&1
}
# The group's type written directly, as root would: the errno the kernel answers (0: accepted).
write_type() {  # write_type NAME GROUP TYPE
    python3 -c 'import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
    os.write(fd, sys.argv[2].encode()); os.close(fd); print(0, "OK")
except OSError as e:
    print(e.errno, errno.errorcode.get(e.errno, "?"))' "/sys/kernel/iommu_groups/$2/type" "$3" > "write-$1.txt"
    read -r t < "/sys/kernel/iommu_groups/$2/type"; echo "$t" >> "write-$1.txt"
    echo "write $3 ($1): $(tr '\n' ' ' < "write-$1.txt")"
}

# debugfs as systemd mounts it on a host: iommuctl reads the swiotlb pool there.
[[ -e /sys/kernel/debug/dma_pools || -e /sys/kernel/debug/swiotlb ]] || mount -t debugfs debugfs /sys/kernel/debug
ls -a /sys/kernel/debug/swiotlb > swiotlb-dir.txt 2>&1
n=0; [[ -r /sys/kernel/debug/swiotlb/io_tlb_nslabs ]] && read -r n < /sys/kernel/debug/swiotlb/io_tlb_nslabs
echo "$n" > swiotlb-nslabs.txt
read -r path < /sys/bus/pci/devices/$port/firmware_node/path; echo "$path" > port-acpi-path.txt
/vm/in/collect-status "$iommuctl" || exit 1

# 2. The shipped policy at hotplug (installed in /usr/share/iommud/policies).
ethtool_facts before- "$nic" || exit 1
"$iommuctl" plan --hotplug --device "$nic" --json > plan-shipped.json 2> plan-shipped.err
"$iommuctl" apply --hotplug --device "$nic" > apply-shipped.out 2>&1; echo $? > apply-shipped.rc
ethtool_facts after- "$nic" || exit 1

# 3. A user asks identity, then DMA-FQ, for it (and accepts the cost).
g=$(group_of "$nic")
for d in identity dma-fq; do
    "$iommuctl" plan --policies "/vm/in/user-$d" --device "$nic" --json > "plan-$d.json" 2> "plan-$d.err"
    "$iommuctl" apply --policies "/vm/in/user-$d" --device "$nic" > "apply-$d.out" 2>&1; echo $? > "apply-$d.rc"
    read -r t < "/sys/kernel/iommu_groups/$g/type"; echo "$t" > "type-after-$d.txt"
done

# 4. The kernel's own answer to direct writes.
write_type identity-bound "$g" identity
write_type dma-fq-bound "$g" DMA-FQ
echo "$nic" > /sys/bus/pci/drivers/e1000e/unbind
write_type identity-unbound "$g" identity
write_type dma-unbound "$g" DMA
echo "$nic" > /sys/bus/pci/drivers/e1000e/bind
wait_for 30 netdev_of "$nic" > /dev/null || exit 1
/vm/in/collect-status "$iommuctl" after-writes- || exit 1

# 5. The daemon: the NIC goes, iommud starts, a new one comes behind the same port.
echo "@@ready-for-unplug"
wait_for 60 test ! -e "/sys/bus/pci/devices/$nic" || exit 1
udevadm settle --timeout=60
RUNTIME_DIRECTORY=/run/iommud STATE_DIRECTORY=/var/lib/iommud \
    /vm/in/iommud --config /vm/in/iommud.conf > iommud.log 2>&1 &
daemon=$!
wait_for 60 grep -q "iommud started" iommud.log || { echo "iommud did not start"; cat iommud.log; exit 1; }
echo "@@ready-for-hotplug"
wait_for 60 test -e "/sys/bus/pci/devices/$nic" || exit 1
wait_for 60 netdev_of "$nic" > /dev/null || exit 1
udevadm settle --timeout=60
wait_for 60 grep -q "reacted to .*$nic" iommud.log || echo "no 'reacted to' line for $nic"
ethtool_facts hot- "$nic" || exit 1
/vm/in/collect-status "$iommuctl" hot- || exit 1
kill "$daemon"; wait "$daemon"; echo $? > iommud.rc
exit 0
"""

DAEMON_CONF = 'log-level = "debug"\n'  # "reacted to ... in N ms" is a debug line


def _ethtool(path: Path) -> dict[str, dict[str, int]]:
    """`ethtool -g`/`-c` text -> {"max": {...}, "current": {...}} (or one flat section)."""
    out: dict[str, dict[str, int]] = {}
    section = "current"
    for line in path.read_text().splitlines():
        low = line.lower()
        if low.startswith("pre-set maximums"):
            section = "max"
        elif low.startswith("current hardware settings"):
            section = "current"
        elif ":" in line:
            key, _, value = line.partition(":")
            value = value.strip()
            if value.isdigit():
                out.setdefault(section, {})[key.strip()] = int(value)
    return out


def _refusals(plan: dict, want_reason: str) -> list[str]:
    return [s.get("message", "") for s in plan.get("skips", [])
            if s.get("key") == "type" and s.get("reason") == want_reason]


def problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []

    # 1. The kernel did what the firmware asked, and iommuctl agrees with it.
    path = (out / "port-acpi-path.txt").read_text().strip()
    if path != vmlib.EXTERNAL_PORT_ACPI:
        probs.append(f"the port's ACPI path is {path}, the SSDT names {vmlib.EXTERNAL_PORT_ACPI}")
    for prefix in ("", "after-writes-", "hot-"):
        k, p = check_status.check(out, prefix)
        probs += [f"{prefix or 'boot-'}status: {x}" for x in p]
        untrusted = sorted(a for a, v in (k.removable or {}).items() if v == "removable")
        if untrusted != [NIC]:
            probs.append(f"{prefix or 'boot-'}: the kernel marks {untrusted} removable, the scenario wants [{NIC}]")
        types = {gid: t for gid, (t, members) in k.groups.items() if NIC not in members}
        nic_type = [t for t, members in k.groups.values() if NIC in members]
        if nic_type != ["DMA"]:
            probs.append(f"{prefix or 'boot-'}: the NIC's group type is {nic_type}, the kernel should force DMA")
        if set(types.values()) != {"DMA-FQ"}:
            probs.append(f"{prefix or 'boot-'}: the other groups are {sorted(set(types.values()))}, want DMA-FQ")
        if not prefix:
            notes.append(check_status.summary(k))
    status = json.loads((out / "status.json").read_text())
    bounce = [f for f in status.get("findings", []) if f.get("id") == "untrusted-bounce"]
    if [f.get("devices") for f in bounce] != [[NIC]]:
        probs.append(f"untrusted-bounce findings for {[f.get('devices') for f in bounce]}, want one for {NIC}")
    swiotlb = (out / "swiotlb-dir.txt").read_text().split()
    notes.append(f"/sys/kernel/debug/swiotlb holds {[n for n in swiotlb if n not in ('.', '..')]}")
    nslabs = int((out / "swiotlb-nslabs.txt").read_text())
    if status.get("swiotlb", {}).get("nslabs") != nslabs:
        probs.append(f"swiotlb.nslabs: iommuctl says {status.get('swiotlb', {}).get('nslabs')}, the guest {nslabs}")
    if bounce and ("swiotlb is inactive" in bounce[0].get("summary", "")) != (nslabs == 0):
        probs.append(f"the guest's pool has {nslabs} slabs, the finding says: {bounce[0].get('summary')}")
    # Without a pool the NIC's sub-page mappings fail: an error finding of its own, for it alone.
    failing = [f.get("devices") for f in status.get("findings", []) if f.get("id") == "untrusted-no-bounce-buffers"]
    if failing != ([[NIC]] if nslabs == 0 else []):
        probs.append(f"untrusted-no-bounce-buffers for {failing} with a pool of {nslabs} slabs")

    # 2. The shipped policy's rings and coalescing, applied at hotplug.
    rc = (out / "apply-shipped.rc").read_text().strip()
    if rc != "0":
        probs.append(f"apply --hotplug with the shipped policy exited {rc}: {(out / 'apply-shipped.out').read_text()[-1500:]}")
    after = _ethtool(out / "after-rings.txt")
    for key in ("RX", "TX"):
        cur, mx = after.get("current", {}).get(key), after.get("max", {}).get(key)
        if cur is None or cur != mx:
            probs.append(f"shipped policy: {key} ring is {cur} after apply --hotplug, max {mx}")
    usecs = _ethtool(out / "after-coalesce.txt").get("current", {}).get("rx-usecs")
    if usecs != RX_USECS:
        probs.append(f"shipped policy: rx-usecs is {usecs} after apply --hotplug, want {RX_USECS}")
    notes.append(f"shipped policy: rings {_ethtool(out / 'before-rings.txt').get('current')} -> "
                 f"{after.get('current')}, rx-usecs -> {usecs}")
    shipped = json.loads((out / "plan-shipped.json").read_text())
    rules = {c.get("rule", {}).get("name") for c in shipped.get("changes", [])}
    if "thunderbolt-nic-rings" not in rules:
        probs.append(f"the shipped plan's changes come from {sorted(rules)}, not thunderbolt-nic-rings")

    # 3. The planner refuses identity and DMA-FQ from a user rule, saying why.
    for d in ("identity", "dma-fq"):
        plan = json.loads((out / f"plan-{d}.json").read_text())
        refused = _refusals(plan, "untrusted")
        if len(refused) != 1 or "untrusted" not in refused[0]:
            probs.append(f"user rule {d}: skips {plan.get('skips')}, want one refusal with reason untrusted")
        else:
            notes.append(f"planner, {d}: {refused[0]}")
        if any(c.get("key") == "type" for c in plan.get("changes", [])):
            probs.append(f"user rule {d}: the plan changes the type: {plan.get('changes')}")
        if (out / f"type-after-{d}.txt").read_text().strip() != "DMA":
            probs.append(f"user rule {d}: after apply the group is {(out / f'type-after-{d}.txt').read_text().strip()}")

    # 4. The kernel's answers to direct writes.
    writes = {}
    for name in ("identity-bound", "dma-fq-bound", "identity-unbound", "dma-unbound"):
        code, sym, after_type = (out / f"write-{name}.txt").read_text().split()
        writes[name] = (int(code), after_type)
        notes.append(f"direct write, {name}: errno {code} ({sym}), type then {after_type}")
    if writes["identity-bound"][0] == 0 or writes["identity-unbound"][0] == 0:
        probs.append(f"the kernel accepted identity for an untrusted device: {writes}")
    # docs/kernel.md §2.2: from 6.4 the live DMA -> DMA-FQ path has no untrusted check (before,
    # EINVAL): the kernel itself lets lazy invalidation onto the device it trusts least.
    version = check_status.read_facts(out).version
    if (writes["dma-fq-bound"][0] == 0) != (version >= (6, 4, 0)):
        probs.append(f"DMA-FQ on the untrusted group: errno {writes['dma-fq-bound'][0]} on {version}, "
                     "docs/kernel.md §2.2 says accepted from 6.4 and EINVAL before")
    if writes["dma-unbound"] != (0, "DMA"):
        probs.append(f"restoring DMA with the driver unbound: {writes['dma-unbound']}")
    (out / "type-write-errnos.json").write_text(json.dumps(
        {k: errno.errorcode.get(v[0], str(v[0])) if v[0] else "OK" for k, v in writes.items()}, indent=1) + "\n")

    # 5. The daemon, for a NIC hot-added behind the same port.
    hot = _ethtool(out / "hot-rings.txt")
    for key in ("RX", "TX"):
        cur, mx = hot.get("current", {}).get(key), hot.get("max", {}).get(key)
        if cur is None or cur != mx:
            probs.append(f"daemon: the hot-added NIC's {key} ring is {cur}, max {mx}")
    usecs = _ethtool(out / "hot-coalesce.txt").get("current", {}).get("rx-usecs")
    if usecs != RX_USECS:
        probs.append(f"daemon: the hot-added NIC's rx-usecs is {usecs}, want {RX_USECS}")
    log = (out / "iommud.log").read_text()
    if "thunderbolt-nic-rings" not in log:
        probs.append("daemon: its log does not name the rule thunderbolt-nic-rings")
    reacted = [line for line in log.splitlines() if "reacted to" in line and NIC in line]
    notes.append(f"daemon: {reacted[-1].strip() if reacted else 'no reacted-to line'}")
    return probs


def run_untrusted(series: str, iommuctl: Path, iommud: Path, out_dir: Path | None = None,
                  echo: bool = False, memory_mb: int = 1024) -> scenarios.Outcome:
    kernel = vmlib.find_kernel(series)
    if not iommud.is_file():
        raise vmlib.SetupMissing(f"iommud not found at {iommud}: build first")
    if f"rx-usecs = {RX_USECS}" not in SHIPPED_POLICY.read_text():
        raise ValueError(f"{SHIPPED_POLICY} no longer asks rx-usecs = {RX_USECS}: update RX_USECS")
    files, _ = scenarios._prepare_iommuctl(iommuctl)
    files.update({"iommud": iommud, "iommud.conf": DAEMON_CONF,
                  "user-identity/50-user.toml": _user_rule("identity", "no-isolation"),
                  "user-dma-fq/50-user.toml": _user_rule("DMA-FQ", "lazy-invalidation")})
    # Where this build reads the shipped policies once installed (the install prefix's
    # share/iommud/policies): asked of a copy of iommud with nothing beside it, as the guest runs it
    # (in its build tree it would name the source tree's policies/), and no iommud.conf.
    with tempfile.TemporaryDirectory() as alone:
        shutil.copy(iommud, os.path.join(alone, "iommud"))
        dirs = subprocess.run([os.path.join(alone, "iommud"), "--print-policy-dirs", "--config",
                               os.path.join(alone, "none.conf")], capture_output=True, text=True,
                              check=True).stdout.split()
    root = {f"{dirs[-1]}/30-thunderbolt-nic.toml": SHIPPED_POLICY}

    def driver(vm: vmlib.Vm) -> None:
        vm.wait_console(r"^@@ready-for-unplug", timeout=300)
        vm.unplug("nic_ext")
        vm.wait_console(r"^@@ready-for-hotplug", timeout=120)
        vm.hotplug_nic("hp_nic", port="rp_ext")

    script = GUEST.replace("@NIC@", NIC).replace("@PORT@", vmlib.EXTERNAL_PORT)
    machine = vmlib.external_port_machine(memory_mb=memory_mb)
    r = vmlib.boot(kernel, machine, script, files_in=files, root_files=root, udev=True, driver=driver,
                   timeout=420, out_dir=out_dir, echo=echo)
    probs: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        probs += problems(r.out_dir, notes)
    except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError, json.JSONDecodeError) as e:
        probs.append(f"{type(e).__name__}: {e}")
    return scenarios.Outcome(f"untrusted on {series}", r.seconds, r.accel, probs, notes, r.out_dir)
