"""The fwupd scenario: fwupd's host security report beside iommud's audit, on the same guests.

Debian's fwupd (`fwupdtool security --json --force`, no daemon needed) runs in the guest next to
`iommuctl status --json` (issue 20, point 4). fwupd's IOMMU attribute (`org.fwupd.hsi.Iommu`,
HSI level 2) passes as soon as a device of the `iommu` class exists: it looks at no domain type.
iommud looks at each group's type. The scenario checks, on VT-d (6.12):

- every snapshot of iommuctl against the kernel (check_status.py: groups, types, exposure);
- fwupd behaves as described: its IOMMU attribute is `enabled` with `success` exactly when
  /sys/class/iommu has an entry, `not-found` otherwise;
- the two disagree exactly where the issue says fwupd is wrong: fwupd passes and iommud lists
  devices that can reach all memory on the `iommu=pt` host and after iommud put a group in
  `identity`; on the translated host both pass; with `intel_iommu=off` both fail;
- on `iommu=pt` every endpoint reaches all memory for iommud, and its level is 0;
- with an NIC behind an external-facing port (untrusted), fwupd's report is that of the translated
  host; iommud's level says whether the untrusted NIC is strict and bounced;
- fwupd's pre-boot DMA attribute (`org.fwupd.hsi.PrebootDma`, from the DMAR table) and iommud's
  `pre-boot-dma-protection` criterion agree (QEMU's DMAR does not set DMA_CTRL_PLATFORM_OPT_IN).

The table in docs/score.md shows what each tool said here.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import check_status
import scenarios
import vmlib

NVME = "0000:01:00.0"  # nvme-solo, put in identity by iommud in the translated boot

IDENTITY_RULE = f"""[[rule]]
name = "vm-nvme-identity"
description = "identity for the solo NVMe (tests/vm fwupd)"
domain = "identity"
accept = ["no-isolation"]
when = "always"
[rule.match]
address = "{NVME}"
"""

GUEST = r"""#!/bin/bash
set -u
ctl=/vm/in/iommuctl
rm -rf /var/lib/iommud /run/iommud  # the host's own records show through the shared root
report() {  # report PREFIX: the kernel's facts and iommuctl, then fwupd
    /vm/in/collect-status "$ctl" "$1" || exit 1
    ls /sys/class/iommu > "$1iommu-class.txt" 2>&1
    fwupdtool security --json --force > "$1fwupd.json" 2> "$1fwupd.err"; echo $? > "$1fwupd.rc"
}
report ""
if [[ @IDENTITY@ == 1 ]]; then
    mkdir -m 0755 -p /tmp/pol && cp /vm/in/pol/50-vm.toml /tmp/pol/ && chmod 0644 /tmp/pol/50-vm.toml
    "$ctl" apply --policies /tmp/pol > apply.out 2>&1; echo $? > apply.rc
    report identity-
fi
exit 0
"""

# name -> (machine, whether iommud also puts a group in identity, iommud should list all-memory devices)
CASES = {
    "translated": (vmlib.Machine(iommu="intel", caching_mode=False), True),
    "pt": (vmlib.Machine(iommu="intel", caching_mode=False, cmdline=["iommu=pt"]), False),
    "off": (vmlib.Machine(iommu="intel", caching_mode=False, cmdline=["intel_iommu=off"]), False),
    # An e1000e behind a root port an SSDT marks external-facing (untrusted, as in the untrusted
    # scenario): fwupd's report does not change; iommud's exposure and level do.
    "external-port": (vmlib.external_port_machine(), False),
}


def _attr(fwupd: dict, appstream_id: str) -> dict:
    for a in fwupd.get("SecurityAttributes", []):
        if a.get("AppstreamId") == appstream_id:
            return a
    return {}


def _passes(attr: dict) -> bool:
    return "success" in (attr.get("Flags") or [])


def snapshot_problems(out: Path, prefix: str, label: str, rows: list[dict]) -> list[str]:
    probs: list[str] = []
    k, p = check_status.check(out, prefix)
    probs += [f"{label}: iommuctl vs the kernel: {x}" for x in p]
    rc = (out / f"{prefix}fwupd.rc").read_text().strip()
    if rc != "0":
        return probs + [f"{label}: fwupdtool exited {rc}: {(out / f'{prefix}fwupd.err').read_text()[-800:]}"]
    fwupd = json.loads((out / f"{prefix}fwupd.json").read_text())
    status = json.loads((out / f"{prefix}status.json").read_text())
    iommu = _attr(fwupd, "org.fwupd.hsi.Iommu")
    units = (out / f"{prefix}iommu-class.txt").read_text().split()
    # fwupd as the issue describes it: an IOMMU device exists -> enabled, whatever the domains.
    if _passes(iommu) != bool(units) or iommu.get("HsiResult") != ("enabled" if units else "not-found"):
        probs.append(f"{label}: fwupd's IOMMU attribute is {iommu.get('HsiResult')} {iommu.get('Flags')} "
                     f"with /sys/class/iommu {units}")
    # The harness's own virtio-9p shares lack VIRTIO_F_ACCESS_PLATFORM: they reach all memory on every
    # host (docs/kernel.md §4.3), which fwupd's IOMMU attribute does not look at. Left out of both counts.
    bypass = {a for f in status.get("findings", []) if f.get("id") == "virtio-bypasses-iommu"
              for a in f.get("devices", [])}
    all_memory = [a for a in status.get("exposure", {}).get("all_memory", []) if a not in bypass]
    # The DMA masters, as check_status counts them: no PCI-to-PCI bridge (0x0604), no host bridge (0x0600).
    endpoints = sorted(a for a, cls in k.classes.items() if not cls.startswith(("0x0604", "0x0600")) and a not in bypass)
    criteria = {c.get("id"): c for c in status.get("score", {}).get("criteria", [])}
    preboot = _attr(fwupd, "org.fwupd.hsi.PrebootDma")
    ours = criteria.get("pre-boot-dma-protection", {}).get("met")
    if _passes(preboot) != (ours is True):
        probs.append(f"{label}: fwupd's PrebootDma is {preboot.get('HsiResult')} {preboot.get('Flags')}, iommud's "
                     f"pre-boot-dma-protection met={ours}")
    fwupd_view = sorted((a.get("AppstreamId"), a.get("HsiResult"), tuple(a.get("Flags") or []))
                        for a in fwupd.get("SecurityAttributes", []))
    rows.append({"host": label, "fwupd_all": fwupd_view, "bounce_pool": criteria.get("bounce-pool-active", {}).get("met"), "fwupd_iommu": f"{iommu.get('HsiResult')}{' (pass)' if _passes(iommu) else ''}",
                 "fwupd_preboot": preboot.get("HsiResult"), "iommud_all_memory": len(all_memory),
                 "endpoints": len(endpoints), "iommud_level": status.get("score", {}).get("level"),
                 "preboot_met": ours, "disagree": _passes(iommu) and bool(all_memory)})
    return probs


def summary_problems(rows: list[dict], notes: list[str]) -> list[str]:
    """What the snapshots say together: where fwupd and iommud disagree."""
    probs: list[str] = []
    for row in rows:
        notes.append(json.dumps({k: v for k, v in row.items() if k != "fwupd_all"}))
    by_host = {r["host"]: r for r in rows}
    ext, plain = by_host.get("external-port"), by_host.get("translated")
    # fwupd sees nothing of an untrusted device; iommud says its bounce pool is missing (1 GiB: the
    # kernel sets no swiotlb up, see the untrusted scenario).
    if ext and plain and ext["fwupd_all"] != plain["fwupd_all"]:
        probs.append("external-port: fwupd's report differs from the translated host's: "
                     f"{sorted(set(ext['fwupd_all']) ^ set(plain['fwupd_all']))}")
    if ext and ext["bounce_pool"] is not False:
        probs.append(f"external-port: iommud's bounce-pool-active is {ext['bounce_pool']}, want false (no swiotlb)")
    # Where they disagree: exactly the hosts with devices that reach all memory while an IOMMU exists.
    disagree = sorted(r["host"] for r in rows if r["disagree"])
    want = sorted(["pt", "translated, NVMe identity by iommud"])
    if len(rows) == 5 and disagree != want:
        probs.append(f"fwupd passes the IOMMU while iommud lists all-memory devices on {disagree}, want {want}")
    for r in rows:
        if r["host"] == "pt" and (r["iommud_all_memory"] != r["endpoints"] or r["iommud_level"] != 0):
            probs.append(f"iommu=pt: iommud lists {r['iommud_all_memory']} of {r['endpoints']} endpoints reaching "
                         f"all memory, level {r['iommud_level']}; want all, level 0")
        if r["host"] == "translated" and r["iommud_all_memory"] != 0:
            probs.append(f"translated: iommud lists {r['iommud_all_memory']} devices reaching all memory")
        if r["host"] == "translated, NVMe identity by iommud" and r["iommud_all_memory"] != 1:
            probs.append(f"NVMe in identity: iommud lists {r['iommud_all_memory']} devices reaching all memory, want 1")
    return probs


def run_fwupd(series: str, iommuctl: Path, out_dir: Path | None = None, echo: bool = False) -> scenarios.Outcome:
    kernel = vmlib.find_kernel(series)
    files, _ = scenarios._prepare_iommuctl(iommuctl)
    files["pol/50-vm.toml"] = IDENTITY_RULE
    probs: list[str] = []
    notes: list[str] = []
    rows: list[dict] = []
    seconds = 0.0
    accel = "?"
    base = out_dir or Path(tempfile.mkdtemp(prefix="iommud-vm-fwupd-"))
    for name, (machine, identity) in CASES.items():
        script = GUEST.replace("@IDENTITY@", "1" if identity else "0")
        r = vmlib.boot(kernel, machine, script, files_in=files, timeout=240,
                       out_dir=base / name, echo=echo)
        seconds += r.seconds
        accel = r.accel
        try:
            r.check()
            probs += snapshot_problems(r.out_dir, "", name, rows)
            if identity:
                if (r.out_dir / "apply.rc").read_text().strip() != "0":
                    probs.append(f"{name}: iommuctl apply (identity): {(r.out_dir / 'apply.out').read_text()[-600:]}")
                probs += snapshot_problems(r.out_dir, "identity-", f"{name}, NVMe identity by iommud", rows)
        except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError, json.JSONDecodeError) as e:
            probs.append(f"{name}: {type(e).__name__}: {e}")
    probs += summary_problems(rows, notes)
    return scenarios.Outcome(f"fwupd on {series}", seconds, accel, probs, notes, base)
