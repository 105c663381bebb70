#!/usr/bin/env python3
"""Check the checker, without QEMU: on facts and JSON recorded from real
guests (testdata/), check_status must agree, and must catch each kind of
disagreement planted in a copy of the JSON.  A checker that passes
everything would make the whole vm layer worthless."""

import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import check_status  # noqa: E402
import vmlib  # noqa: E402


def group(d, gid):
    return next(g for g in d["groups"] if g["id"] == gid)


def device(d, address):
    return next(x for x in d["devices"] if x["address"] == address)


# name -> (fixture, mutation of the JSON, text the problem report must contain)
MUTATIONS = {
    "wrong cmdline": ("vtd-cm1-6.12", lambda d: d["kernel"].update(cmdline="x"), "kernel.cmdline"),
    "wrong release": ("vtd-cm1-6.12", lambda d: d["kernel"].update(release="6.1.0"), "kernel.release"),
    "wrong cap": ("vtd-cm1-6.12", lambda d: d["iommu"]["units"][0].update(cap="0x1"), "dmar0.cap"),
    "wrong ecap": ("vtd-cm1-6.12", lambda d: d["iommu"]["units"][0].update(ecap="0x0"), "dmar0.ecap"),
    "missed CM": ("vtd-cm1-6.12", lambda d: d["iommu"]["units"][0].update(caching_mode=False),
                  "caching_mode"),
    "wrong strict": ("vtd-cm0-6.1", lambda d: d["iommu"].update(strict=True), "iommu.strict"),
    "wrong default": ("vtd-cm0-6.1", lambda d: d["iommu"].update(default_domain="passthrough"),
                      "iommu.default_domain"),
    "wrong vendor": ("amd-pt-6.1", lambda d: d["iommu"].update(vendor="intel"), "iommu.vendor"),
    "wrong NpCache": ("amd-pt-6.1", lambda d: d["iommu"]["units"][0].update(np_cache=False), "np_cache"),
    "group type": ("vtd-cm0-6.1", lambda d: group(d, 8).update(type="identity"), "group 8 type"),
    "group member lost": ("vtd-cm1-6.12", lambda d: group(d, 9)["devices"].pop(), "group 9 devices"),
    "group lost": ("vtd-cm1-6.12", lambda d: d["groups"].pop(), "groups[].id"),
    "finding lost": ("vtd-cm1-6.12", lambda d: d.update(findings=[]), "finding caching-mode"),
    "finding extra": ("vtd-cm0-6.1", lambda d: d["findings"].append({"id": "caching-mode"}),
                      "finding caching-mode"),
    "IOMMU made up": ("none-6.1", lambda d: d["iommu"].update(present=True), "iommu.present"),
    "finding without IOMMU": ("none-6.1", lambda d: d["findings"].append({"id": "default-on"}),
                              "finding default-on"),
    "untrusted lost": ("untrusted-6.12", lambda d: device(d, "0000:06:00.0").update(untrusted=False),
                       "0000:06:00.0 untrusted"),
    "trusted made untrusted": ("untrusted-6.12", lambda d: device(d, "0000:04:00.0").update(untrusted=True),
                               "0000:04:00.0 untrusted"),
    "removable lost": ("untrusted-6.12", lambda d: device(d, "0000:06:00.0").update(removable=None),
                       "0000:06:00.0 removable"),
    "untrusted device dropped": ("untrusted-6.12", lambda d: d["devices"].remove(device(d, "0000:06:00.0")),
                                 "0000:06:00.0: removable (untrusted) to the kernel"),
    "untrusted-bounce lost": ("untrusted-6.12",
                              lambda d: d.update(findings=[f for f in d["findings"] if f["id"] != "untrusted-bounce"]),
                              "finding untrusted-bounce"),
    "untrusted-bounce made up": ("vtd-cm0-6.1", lambda d: d["findings"].append({"id": "untrusted-bounce"}),
                                 "finding untrusted-bounce"),
    "member the schema lacks": ("vtd-cm0-6.1", lambda d: d["iommu"].update(units_total=1), "schema: at /iommu"),
    "exposure not from the groups": ("amd-pt-6.1",
                                     lambda d: d["exposure"]["devices"][0].update(level="mapped"),
                                     "exposure of 0000:00:00.0"),
    "device reaching all memory left out": ("amd-pt-6.1", lambda d: d["exposure"]["all_memory"].pop(),
                                            "exposure.all_memory"),
    "mode the schema lacks": ("amd-pt-6.1", lambda d: d["iommu"].update(mode="passthrough"), "schema: at /iommu/mode"),
    # arm64 (arm64_scenario.py, `run arm64-status smmu --kernel 6.12 --keep`): an SMMUv3 on a device tree.
    "SMMU unit lost": ("arm64-smmu-6.12", lambda d: d["iommu"]["units"].pop(), "iommu.units[].name"),
    "SMMU unit's vendor": ("arm64-smmu-6.12", lambda d: d["iommu"]["units"][0].update(vendor="arm-smmu"),
                           "smmu3.0x0000000009050000.vendor"),
    "SMMU taken for another vendor": ("arm64-smmu-6.12", lambda d: d["iommu"].update(vendor="unknown"),
                                      "iommu.vendor"),
    "smmu-strict lost": ("arm64-smmu-6.12",
                         lambda d: d.update(findings=[f for f in d["findings"] if f["id"] != "smmu-strict"]),
                         "finding smmu-strict"),
    "smmu-strict on VT-d": ("vtd-cm1-6.12", lambda d: d["findings"].append({"id": "smmu-strict"}),
                            "finding smmu-strict"),
    "Arm strictness": ("arm64-smmu-6.12", lambda d: d["iommu"].update(strict=False), "iommu.strict"),
    # The host bridge has no group on arm64: not a DMA master, and the SMMUv3 aborts its stream.
    "host bridge taken for a DMA master": ("arm64-smmu-6.12",
                                           lambda d: device(d["exposure"], "0000:00:00.0").update(level="all-memory"),
                                           "exposure of 0000:00:00.0"),
}


# A guest console as Debian's 6.12.117 left it when it panicked in CI under the bounce scenario's
# UDP sender (the oops's first lines as 6.12 prints them, then the tail CI showed).
PANIC = """[   23.40] e1000e 0000:02:00.0 enp2s0: NIC Link is Up 1000 Mbps Full Duplex
[   23.55] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   23.55] #PF: supervisor write access in kernel mode
[   23.56] CPU: 0 UID: 0 PID: 412 Comm: @COMM@ Not tainted 6.12.117+deb12-amd64 #1  Debian 6.12.117-1~bpo12+1
[   23.56] RIP: 0010:net_rx_action+0xec/0x420
[   23.58] Kernel panic - not syncing: Fatal exception in interrupt"""


def panics() -> list[tuple[str, bool]]:
    """boot_again_after_foreign_panic, on consoles instead of boots: (what, passed)."""
    def result(console: str, status: int | None) -> vmlib.Result:
        return vmlib.Result(status, console, Path("/nonexistent"), "tcg", 1.0, False)

    def run(*boots: vmlib.Result) -> tuple[list[int], vmlib.Result, list[str]]:
        asked: list[int] = []
        notes: list[str] = []
        r = vmlib.boot_again_after_foreign_panic(lambda n: (asked.append(n), boots[n - 1])[1], ("iommuctl",), notes)
        return asked, r, notes

    ok_boot = result("[    9.00] all well", 0)
    foreign = result(PANIC.replace("@COMM@", "python3"), None)
    ours = result(PANIC.replace("@COMM@", "iommuctl"), None)
    checks = []
    asked, r, notes = run(foreign, ok_boot)
    checks.append(("a panic in the traffic's process boots again and says so",
                   asked == [1, 2] and r is ok_boot and "panicked in python3" in notes[0]
                   and "NULL pointer dereference" in notes[0]))
    asked, r, notes = run(ours, ok_boot)
    try:
        r.check()
        reported = False
    except vmlib.GuestFailed as e:
        reported = "Comm: iommuctl" in str(e) and "BUG: kernel NULL" in str(e)
    checks.append(("a panic in iommuctl fails, with the oops's start", asked == [1] and r is ours
                   and not notes and reported))
    asked, r, _ = run(foreign, foreign)
    checks.append(("a second panic fails", asked == [1, 2] and r is foreign))
    asked, r, _ = run(result("[    9.00] exit 1", 1), ok_boot)
    checks.append(("a script that failed is not booted again", asked == [1] and r.exit_status == 1))
    return checks


def main() -> int:
    failures = 0
    for what, ok in panics():
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'}: {what}")
    for fixture in sorted(p.name for p in (HERE / "testdata").iterdir()):
        _, problems = check_status.check(HERE / "testdata" / fixture)
        ok = not problems
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'}: recorded {fixture} agrees" + "".join(f"\n    - {p}" for p in problems))
    for name, (fixture, mutate, needle) in MUTATIONS.items():
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / fixture
            shutil.copytree(HERE / "testdata" / fixture, d)
            data = json.loads((d / "status.json").read_text())
            mutated = copy.deepcopy(data)
            mutate(mutated)
            (d / "status.json").write_text(json.dumps(mutated))
            _, problems = check_status.check(d)
        ok = any(needle in p for p in problems)
        failures += not ok
        print(f"{'ok' if ok else 'FAIL'}: catches {name} ({fixture})"
              + ("" if ok else f": problems were {problems}"))
    total = len(MUTATIONS) + len(list((HERE / "testdata").iterdir())) + len(panics())
    print(f"{total - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
