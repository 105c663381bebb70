"""Compare `iommuctl status --json` with what the kernel itself said.

Input is a directory written by guest/collect-status: the boot log
(dmesg.txt), /proc/cmdline, uname -r, every group's type and members
(groups.txt), the IOMMU units' sysfs cap/ecap/features (units.txt) and
iommuctl's JSON (status.json).  The kernel's facts are parsed here, without
any of iommuctl's code, and every field of the JSON that has a kernel
counterpart is checked against it.  The JSON is also validated against
docs/schema/status.schema.json (tests/schema/schemas.py, python3-jsonschema).

Everything returns a list of problems (strings); empty means agreement.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "schema"))
import schemas  # noqa: E402

# Findings that only make sense with an active IOMMU.
IOMMU_FINDINGS = {
    "caching-mode", "default-on", "vtd-iotlb-sync-map", "untrusted-bounce",
    "smmu-strict", "vfio-translated",
}
# Every finding id this checker has a rule for; others are reported, not judged.
KNOWN_FINDINGS = IOMMU_FINDINGS | {"cmdline-conflict", "iommu-off"}

# docs/kernel.md §3.1: the VT-d iotlb_sync_map regression, first in 6.10; fixed in
# 6.12.43, 6.15.11, 6.16.2 and 6.17.  Half-open [lo, hi) ranges.
IOTLB_SYNC_MAP_AFFECTED = [((6, 10, 0), (6, 12, 43)), ((6, 13, 0), (6, 15, 11)),
                           ((6, 16, 0), (6, 16, 2))]

INTEL_CAP_CM = 1 << 7
INTEL_CAP_RWBF = 1 << 4
AMD_CAP_NPCACHE = 1 << 26


@dataclasses.dataclass
class Unit:
    name: str
    cap: int | None = None
    ecap: int | None = None
    features: str | None = None  # AMD, raw sysfs text
    boot_cap: int | None = None  # from the DMAR boot-log line (VT-d)
    boot_ecap: int | None = None


@dataclasses.dataclass
class KernelFacts:
    """What the guest kernel said about itself, from one collect-status run."""

    release: str
    cmdline: str
    version: tuple[int, int, int]
    units: dict[str, Unit]
    default_type: str | None  # "Translated" / "Passthrough" (boot log)
    default_by_cmdline: bool
    tlb_policy: str | None  # "strict" / "lazy" (boot log; absent for passthrough)
    forced_strict: bool  # a driver forced strict ("due to virtualization")
    groups: dict[int, tuple[str, list[str]]]  # id -> (type, members)
    classes: dict[str, str]  # PCI address -> class (0x060400)
    # PCI address -> sysfs `removable` ("removable", "fixed", "unknown", "-" absent); None when
    # the snapshot predates removable.txt (testdata recorded before it).
    removable: dict[str, str] | None = None
    # The parameters the kernel did not know ("Unknown kernel command line parameters ..."), which
    # init got instead: on arm64 x86's iommu= is one (docs/kernel.md §1.5).
    unknown_params: list[str] = dataclasses.field(default_factory=list)
    # PCI address -> its virtio child's negotiated features ("0101...", bit 0 first; "-" with no
    # driver bound, which negotiated nothing); None when the snapshot predates virtio.txt.
    virtio: dict[str, str] | None = None

    def bypasses_iommu(self, address: str) -> bool:
        """A virtio device without VIRTIO_F_ACCESS_PLATFORM (bit 33) uses no DMA API (§4.3)."""
        features = (self.virtio or {}).get(address, "-")
        return len(features) > 33 and features[33] != "1"

    def untrusted(self, address: str) -> bool:
        """The kernel marks a device below an external-facing port removable and untrusted by
        the same rule (docs/kernel.md §5); sysfs shows only the first."""
        return (self.removable or {}).get(address) == "removable"

    @property
    def vendor(self) -> str:
        names = list(self.units)
        if any(n.startswith("dmar") for n in names):
            return "intel"
        if any(n.startswith("ivhd") for n in names):
            return "amd"
        # The Arm SMMU drivers name a unit after its MMIO base: smmu3.0x... (v3), smmu.0x... (v1/v2).
        if any(n.startswith("smmu3.") for n in names):
            return "arm-smmu-v3"
        if any(n.startswith("smmu.") for n in names):
            return "arm-smmu"
        return "none"

    @property
    def present(self) -> bool:
        return bool(self.units)


def read_facts(d: Path, prefix: str = "") -> KernelFacts:
    def text(name: str) -> str:
        return (d / f"{prefix}{name}").read_text()

    dmesg = text("dmesg.txt")
    release = text("release.txt").strip()
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", release)
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    # Debian's release (6.1.0-56) hides the sublevel; the banner ends with the
    # package version ("... Debian 6.1.192-2"), after the compiler's.
    banner = re.search(r"Linux version .*", dmesg)
    found = re.findall(r"Debian (\d+)\.(\d+)\.(\d+)", banner.group(0) if banner else "")
    if found:
        version = tuple(int(x) for x in found[-1])

    units: dict[str, Unit] = {}
    for line in text("units.txt").splitlines():
        name, attr, value = line.split(" ", 2)
        u = units.setdefault(name, Unit(name))
        if attr.endswith("/cap"):
            u.cap = int(value, 16)
        elif attr.endswith("/ecap"):
            u.ecap = int(value, 16)
        elif attr.endswith("/features"):
            u.features = value.strip()
    # Units without any of those files (an SMMUv3 has none); older snapshots lack the file.
    if (d / f"{prefix}unitnames.txt").is_file():
        for name in text("unitnames.txt").split():
            units.setdefault(name, Unit(name))
    for m in re.finditer(r"DMAR: (dmar\d+): reg_base_addr \S+ ver \S+ cap ([0-9a-f]+) ecap ([0-9a-f]+)",
                         dmesg):
        if m.group(1) in units:  # logged even when VT-d is then disabled
            units[m.group(1)].boot_cap = int(m.group(2), 16)
            units[m.group(1)].boot_ecap = int(m.group(3), 16)

    m = re.search(r"Default domain type: (\w+)( \(set via kernel command line\))?", dmesg)
    default_type = m.group(1) if m else None
    default_by_cmdline = bool(m and m.group(2))
    m = re.search(r"DMA domain TLB invalidation policy: (\w+) mode", dmesg)
    tlb_policy = m.group(1) if m else None
    forced_strict = bool(re.search(r"IOMMU batching disallowed due to virtualization|"
                                   r"AMD-Vi: Using strict mode due to virtualization", dmesg))

    groups: dict[int, tuple[str, list[str]]] = {}
    for line in text("groups.txt").splitlines():
        gid, gtype, *members = line.split()
        groups[int(gid)] = (gtype, sorted(members))

    classes = dict(line.split() for line in text("pci.txt").splitlines())
    removable = None
    if (d / f"{prefix}removable.txt").is_file():
        removable = dict(line.split() for line in text("removable.txt").splitlines())
    virtio = None
    if (d / f"{prefix}virtio.txt").is_file():
        virtio = {a: features for a, _, features in (line.split() for line in text("virtio.txt").splitlines())}
    m = re.search(r'Unknown kernel command line parameters "([^"]*)", will be passed to user space', dmesg)
    unknown = m.group(1).split() if m else []
    return KernelFacts(release, text("cmdline.txt").strip(), version, units, default_type,
                       default_by_cmdline, tlb_policy, forced_strict, groups, classes, removable, unknown,
                       virtio)


def expected_findings(k: KernelFacts) -> set[str]:
    """The known findings this host should get, judged from the kernel's facts."""
    # An IOMMU parameter the kernel does not know did nothing: iommuctl must say so.
    iommu_keys = ("iommu", "intel_iommu", "amd_iommu")
    out = {"cmdline-conflict"} if any(
        p.split("=", 1)[0].replace("-", "_") in iommu_keys for p in k.unknown_params) else set()
    if not k.present:
        return out | {"iommu-off"}
    if any(u.cap is not None and (
            (u.name.startswith("dmar") and u.cap & INTEL_CAP_CM) or
            (u.name.startswith("ivhd") and u.cap & AMD_CAP_NPCACHE)) for u in k.units.values()):
        out.add("caching-mode")
    # Translation on although the command line did not ask for it.
    if k.default_type == "Translated" and not k.default_by_cmdline:
        out.add("default-on")
    affected = any(lo <= k.version < hi for lo, hi in IOTLB_SYNC_MAP_AFFECTED)
    noop_flush = any(u.name.startswith("dmar") and u.cap is not None
                     and not u.cap & (INTEL_CAP_CM | INTEL_CAP_RWBF) for u in k.units.values())
    if affected and noop_flush and any(
            t in ("DMA", "DMA-FQ") and len(_endpoints(members, k.classes)) >= 2 for t, members in k.groups.values()):
        out.add("vtd-iotlb-sync-map")
    # An untrusted NIC or NVMe in a translated group: strict DMA and swiotlb bounce.
    translated = {m for t, members in k.groups.values() if t in ("DMA", "DMA-FQ") for m in members}
    if any(k.untrusted(a) and a in translated and k.classes.get(a, "")[:6] in ("0x0200", "0x0108")
           for a in k.classes):
        out.add("untrusted-bounce")
    # An Arm SMMU with a group in strict DMA (docs/kernel.md: arm64 defaults to strict).
    if k.vendor in ("arm-smmu", "arm-smmu-v3") and any(t == "DMA" for t, _ in k.groups.values()):
        out.add("smmu-strict")
    # A virtio device without VIRTIO_F_ACCESS_PLATFORM: the guests' own 9p shares, unless set.
    if any(k.bypasses_iommu(a) for a in k.classes):
        out.add("virtio-bypasses-iommu")
    # No scenario has VFIO, or options the kernel knows and overrides.
    return out


def _endpoints(members: list[str], classes: dict[str, str]) -> list[str]:
    # Bridges share groups with the devices behind them; the regression needs
    # two endpoints in one domain.  Class 0x0604xx is a PCI-to-PCI bridge.
    return [m for m in members if not classes.get(m, "").startswith("0x0604")]


def _hex(value) -> int | None:
    if value is None:
        return None
    return int(str(value), 16)


def check(d: Path, prefix: str = "") -> tuple[KernelFacts, list[str]]:
    """Check one collect-status snapshot; returns the kernel facts and problems."""
    problems: list[str] = []
    k = read_facts(d, prefix)
    rc = (d / f"{prefix}status.rc").read_text().strip()
    if rc != "0":
        err = (d / f"{prefix}status.stderr").read_text()
        return k, [f"iommuctl status --json exited {rc}: {err.strip()[:2000]}"]
    try:
        s = json.loads((d / f"{prefix}status.json").read_text())
    except json.JSONDecodeError as e:
        return k, [f"status.json is not JSON: {e}"]

    problems += [f"schema: {p}" for p in schemas.problems("status", s)]

    def expect(what: str, got, want) -> None:
        if got != want:
            show = (lambda v: hex(v) if isinstance(v, int) and not isinstance(v, bool) else repr(v))
            problems.append(f"{what}: iommuctl says {show(got)}, kernel says {show(want)}")

    kern = s.get("kernel", {})
    expect("kernel.release", kern.get("release"), k.release)
    expect("kernel.cmdline", (kern.get("cmdline") or "").strip(), k.cmdline)

    io = s.get("iommu", {})
    expect("iommu.present", io.get("present"), k.present)
    expect("iommu.vendor", io.get("vendor"), k.vendor)

    units = {u.get("name"): u for u in io.get("units", [])}
    expect("iommu.units[].name", sorted(units), sorted(k.units))
    for name, ku in k.units.items():
        ju = units.get(name)
        if ju is None:
            continue
        expect(f"{name}.cap", _hex(ju.get("cap")), ku.cap)
        if name.startswith(("smmu3.", "smmu.")):
            expect(f"{name}.vendor", ju.get("vendor"), "arm-smmu-v3" if name.startswith("smmu3.") else "arm-smmu")
        if name.startswith("dmar"):
            expect(f"{name}.ecap", _hex(ju.get("ecap")), ku.ecap)
            # The boot log and sysfs must agree too, or the test itself is wrong.
            expect(f"{name}.cap (DMAR boot-log line)", _hex(ju.get("cap")), ku.boot_cap)
            expect(f"{name}.ecap (DMAR boot-log line)", _hex(ju.get("ecap")), ku.boot_ecap)
            expect(f"{name}.caching_mode", ju.get("caching_mode"), bool(ku.cap & INTEL_CAP_CM))
            expect(f"{name}.rwbf", ju.get("rwbf"), bool(ku.cap & INTEL_CAP_RWBF))
        if name.startswith("ivhd"):
            expect(f"{name}.np_cache", ju.get("np_cache"), bool(ku.cap & AMD_CAP_NPCACHE))

    if k.present:
        want_default = {"Translated": "translated", "Passthrough": "passthrough"}.get(k.default_type or "")
        expect("iommu.default_domain", io.get("default_domain"), want_default)
        # The kernel prints its invalidation policy only for translated defaults.
        if k.tlb_policy is not None:
            expect("iommu.strict", io.get("strict"), k.tlb_policy == "strict")
        types = {t for t, _ in k.groups.values()}
        if len(types) == 1:
            expect("iommu.mode (the type of every group)", io.get("mode"), types.pop())
    else:
        expect("iommu.default_domain", io.get("default_domain"), None)
        expect("iommu.strict", io.get("strict"), None)

    groups = {g.get("id"): g for g in s.get("groups", [])}
    expect("groups[].id", sorted(groups), sorted(k.groups))
    for gid, (gtype, members) in k.groups.items():
        g = groups.get(gid)
        if g is None:
            continue
        expect(f"group {gid} type", g.get("type"), gtype)
        expect(f"group {gid} devices", sorted(g.get("devices", [])), members)

    # Each device's removable state as sysfs has it, and untrusted exactly where the kernel's is.
    if k.removable is not None:
        devices = {d.get("address"): d for d in s.get("devices", [])}
        for address in sorted(devices):
            kr = k.removable.get(address)
            if kr is None:
                continue  # not a PCI function the guest listed
            expect(f"{address} removable", devices[address].get("removable"), None if kr == "-" else kr)
            expect(f"{address} untrusted", devices[address].get("untrusted"), k.untrusted(address))
        for address in sorted(a for a in k.removable if k.untrusted(a) and a not in devices):
            problems.append(f"{address}: removable (untrusted) to the kernel, not among iommuctl's devices")
    # What each device can reach follows from the kernel's own group types (docs/score.md,
    # status-json.md): a host bridge (class 0x0600) masters no DMA -> none; no IOMMU -> all memory;
    # no group -> on an SMMUv3 the stream aborts (none) unless arm-smmu-v3.disable_bypass=0, on
    # VT-d and AMD-Vi nothing translates it (all memory); identity -> all memory; DMA-FQ -> a window
    # after unmap; DMA -> mapped buffers only, and for an untrusted device (the kernel's own
    # removable state, where the guest collected it) mapped buffers with sub-page isolation.
    exposures = {e.get("address"): e.get("level") for e in s.get("exposure", {}).get("devices", [])}
    group_of = {a: gtype for gtype, members in k.groups.values() for a in members}
    by_type = {"identity": "all-memory", "DMA-FQ": "mapped-window", "DMA": "mapped", "blocked": "none"}
    smmu_aborts = k.vendor == "arm-smmu-v3" and not re.search(
        r"(^|\s)arm[-_]smmu[-_]v3\.disable_bypass=(0|n|N|f|F|off)(\s|$)", k.cmdline)
    want_all = []
    for address, cls in sorted(k.classes.items()):
        if cls.startswith("0x0600"):
            want_level = "none"
        elif k.present and address in group_of:
            want_level = by_type.get(group_of[address], "unknown")
        else:
            want_level = "none" if k.present and smmu_aborts else "all-memory"
        if want_level == "mapped" and k.removable is not None and k.untrusted(address):
            want_level = "mapped-subpage"
        if k.bypasses_iommu(address):
            want_level = "all-memory"
        expect(f"exposure of {address}", exposures.get(address), want_level)
        if want_level == "all-memory" and not cls.startswith("0x0604"):
            want_all.append(address)
    expect("exposure.all_memory", s.get("exposure", {}).get("all_memory"), want_all)

    ids = {f.get("id") for f in s.get("findings", [])}
    want = expected_findings(k)
    for fid in sorted(want - ids):
        problems.append(f"finding {fid}: expected for this host, iommuctl did not report it")
    for fid in sorted((ids & KNOWN_FINDINGS) - want):
        problems.append(f"finding {fid}: reported, but this host should not have it")
    return k, problems


def summary(k: KernelFacts) -> str:
    types = sorted({t for t, _ in k.groups.values()})
    units = ", ".join(f"{u.name} cap={u.cap:#x}" for u in k.units.values() if u.cap is not None)
    return (f"{k.release} ({'.'.join(map(str, k.version))}): vendor={k.vendor} units=[{units}] "
            f"default={k.default_type}{' (cmdline)' if k.default_by_cmdline else ''} "
            f"tlb={k.tlb_policy}{' forced-strict' if k.forced_strict else ''} "
            f"groups={len(k.groups)} types={types}")


if __name__ == "__main__":
    import sys

    facts, probs = check(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
    print(summary(facts))
    print("\n".join(probs) or "agrees")
    sys.exit(1 if probs else 0)
