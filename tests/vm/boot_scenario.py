"""The boot-time path on a real kernel: Debian's initramfs-tools with iommud's hook and boot script.

Three boots of one kernel (VT-d, CM=0, so a group's default type is DMA-FQ):

1. build, on the host (the guest's root is the host's, so its hooks are the same; a guest under
   TCG needs minutes for mkinitramfs's thousands of forks): in a mount namespace of its own, with
   overlays that put the configured hook, boot script and iommud where a package puts them, a boot
   policy in /etc/iommud/policies.d, and the cached kernel's modules in /lib/modules and config in
   /boot, Debian's own `mkinitramfs` runs twice: with the policy, and with a broken one (a
   misspelt key on line 5). The host's files stay untouched. Needs root, as tests/vm/setup does.
2. good: the first image boots a machine whose root filesystem (ext4, made on the host with
   `mke2fs -d`: busybox and a script as /sbin/init) is on an NVMe alone in its group. initramfs-
   tools mounts it as root; its init reads, with the root mounted, the kernel's own
   /sys/kernel/iommu_groups/*/type, the root's PCI function and driver, the kernel log and
   /run/iommud (moved into the root by initramfs-tools), prints them on the console and powers off.
   Checked: the root is on the NVMe, its group is identity, nvme is bound, iommud's change is in
   the kernel log with its rule and no word of the rule that is not for boot, and its records are
   in /run/iommud.
3. broken: the second image boots the same disk. Checked: it still boots and mounts the root, the
   group keeps its default type (DMA-FQ), and the kernel log has the policy's file:line:col error.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import vmlib
from scenarios import Outcome

POLICY_PATH = "/etc/iommud/policies.d/50-boot.toml"

GOOD_POLICY = """[[rule]]
name = "vm-boot-nvme"
description = "identity for the root NVMe, before it is mounted (tests/vm boot)"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"

[[rule]]
name = "vm-not-at-boot"
description = "a rule the boot pass must leave out without a word (tests/vm boot)"
when = "always"
domain = "DMA"
[rule.match]
kind = "nvme"
"""

# The first rule with its `domain` misspelt, on line 5 column 1: an unknown key. What `iommuctl
# check` prints, iommud logs at boot.
BROKEN_POLICY = GOOD_POLICY.split("\n\n")[0].replace("\ndomain = ", "\ndomian = ") + "\n"
BROKEN_ERROR = POLICY_PATH + ":5:1: error: unknown key 'domian'"

# MODULES=list: only what this boot needs (and what the hooks add), not the whole module tree.
INITRAMFS_CONF = "MODULES=list\nBUSYBOX=y\nCOMPRESS=gzip\nKEYMAP=n\nFSTYPE=ext4\nRUNSIZE=10%\n"
INITRAMFS_MODULES = "nvme\next4\n"

# Runs in `unshare -m`: $1 work dir, $2 release, $3 modules dir, $4 config, $5 sbindir,
# $6 the configured packaging/ dir. /lib is /usr/lib on merged-/usr Debian.
BUILD_SCRIPT = r"""set -euo pipefail
work=$1 release=$2 modules=$3 config=$4 sbin=$5 pkg=$6
umask 022
mount --make-rprivate /
over() {  # over DIR: an overlay on DIR whose upper layer is $work/over/DIR
    mkdir -p "$work/over/$1" "$work/overwork/$1"
    mount -t overlay overlay -o "lowerdir=$1,upperdir=$work/over/$1,workdir=$work/overwork/$1" "$1"
}
mkdir -p "$work/over/usr/lib/modules/$release" "$work/over/$sbin" \
    "$work/over/usr/share/initramfs-tools/hooks" "$work/over/usr/share/initramfs-tools/scripts/init-premount" \
    "$work/over/etc/iommud/policies.d" "$work/over/boot"
# Without its debug information, as a package ships it (copy_exec copies what it finds).
strip --strip-debug -o "$work/over/$sbin/iommud" "$work/iommud"
cp "$pkg/initramfs-tools/hooks/iommud" "$work/over/usr/share/initramfs-tools/hooks/"
cp "$pkg/initramfs-tools/scripts/init-premount/iommud" "$work/over/usr/share/initramfs-tools/scripts/init-premount/"
cp "$work/good.toml" "$work/over@POLICY@"
cp "$config" "$work/over/boot/config-$release"
for d in /usr/lib "$sbin" /usr/share/initramfs-tools /etc /boot; do over "$d"; done
mount --bind "$modules" "/usr/lib/modules/$release"
for image in good broken; do
    [[ $image == broken ]] && cp "$work/broken.toml" @POLICY@
    start=$(date +%s%N)
    mkinitramfs -d "$work/conf" -o "$work/$image.img" "$release" 2>"$work/mkinitramfs-$image.log"
    echo $(( ($(date +%s%N) - start) / 1000000 )) >"$work/mkinitramfs-$image.ms"
done
lsinitramfs "$work/good.img" >"$work/good.list"
"""

# PID 1 of the NVMe root: what the kernel says, on the console, then power off. initramfs-tools
# has moved /dev, /proc, /sys and /run into this root.
ROOT_INIT = """#!/bin/sh
export PATH=/bin
echo "@@init"
while read -r dev mnt fs rest; do
    [ "$mnt" = / ] && echo "@@mount $dev $fs"
done </proc/mounts
for g in /sys/kernel/iommu_groups/*; do
    read -r type <"$g/type"
    echo "@@group ${g##*/} $type" $(ls "$g/devices")
done
pci=$(readlink -f /sys/block/nvme0n1/device/device)
echo "@@rootpci ${pci##*/}"
drv=$(readlink "$pci/driver")
echo "@@driver ${drv##*/}"
dmesg | grep 'iommud' | sed 's/^/@@kmsg /'
for f in /run/iommud/*; do echo "@@run ${f##*/}"; done
echo "@@done"
poweroff -f
"""

APPLETS = ["sh", "cat", "ls", "readlink", "dmesg", "grep", "sed", "poweroff", "mount"]


@dataclasses.dataclass
class BootFiles:
    iommud: Path
    packaging: Path  # the build tree's packaging/ (configured hook and script)


def _configured(path: Path) -> str:
    if not path.is_file():
        raise vmlib.SetupMissing(f"{path} not found: configure and build first")
    return path.read_text()


def _sbin_path(hook: str) -> str:
    m = re.search(r"^IOMMUD=(/\S+)$", hook, re.M)
    if not m:
        raise vmlib.SetupMissing("the configured hook has no IOMMUD= line")
    return m.group(1)


def _root_image(path: Path) -> None:
    """An ext4 image holding busybox and ROOT_INIT as /sbin/init."""
    if not shutil.which("mke2fs"):
        raise vmlib.SetupMissing("mke2fs not found (tests/vm/setup installs e2fsprogs)")
    with tempfile.TemporaryDirectory(prefix="iommud-vm-bootroot-") as tmp:
        root = Path(tmp)
        for d in ("bin", "sbin", "dev", "proc", "sys", "run", "tmp"):
            (root / d).mkdir()
        shutil.copy2(vmlib.BUSYBOX, root / "bin" / "busybox")
        for a in APPLETS:
            (root / "bin" / a).symlink_to("busybox")
        (root / "sbin" / "init").write_text(ROOT_INIT)
        (root / "sbin" / "init").chmod(0o755)
        subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(root), str(path), "16M"],
                       check=True, capture_output=True)


def _console(text: str) -> dict[str, list[str]]:
    """The @@ lines of the root's init, by key."""
    found: dict[str, list[str]] = {}
    for line in text.replace("\r", "").splitlines():
        m = re.search(r"@@(\w+) ?(.*)$", line)
        if m:
            found.setdefault(m.group(1), []).append(m.group(2))
    return found


def _groups(found: dict[str, list[str]]) -> dict[str, tuple[str, list[str]]]:
    out = {}
    for g in found.get("group", []):
        parts = g.split()
        if len(parts) >= 2:
            out[parts[0]] = (parts[1], parts[2:])
    return out


def _root_group(found: dict[str, list[str]], problems: list[str], label: str) -> tuple[str, str] | None:
    """(group, type) of the NVMe that holds /, after checking that it is mounted from it."""
    if "done" not in found:  # said, with the console, where the boot ran
        return None
    mounts = found.get("mount", [])
    if not any(m.startswith("/dev/nvme0n1 ext4") for m in mounts):
        problems.append(f"{label}: / is not the ext4 on /dev/nvme0n1: {mounts}")
    pci = (found.get("rootpci") or [""])[0]
    for gid, (gtype, members) in _groups(found).items():
        if pci and pci in members:
            return gid, gtype
    problems.append(f"{label}: no group holds the root's PCI function {pci!r}")
    return None


def run_boot(series: str, files: BootFiles, out_dir: Path | None = None, echo: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    hook = _configured(files.packaging / "initramfs-tools" / "hooks" / "iommud")
    script = _configured(files.packaging / "initramfs-tools" / "scripts" / "init-premount" / "iommud")
    if not files.iommud.is_file():
        raise vmlib.SetupMissing(f"iommud not found at {files.iommud}: build first")
    if not shutil.which("mkinitramfs"):
        raise vmlib.SetupMissing("mkinitramfs not found (tests/vm/setup installs initramfs-tools-core)")
    sbin = _sbin_path(hook)
    work = out_dir or Path(tempfile.mkdtemp(prefix="iommud-vm-boot-"))
    work.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    notes: list[str] = []
    start = time.monotonic()
    accel = "?"

    # 1. Build both images with Debian's mkinitramfs, on the host.
    if os.geteuid() != 0:
        raise vmlib.SetupMissing("the boot scenario builds its initramfs in a mount namespace: run as root")
    build_out = work / "build"
    (build_out / "conf" / "scripts").mkdir(parents=True, exist_ok=True)
    (build_out / "conf" / "initramfs.conf").write_text(INITRAMFS_CONF)
    (build_out / "conf" / "modules").write_text(INITRAMFS_MODULES)
    (build_out / "good.toml").write_text(GOOD_POLICY)
    (build_out / "broken.toml").write_text(BROKEN_POLICY)
    shutil.copy2(files.iommud, build_out / "iommud")  # a rebuild meanwhile must not swap it
    t = time.monotonic()
    b = subprocess.run(["unshare", "-m", "bash", "-c", BUILD_SCRIPT.replace("@POLICY@", POLICY_PATH), "_",
                        str(build_out), kernel.release, str(kernel.modules), str(kernel.config), str(Path(sbin).parent),
                        str(files.packaging)], capture_output=True, text=True, timeout=300)
    notes.append(f"mkinitramfs on the host, twice: {time.monotonic() - t:.1f}s")
    if b.returncode != 0:
        logs = "".join(p.read_text() for p in build_out.glob("mkinitramfs-*.log"))
        return Outcome(f"boot on {series}", time.monotonic() - start, "-",
                       [f"building the initramfs failed ({b.returncode}): {b.stderr.strip()} {logs.strip()}"],
                       notes, work)
    good, broken = build_out / "good.img", build_out / "broken.img"
    listing = (build_out / "good.list").read_text()
    for want in (sbin.lstrip("/"), "scripts/init-premount/iommud", POLICY_PATH.lstrip("/")):
        if want not in listing:
            problems.append(f"the initramfs lacks {want}")
    ms = {i: (build_out / f"mkinitramfs-{i}.ms").read_text().strip() for i in ("good", "broken")}
    notes.append(f"initramfs: {good.stat().st_size / 1e6:.1f} MB (gzip, MODULES=list), "
                 f"mkinitramfs {int(ms['good']) / 1000:.1f}s each")

    # 2 and 3: boot each image with the root filesystem on the NVMe.
    disk = work / "root.img"
    machine = vmlib.Machine(
        iommu="intel", caching_mode=False, devices=[],
        cmdline=["root=/dev/nvme0n1", "rootfstype=ext4", "ro", "fsck.mode=skip"],
        extra_qemu=["-device", "pcie-root-port,id=rp_root,chassis=21,slot=21,bus=pcie.0",
                    "-drive", f"file={disk},if=none,id=rootdisk,format=raw,cache=unsafe",
                    "-device", "nvme,id=nvme_root,serial=root,drive=rootdisk,bus=rp_root"])
    results = {}
    for label, image in (("good", good), ("broken", broken)):
        _root_image(disk)
        r = vmlib.boot(kernel, machine, "", initrd=image, out_dir=work / label, timeout=120, echo=echo)
        accel = r.accel
        notes.append(f"{label} boot: {r.seconds:.1f}s")
        if r.timed_out:
            problems.append(f"{label}: the guest did not power off within 120 s")
        results[label] = _console(r.output)
        if "done" not in results[label]:  # what the console said is all there is to go on
            problems.append(f"{label}: the root's init did not finish (no @@done): the boot failed "
                            f"after {r.seconds:.1f}s{'; ' + r.host_error if r.host_error else ''}\n{r.tail(30)}")

    found = results["good"]
    rg = _root_group(found, problems, "good")
    kmsg = found.get("kmsg", [])
    if rg:
        notes.append(f"good: root NVMe {found['rootpci'][0]} in group {rg[0]}: {rg[1]}")
        if rg[1] != "identity":
            problems.append(f"good: the root NVMe's group {rg[0]} is {rg[1]}, not identity; kernel log: {kmsg}")
    if (found.get("driver") or [""])[0] != "nvme":
        problems.append(f"good: the root NVMe is bound to {found.get('driver')}, not nvme")
    if not any("-> identity" in k and "vm-boot-nvme" in k for k in kmsg):
        problems.append(f"good: no iommud change by rule vm-boot-nvme in the kernel log: {kmsg}")
    if any("vm-not-at-boot" in k for k in kmsg):
        problems.append(f"good: the boot pass spoke of a rule not for boot: {kmsg}")
    if "changes.json" not in found.get("run", []):
        problems.append(f"good: no changes.json in /run/iommud after the switch to the root: {found.get('run')}")

    found = results["broken"]
    rg = _root_group(found, problems, "broken")
    kmsg = found.get("kmsg", [])
    if rg:
        notes.append(f"broken: group {rg[0]}: {rg[1]}")
        if rg[1] != "DMA-FQ":
            problems.append(f"broken: the root NVMe's group {rg[0]} is {rg[1]}, not its default DMA-FQ")
    if not any(BROKEN_ERROR in k for k in kmsg):
        problems.append(f"broken: the kernel log lacks {BROKEN_ERROR!r}: {kmsg}")
    else:
        notes.append("broken: " + next(k for k in kmsg if BROKEN_ERROR in k)[:120])
    return Outcome(f"boot on {series}", time.monotonic() - start, accel, problems, notes, work)
