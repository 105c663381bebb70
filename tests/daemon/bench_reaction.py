"""The testbed side of bench/run-daemon's reaction benchmark.

The real iommud runs under umockdev's preload on the testbed host with only the solo NVMe drive,
a debounce of 1 ms and one rule: nvme's io_queue_depth at 512, a runtime module parameter. Before
each event the parameter file is put back to 64, so that every event makes the daemon read the
host, plan, and write the parameter: real work, with no driver emulation in the measurement
(a domain change would also time this Python's bind/unbind thread). Each event is a `change`
uevent of the drive's PCI function, sent after the daemon handled the previous one. The daemon
logs at debug level, per batch, "reacted to ADDRESS in X ms": the time from the end of the
debounce to the worker's result taken in.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import testbed

POLICY = """\
[[rule]]
name = "bench-nvme-queue-depth"
description = "Give the daemon a write to make on every event"
match.kind = "nvme"

[[rule.param]]
name = "io_queue_depth"
value = 512
"""

REACTED = re.compile(r"reacted to (\S+) in ([0-9.]+) ms")
WORKED = re.compile(r"worker: read, planned and applied .* in ([0-9.]+) ms")


@contextlib.contextmanager
def run_directory():
    """A directory on a tmpfs for the daemon's records of what it changed, as /run is on a real
    system, and not under /dev: umockdev's preload takes every path under /dev for a device node
    (at each open, a look and a connect to its ioctl socket, which this process serves), a cost no
    real /run pays. As root, a tmpfs of its own, mounted for the run; otherwise /dev/shm, with that
    cost in the figures (said on stderr)."""
    base = tempfile.mkdtemp(prefix="iommud-bench-run-")
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "mode=0755,size=16m", "tmpfs", base], stderr=subprocess.DEVNULL).returncode == 0
    if not mounted:
        os.rmdir(base)
        sys.stderr.write("bench_reaction: not root, or no tmpfs could be mounted: the run directory is in /dev/shm, "
                         "where umockdev's preload adds a connect to its socket at every open of a record\n")
        base = "/dev/shm"
    run = tempfile.mkdtemp(prefix="iommud-bench-", dir=base)
    try:
        yield run
    finally:
        shutil.rmtree(run, ignore_errors=True)
        if mounted:
            subprocess.run(["umount", base], check=True)
            os.rmdir(base)


def run(iommud: str, events: int) -> tuple[list[float], list[float]]:
    """The reaction times, and the worker's own part of each (read, plan, apply), in ms."""
    host = testbed.Host(with_nic=False, with_pair=False, with_solo=True)
    times: list[float] = []
    work: list[float] = []
    lines: list[str] = []
    cond = threading.Condition()
    try:
        with tempfile.TemporaryDirectory() as tmp, run_directory() as run:
            for d in ("conf", "pol", "state"):
                os.makedirs(os.path.join(tmp, d))
            with open(os.path.join(tmp, "pol", "50-bench.toml"), "w") as f:
                f.write(POLICY)
            with open(os.path.join(tmp, "conf", "iommud.conf"), "w") as f:
                f.write(f'log-level = "debug"\ndebounce-ms = 1\npolicy-dirs = ["{tmp}/pol"]\n')
            env = host.env(CONFIGURATION_DIRECTORY=f"{tmp}/conf", RUNTIME_DIRECTORY=run,
                           STATE_DIRECTORY=f"{tmp}/state")
            env.pop("NOTIFY_SOCKET", None)
            env.pop("WATCHDOG_USEC", None)
            param = host.path("/sys/module/nvme/parameters/io_queue_depth")
            with open(param, "w") as f:
                f.write("64\n")  # no longer than "512": the daemon's write does not truncate
            p = subprocess.Popen([iommud], env=env, stderr=subprocess.PIPE, text=True)

            def pump():
                for line in p.stderr:
                    with cond:
                        lines.append(line)
                        cond.notify_all()

            threading.Thread(target=pump, daemon=True).start()

            def wait_for(pattern: str, start: int, timeout: float = 30) -> int:
                deadline = time.monotonic() + timeout
                with cond:
                    while True:
                        for i in range(start, len(lines)):
                            if pattern in lines[i]:
                                return i
                        left = deadline - time.monotonic()
                        if left <= 0 or p.poll() is not None:
                            raise SystemExit("bench_reaction: no '%s' from iommud; it said:\n%s"
                                             % (pattern, "".join(lines[-30:])))
                        cond.wait(left)

            seen = wait_for("iommud started", 0)
            syspath = host._pci_syspath(testbed.SOLO_NVME)  # noqa: SLF001 (the testbed's own layout)
            try:
                for _ in range(events):
                    with open(param, "w") as f:
                        f.write("64\n")  # no longer than "512": the daemon's write does not truncate
                    host.uevent(syspath, "change")
                    before = seen
                    seen = wait_for("reacted to " + testbed.SOLO_NVME.address, seen + 1)
                    times.append(float(REACTED.search(lines[seen]).group(2)))
                    worked = [m for m in map(WORKED.search, lines[before + 1:seen]) if m]
                    if worked:
                        work.append(float(worked[-1].group(1)))
                with open(param) as f:
                    written = f.read()
                if not written.startswith("512"):
                    raise SystemExit(f"bench_reaction: the daemon did not write the parameter: {written!r}")
            finally:
                p.terminate()
                p.wait(30)
    finally:
        host.close()
    return times, work
