"""The testbed side of bench/run-daemon's D-Bus benchmark.

The real iommud runs under umockdev's preload on the testbed host (a Thunderbolt NIC, an NVMe
pair behind a switch, a solo NVMe: 12 PCI functions) and owns org.iommud1 on a private
dbus-daemon; this Python calls it through Gio, as root, one call after the other:
- Get of the Devices property (answered from the daemon's memory),
- Plan of the whole host (a worker reads the host and plans: the JSON comes back),
- Apply with nothing to change (a worker reads, plans, applies nothing; the outcomes come back),
and times each round trip. Also the daemon's VmRSS and RssAnon at the end (with the preload in
the process: compare with the same daemon without a bus, also printed).
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time

import testbed
from test_dbus_umockdev import PERMISSIVE, PrivateBus

from gi.repository import GLib  # noqa: E402  (test_dbus_umockdev required the version)


def _rss(pid: int) -> tuple[int, int]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["RssAnon"].split()[0])


def _start(iommud: str, host: testbed.Host, tmp: str, bus: str) -> subprocess.Popen:
    for d in ("conf", "pol", "state", "run"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    with open(os.path.join(tmp, "pol", "50-bench.toml"), "w") as f:
        f.write(testbed.pair_identity_rule())
    with open(os.path.join(tmp, "conf", "iommud.conf"), "w") as f:
        f.write(f'policy-dirs = ["{tmp}/pol"]\n')
    env = host.env(CONFIGURATION_DIRECTORY=f"{tmp}/conf", RUNTIME_DIRECTORY=f"{tmp}/run",
                   STATE_DIRECTORY=f"{tmp}/state", DBUS_SYSTEM_BUS_ADDRESS=bus)
    env.pop("NOTIFY_SOCKET", None)
    env.pop("WATCHDOG_USEC", None)
    return subprocess.Popen([iommud], env=env, stderr=subprocess.DEVNULL)


def _timed(n: int, call) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return out


def run(iommud: str, gets: int, calls: int) -> dict[str, object]:
    host = testbed.Host()
    work = tempfile.mkdtemp(prefix="iommud-bench-dbus-")
    os.chmod(work, 0o755)
    try:
        bus = PrivateBus(work, PERMISSIVE)
        p = _start(iommud, host, os.path.join(work, "with-bus"), bus.address)
        q = _start(iommud, host, os.path.join(work, "no-bus"), f"unix:path={work}/none")
        try:
            testbed.wait_until("iommud on the bus", bus.owned, 30)
            testbed.wait_until("the Devices property", lambda: bus.prop("Devices"), 30)
            devices = len(bus.prop("Devices"))
            result = {
                "devices": devices,
                "get": _timed(gets, lambda: bus.prop("Devices")),
                "plan": _timed(calls, lambda: bus.call("Plan", GLib.Variant("(bs)", (False, "")), "(s)")),
                "apply": _timed(calls, lambda: bus.call("Apply", GLib.Variant("(bs)", (False, "")), "(a(ssss))")),
            }
            time.sleep(1)  # the view work after the last Apply
            result["rss"] = _rss(p.pid)
            result["rss_no_bus"] = _rss(q.pid)
            return result
        finally:
            for proc in (p, q):
                proc.terminate()
                proc.wait(30)
            bus.close()
    finally:
        host.close()
        shutil.rmtree(work, ignore_errors=True)


def summary(xs: list[float]) -> str:
    xs = sorted(xs)
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return f"p50 {statistics.median(xs):.2f} ms, p99 {p99:.2f} ms"
