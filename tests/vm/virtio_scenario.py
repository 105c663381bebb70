"""The virtio scenario: a virtio device without VIRTIO_F_ACCESS_PLATFORM bypasses the IOMMU (issue 30).

A q35 guest with a virtual VT-d (Caching Mode: strict DMA groups) and two virtio-blk functions on
zero-filled null-co disks: 00:18.0 with iommu_platform=on, 00:19.0 without. In one boot the guest
collects the status facts (collect-status, check_status.py: now also each virtio child's features)
and runs `iommuctl top --once --json` around direct reads from both disks, ended by SIGINT once they
are done (no clock races the I/O).

The host checks: the kernel negotiated bit 33 on the first and not on the second; status says
`mapped` for the first and `all-memory` for the second, with `virtio-bypasses-iommu` (info: no
confidential guest) naming the second only; and the kernel's own DMA counts agree: the first
mapped buffers (maps > 0), the second none at all, although both were read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import check_status
import scenarios
import vmlib

ON, OFF = "0000:00:18.0", "0000:00:19.0"
READ_MIB = 16

MACHINE = vmlib.Machine(iommu="intel", caching_mode=True, devices=[], extra_qemu=[
    "-blockdev", "driver=null-co,node-name=disk_on,size=67108864,read-zeroes=on",
    "-blockdev", "driver=null-co,node-name=disk_off,size=67108864,read-zeroes=on",
    "-device", "virtio-blk-pci,drive=disk_on,addr=0x18,disable-legacy=on,iommu_platform=on",
    "-device", "virtio-blk-pci,drive=disk_off,addr=0x19,disable-legacy=on",
])

GUEST = r"""
set -u
iommuctl=/vm/in/iommuctl
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs tracefs $T
modprobe virtio_blk
# The disk virtio_blk made of a function, once it is there.
disk() {
    for i in $(seq 300); do
        for b in /sys/bus/pci/devices/$1/virtio*/block/*; do [ -b /dev/${b##*/} ] && { echo /dev/${b##*/}; return; }; done
        sleep 0.1
    done
}
on=$(disk @ON@); off=$(disk @OFF@)
echo "$on $off" > /vm/out/disks.txt
cd /vm/out && /vm/in/collect-status $iommuctl
$iommuctl top --once --seconds 600 --json > /vm/out/top.json 2> /vm/out/top.err &
top=$!
for i in $(seq 600); do grep -q 'counting for' /vm/out/top.err && break; kill -0 $top 2>/dev/null || break; sleep 0.1; done
dd if=$on of=/dev/null bs=64k count=@BLOCKS@ iflag=direct 2> /vm/out/dd-on.txt
dd if=$off of=/dev/null bs=64k count=@BLOCKS@ iflag=direct 2> /vm/out/dd-off.txt
kill -INT $top; wait $top; echo $? > /vm/out/top.rc
""".replace("@ON@", ON).replace("@OFF@", OFF).replace("@BLOCKS@", str(READ_MIB * 16))


def check(out: Path, notes: list[str]) -> list[str]:
    facts, problems = check_status.check(out)
    notes.append(check_status.summary(facts))
    read = lambda name: (out / name).read_text()  # noqa: E731
    virtio = facts.virtio or {}
    if ON not in virtio or OFF not in virtio:
        return problems + [f"no virtio child under {ON} and {OFF}: {virtio}"]
    if facts.bypasses_iommu(ON) or not facts.bypasses_iommu(OFF):
        problems.append(f"the kernel's features: {ON} {virtio[ON]}, {OFF} {virtio[OFF]} "
                        "(iommu_platform=on should give bit 33 to the first only)")
    s = json.loads(read("status.json"))
    levels = {e["address"]: e["level"] for e in s["exposure"]["devices"]}
    notes.append(f"status: {ON} {levels.get(ON)}, {OFF} {levels.get(OFF)}")
    if levels.get(ON) != "mapped" or levels.get(OFF) != "all-memory":
        problems.append(f"exposure: {ON} {levels.get(ON)} (want mapped), {OFF} {levels.get(OFF)} (want all-memory)")
    bypass = [f for f in s["findings"] if f["id"] == "virtio-bypasses-iommu"]
    if len(bypass) != 1 or OFF not in bypass[0]["devices"] or ON in bypass[0]["devices"] \
            or bypass[0]["severity"] != "info":
        problems.append(f"virtio-bypasses-iommu should be one info naming {OFF} and not {ON}: {bypass}")
    for name in ("dd-on.txt", "dd-off.txt"):
        if f"{READ_MIB * 16}+0 records in" not in read(name):
            problems.append(f"{name}: the read did not complete: {read(name)}")
    if read("top.rc").strip() != "0":
        return problems + [f"top exited {read('top.rc').strip()}: {read('top.err')}"]
    rows = {d["device"]: d for d in json.loads(read("top.json"))["devices"]}
    maps_on = (rows.get(ON) or {}).get("maps") or 0
    maps_off = (rows.get(OFF) or {}).get("maps") or 0
    notes.append(f"DMA maps while {READ_MIB} MiB were read from each: {ON} {maps_on}, {OFF} {maps_off}")
    if maps_on == 0:
        problems.append(f"{ON} (iommu_platform=on) mapped nothing while it was read: {rows.get(ON)}")
    if maps_off != 0:
        problems.append(f"{OFF} (no iommu_platform) mapped {maps_off} buffers: it should use no DMA API")
    return problems


def run_virtio(series: str, iommuctl: Path, out_dir: Path | None = None, echo: bool = False) -> vmlib.Outcome:
    kernel = vmlib.find_kernel(series)
    files, guest_path = scenarios._prepare_iommuctl(iommuctl)  # noqa: SLF001 (shared with the other scenarios)
    r = vmlib.boot(kernel, MACHINE, GUEST.replace("/vm/in/iommuctl", guest_path), files_in=files,
                   timeout=300, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"virtio on {series}", r, check)


if __name__ == "__main__":  # re-check a kept directory: virtio_scenario.py DIR
    n: list[str] = []
    p = check(Path(sys.argv[1]), n)
    print("\n".join(n + [f"PROBLEM: {x}" for x in p]))
    sys.exit(1 if p else 0)
