"""The replay scenario: one sequence of writes (group types, unbind/bind with a wrong driver, bad
module-parameter values, groups of one and of several devices) on Debian's real kernel, its
errnos and the state after each write recorded, so that the fake kernel of the unit tests
(tests/support/fake_kernel) is judged against Linux, not against iommud.

The guest boots strict (every group at DMA) and runs REPLAY_GUEST (python3). The host compares
the result with the fake kernel live: `unit_tests --gtest_filter=FakeKernelReplay.*` with
IOMMUD_REPLAY=<the guest's file> replays the same writes on a FakeHost of this machine. The
recorded results (replay/replay-<series>.json, written by `run replay --record`) are what the
unit test compares against without a guest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import vmlib
from scenarios import Outcome, _intel

SOLO, BRIDGE, PAIR_A, PAIR_B, NIC = "0000:01:00.0", "0000:02:00.0", "0000:03:01.0", "0000:03:02.0", "0000:04:00.0"
PARAMS = "/sys/module/nvme/parameters"

# (path, value): groups are named by a member ("group:ADDRESS"), resolved in the guest.
STEPS: list[tuple[str, str]] = [
    (f"group:{SOLO}", "bogus"),
    (f"group:{SOLO}", "identity"),        # driver bound: EBUSY before 6.4, EPERM since
    (f"group:{PAIR_A}", "identity"),      # three devices: EINVAL before 6.4 (checked first), EPERM since
    (f"group:{PAIR_A}", "DMA-FQ"),        # the live change: EINVAL before 6.4, taken since
    (f"group:{SOLO}", "DMA-FQ"),          # the live change of one device: taken
    (f"group:{SOLO}", "DMA"),             # back is never live
    ("/sys/bus/pci/drivers/e1000e/bind", SOLO),    # a driver that does not match: ENODEV
    ("/sys/bus/pci/drivers/e1000e/unbind", SOLO),  # not its driver: ENODEV
    ("/sys/bus/pci/drivers/nvme/unbind", SOLO),
    ("/sys/bus/pci/drivers/e1000e/bind", SOLO),
    (f"group:{SOLO}", "identity"),
    (f"group:{SOLO}", "DMA"),
    ("/sys/bus/pci/drivers/nvme/bind", SOLO),
    ("/sys/bus/pci/drivers/nvme/bind", SOLO),      # bound already: EBUSY
    ("/sys/bus/pci/drivers/nvme/unbind", PAIR_A),
    ("/sys/bus/pci/drivers/nvme/unbind", PAIR_B),
    (f"group:{PAIR_A}", "identity"),      # unbound, three devices: EINVAL before 6.4, taken since
    (f"group:{PAIR_A}", "DMA"),
    ("/sys/bus/pci/drivers/nvme/bind", PAIR_A),
    ("/sys/bus/pci/drivers/nvme/bind", PAIR_B),
    (f"{PARAMS}/io_queue_depth", "banana"),
    (f"{PARAMS}/io_queue_depth", "1"),    # its setter wants at least 2
    (f"{PARAMS}/io_queue_depth", "64"),
    (f"{PARAMS}/io_queue_depth", "1024"),
    (f"{PARAMS}/sgl_threshold", "-1"),
    (f"{PARAMS}/sgl_threshold", "4294967296"),
    (f"{PARAMS}/sgl_threshold", "0x100"),
    (f"{PARAMS}/sgl_threshold", "32768"),
]

REPLAY_GUEST_PY = r'''
import errno, json, os, sys
steps = json.load(open("/vm/in/steps.json"))
def group(address):
    return os.path.basename(os.path.realpath(f"/sys/bus/pci/devices/{address}/iommu_group"))
def state():
    s = {"types": {}, "drivers": {}, "params": {}}
    for name, address in (("solo", "%SOLO%"), ("pair", "%PAIR_A%")):
        with open(f"/sys/kernel/iommu_groups/{group(address)}/type") as f:
            s["types"][name] = f.read().strip()
    for address in ("%SOLO%", "%PAIR_A%", "%PAIR_B%"):
        link = f"/sys/bus/pci/devices/{address}/driver"
        s["drivers"][address] = os.path.basename(os.readlink(link)) if os.path.islink(link) else None
    for p in ("io_queue_depth", "sgl_threshold"):
        with open(f"%PARAMS%/{p}") as f:
            s["params"][p] = f.read().strip()
    return s
out = {"release": os.uname().release, "initial": state(), "steps": []}
for path, value in steps:
    real = f"/sys/kernel/iommu_groups/{group(path[6:])}/type" if path.startswith("group:") else path
    err = None
    try:
        fd = os.open(real, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    out["steps"].append({"path": path, "value": value, "errno": err, "state": state()})
json.dump(out, open("replay.json", "w"), indent=1)
print(json.dumps(out["steps"], indent=None)[:4000])
'''.replace("%SOLO%", SOLO).replace("%PAIR_A%", PAIR_A).replace("%PAIR_B%", PAIR_B).replace("%PARAMS%", PARAMS)

REPLAY_GUEST = """#!/bin/bash
set -u
python3 /vm/in/replay.py
"""

UNIT_TESTS = Path(__file__).resolve().parents[2] / "build" / "bin" / "unit_tests"
TESTDATA = Path(__file__).resolve().parent / "replay"  # not testdata/: its entries are status fixtures


def compare_with_fake(result: Path, unit_tests: Path = UNIT_TESTS) -> list[str]:
    """The fake kernel replays the guest's writes (FakeKernelReplay.* with IOMMUD_REPLAY)."""
    if not unit_tests.is_file():
        return [f"{unit_tests} is missing: build the unit_tests target to compare the fake kernel"]
    r = subprocess.run([str(unit_tests), "--gtest_filter=FakeKernelReplay.*"], capture_output=True, text=True,
                       env={**os.environ, "IOMMUD_REPLAY": str(result)}, timeout=120)
    if r.returncode != 0:
        return [f"the fake kernel does not answer as this kernel did:\n{r.stdout[-4000:]}{r.stderr[-1000:]}"]
    if "[       OK ] FakeKernelReplay." not in r.stdout:  # a filter that matches nothing passes too
        return [f"{unit_tests} ran no FakeKernelReplay test:\n{r.stdout[-2000:]}"]
    return []


def run_replay(series: str, unit_tests: Path = UNIT_TESTS, out_dir: Path | None = None, echo: bool = False,
               record: bool = False) -> Outcome:
    kernel = vmlib.find_kernel(series)
    staging = Path(tempfile.mkdtemp(prefix="iommud-vm-replay-"))
    (staging / "steps.json").write_text(json.dumps(STEPS))
    (staging / "replay.py").write_text(REPLAY_GUEST_PY)
    files = {"steps.json": staging / "steps.json", "replay.py": staging / "replay.py"}
    r = vmlib.boot(kernel, _intel(False, "iommu.strict=1"), REPLAY_GUEST, files_in=files, timeout=300,
                   out_dir=out_dir, echo=echo)
    shutil.rmtree(staging, ignore_errors=True)
    problems: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        result = r.out_dir / "replay.json"
        data = json.loads(result.read_text())
        if set(data["initial"]["types"].values()) != {"DMA"}:
            problems.append(f"iommu.strict=1 did not leave the groups at DMA: {data['initial']['types']}")
        notes.append("errnos: " + " ".join(s["errno"] or "ok" for s in data["steps"]))
        if record:
            shutil.copy(result, TESTDATA / f"replay-{series}.json")
            notes.append(f"recorded in {TESTDATA / f'replay-{series}.json'}")
        problems += compare_with_fake(result, unit_tests)
    except (vmlib.GuestFailed, FileNotFoundError, ValueError, KeyError) as e:
        problems.append(str(e))
    return Outcome(f"replay on {series}", r.seconds, r.accel, problems, notes, r.out_dir)
