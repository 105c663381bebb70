"""org.iommud1.Manager against a private dbus-daemon: the real iommud under umockdev's preload (the
testbed host of testbed.py) owns the name on a bus this test starts with its own configuration.

Two buses: one configured as Debian's system bus is (deny by default) plus our policy file
dbus/org.iommud1.conf, which lets anyone send Apply, Revert and Reload (as bolt's and fwupd's do)
so that iommud refuses a non-root caller polkit did not authorise; and one that allows everything. Root's calls go through Gio (python3-gi);
the non-root caller is gdbus or busctl run as nobody (setpriv); gdbus, because busctl shows every
AccessDenied as "Access denied", whoever sent it. iommuctl, run with
DBUS_SYSTEM_BUS_ADDRESS pointing at the bus, must go through the daemon. The bus is killed and
restarted at the same address: the daemon must own the name there again. PolkitApi runs Debian's
polkitd (polkitd.py, which the Cockpit page's test shares) on an open bus, where polkit decides for
a non-root caller.

Run by ctest (label umockdev); by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_dbus_umockdev.py -v"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema"))
import schemas  # noqa: E402  (docs/schema, python3-jsonschema)
from test_iommud_umockdev import IOMMUCTL, PAIR, DaemonTestCase  # noqa: E402
from testbed import NVME_A, NVME_B, scaled, wait_until  # noqa: E402
from polkitd import POLKITD, Polkitd  # noqa: E402

import gi  # noqa: E402

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLICY_FILE = os.path.join(REPO, "dbus", "org.iommud1.conf")
INTERFACE_FILE = os.path.join(REPO, "dbus", "org.iommud1.Manager.xml")
NAME, PATH, IFACE = "org.iommud1", "/org/iommud1", "org.iommud1.Manager"
NOBODY = 65534

# Debian's /usr/share/dbus-1/system.conf, its default policy: deny sending method calls and owning
# names unless a policy file allows it.
SYSTEM_LIKE = """<policy context="default">
    <allow user="*"/>
    <deny send_type="method_call"/>
    <deny own="*"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
  <include>{policy}</include>"""

PERMISSIVE = """<policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <allow user="*"/>
  </policy>"""

PAIR_RULE = testbed.pair_identity_rule()  # a hotplug-time rule: not at start


class PrivateBus:
    """A dbus-daemon of the test's own, listening on a socket nobody can reach too."""

    def __init__(self, work: str, policy: str):
        self.dir = tempfile.mkdtemp(prefix="bus-", dir=work)
        os.chmod(self.dir, 0o755)
        self.socket = os.path.join(self.dir, "system_bus_socket")
        self.address = f"unix:path={self.socket}"
        config = os.path.join(self.dir, "bus.conf")
        with open(config, "w") as f:
            f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>{self.address}</listen>
  <auth>EXTERNAL</auth>
  {policy}
</busconfig>
""")
        self.config = config
        self._spawn()

    def _spawn(self):
        self.proc = subprocess.Popen(["dbus-daemon", "--config-file", self.config, "--nofork", "--nopidfile",
                                      "--print-address=1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()  # once it listens
        if not line:
            raise AssertionError(f"dbus-daemon did not start: {self.proc.stderr.read()}")
        os.chmod(self.socket, 0o777)
        self.conn = Gio.DBusConnection.new_for_address_sync(
            self.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)

    def _end(self, stop):
        if not self.conn.is_closed():
            self.conn.close_sync(None)
        stop()
        self.proc.wait(scaled(10))
        self.proc.stdout.close()
        self.proc.stderr.close()

    def close(self):
        self._end(self.proc.terminate)

    def crash(self):
        """SIGKILL, as a bus daemon that dies: its socket file stays where it was."""
        self._end(self.proc.kill)

    def restart(self):
        """A new dbus-daemon at the same address, with the same configuration."""
        self._spawn()

    def call(self, method: str, args: GLib.Variant | None, reply: str, timeout_ms: int = 60000):
        return self.conn.call_sync(NAME, PATH, IFACE, method, args, GLib.VariantType(reply),
                                   Gio.DBusCallFlags.NONE, int(scaled(timeout_ms)), None).unpack()

    def prop(self, name: str):
        return self.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Properties", "Get",
                                   GLib.Variant("(ss)", (IFACE, name)), GLib.VariantType("(v)"),
                                   Gio.DBusCallFlags.NONE, int(scaled(10000)), None).unpack()[0]

    def owned(self) -> bool:
        return self.conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "NameHasOwner", GLib.Variant("(s)", (NAME,)), GLib.VariantType("(b)"),
                                   Gio.DBusCallFlags.NONE, int(scaled(5000)), None).unpack()[0]

    def as_nobody(self, *command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command],
                              capture_output=True, text=True, timeout=scaled(60))

    def busctl_as_nobody(self, *args: str) -> subprocess.CompletedProcess:
        return self.as_nobody("busctl", f"--address={self.address}", *args)

    def gdbus_as_nobody(self, method: str, *args: str) -> subprocess.CompletedProcess:
        return self.as_nobody("gdbus", "call", "--address", self.address, "--dest", NAME, "--object-path", PATH,
                              "--method", f"{IFACE}.{method}", *args)


class Signals:
    """Acted signals (or another member's), as they arrive on the bus."""

    def __init__(self, bus: PrivateBus, member: str = "Acted"):
        self.seen: list[tuple] = []
        self._bus = bus
        self.member = member
        self._id = bus.conn.signal_subscribe(NAME, IFACE, member, PATH, None, Gio.DBusSignalFlags.NONE,
                                             self._on, None)

    def _on(self, _conn, _sender, _path, _iface, _member, params, _data):
        self.seen.append(params.unpack())

    def wait(self, what: str, predicate, timeout: float = 15.0):
        """The first signal that satisfies `predicate`."""
        return self.wait_since(what, lambda seen: next((s for s in seen if predicate(s)), None), 0, timeout)

    def wait_since(self, what: str, holds, start: int, timeout: float = 15.0):
        """Until `holds` of the signals from the `start`th on gives something true; returns it."""
        ctx = GLib.MainContext.default()
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while ctx.iteration(False):
                pass
            if found := holds(self.seen[start:]):
                return found
            time.sleep(0.02)
        raise AssertionError(f"no {self.member} signal with {what} within {timeout:g} s; got {self.seen[start:]}")

    def mark(self) -> int:
        ctx = GLib.MainContext.default()
        while ctx.iteration(False):
            pass
        return len(self.seen)


TRACE_DATA = os.path.join(REPO, "tests", "data", "trace", "6.12")
MIB = 1048576


def hist_text(key: str, vals: tuple[str, ...], rows: dict[str, tuple[int, ...]]) -> str:
    """A tracefs `hist` file as Linux 6.12 prints it (tests/data/trace/6.12)."""
    lines = ["# event histogram", "#", f"# trigger info: hist:keys={key}:vals={','.join(vals)}:sort=hitcount:size=2048"
             " [active]", "#", ""]
    for device, counts in rows.items():
        lines.append("{ " + f"{key}: {device:<50}" + " } " + "  ".join(f"{v}: {c:>10}" for v, c in zip(vals, counts)))
    hits = sum(counts[0] for counts in rows.values())
    return "\n".join(lines + ["", "Totals:", f"    Hits: {hits}", f"    Entries: {len(rows)}", "    Dropped: 0", ""])


class TraceInstance:
    """The tracefs instance the daemon `pid` makes (docs/measure.md), laid out in the testbed beforehand as
    the kernel's mkdir would make it: dma:dma_map_page, swiotlb:swiotlb_bounced and iommu:io_page_fault,
    whose `hist` files the test writes. umockdev 0.17.16 redirects mkdir but not rmdir; the testbed's
    preload (sync_writes.cpp) plays the kernel's rmdir of an instance, which takes its files: the
    directory goes when the daemon removes the instance."""

    EVENTS = {"dma/dma_map_page": ("device", ("hitcount", "size"), "dma.dma_map_page.format"),
              "swiotlb/swiotlb_bounced": ("dev_name", ("hitcount", "size"), "swiotlb.swiotlb_bounced.format"),
              "iommu/io_page_fault": ("device", ("hitcount",), "iommu.io_page_fault.format")}

    def __init__(self, host: testbed.Host, pid: int):
        with open(f"/proc/{pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]  # field 22, proc(5)
        self.name = f"iommud-{pid}-{start}"
        self.dir = host.path(f"/sys/kernel/tracing/instances/{self.name}")
        os.makedirs(self.dir)
        self._write("buffer_size_kb", "")
        for event, (_key, _vals, fmt) in self.EVENTS.items():
            with open(os.path.join(TRACE_DATA, fmt)) as f:
                self._write(f"events/{event}/format", f.read())
            self._write(f"events/{event}/trigger", "")

    def _write(self, rel: str, text: str) -> None:
        path = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".new", "w") as f:  # whole, as the kernel's read gives it
            f.write(text)
        os.replace(path + ".new", path)

    def counts(self, device: str, maps: int, mapped: int, bounces: int, faults: int) -> None:
        """The sums since the triggers were armed, as the kernel keeps them."""
        rows = {"dma/dma_map_page": (maps, mapped), "swiotlb/swiotlb_bounced": (bounces, bounces * 4096),
                "iommu/io_page_fault": (faults,)}
        for event, (key, vals, _fmt) in self.EVENTS.items():
            self._write(f"events/{event}/hist", hist_text(key, vals, {device: rows[event]}))


def watcher(bus: PrivateBus) -> Gio.DBusConnection:
    """A client of its own on the bus (its own unique name), watching the DMA rates."""
    conn = Gio.DBusConnection.new_for_address_sync(
        bus.address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)
    conn.call_sync(NAME, PATH, IFACE, "WatchDma", None, None, Gio.DBusCallFlags.NONE, int(scaled(10000)), None)
    return conn


class DbusApi(DaemonTestCase):
    def start_on(self, policy: str, rules: str = PAIR_RULE):
        self.bus = PrivateBus(self.work, policy)
        self.addCleanup(self.bus.close)
        self.make_host()
        d = self.start([self.policies(rules)], bus_address=self.bus.address)
        self.wait_ready(d)
        wait_until("iommud on the bus", self.bus.owned)
        return d

    def iommuctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = self.host.env(DBUS_SYSTEM_BUS_ADDRESS=self.bus.address)
        if self.daemon is not None:  # the daemon's directories, as on a host
            env.update(IOMMUD_RUNTIME_DIRECTORY=self.daemon.run_dir, IOMMUD_STATE_DIRECTORY=self.daemon.state_dir)
        r = subprocess.run([IOMMUCTL, *args], env=env, capture_output=True, text=True, timeout=scaled(120))
        if check:
            self.assertEqual(r.returncode, 0, f"iommuctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def test_properties_say_what_the_daemon_sees(self):
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        self.assertEqual(self.bus.prop("State"), "running")
        self.assertEqual(self.bus.prop("Vendor"), "intel")
        self.assertEqual(self.bus.prop("Mode"), "DMA-FQ")
        self.assertRegex(self.bus.prop("Summary"), r"^\d+ devices tuned, \d+ advised, \d+ refused, \d+ failed$")
        self.assertGreater(self.bus.prop("Rules"), 0)
        self.assertRegex(self.bus.prop("StartedAt"), r"^\d{4}-\d\d-\d\dT")

        def pair_group():
            groups = {g[0]: g for g in self.bus.prop("Groups")}
            return groups.get(PAIR)
        group = wait_until("the view of the host", pair_group)
        self.assertEqual(group[1], "DMA-FQ")
        self.assertEqual(sorted(group[2])[-2:], sorted([NVME_A.address, NVME_B.address]))
        devices = {d[0]: d for d in self.bus.prop("Devices")}
        self.assertRegex(devices[NVME_A.address][1], r"^nvme\d+$")
        self.assertEqual(devices[NVME_A.address][2], "nvme")
        self.assertEqual(devices[NVME_A.address][3], PAIR)
        self.assertTrue(devices[testbed.NIC.address][4], "the Thunderbolt NIC is untrusted")
        self.assertIn("vtd-iotlb-sync-map", [f[0] for f in self.bus.prop("Findings")])

    def test_iommuctl_apply_and_revert_go_through_the_daemon(self):
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        signals = Signals(self.bus)
        mark = d.log_mark()
        r = self.iommuctl("apply", "--hotplug", "--device", NVME_A.address)
        self.assertIn("done:", r.stdout)
        self.assertEqual(self.host.group_type(PAIR), "identity")
        # The daemon made the change (its log), not iommuctl on its own.
        d.wait_log(r"group %d.*identity" % PAIR, start=mark)
        trigger, actions = signals.wait("the apply", lambda s: s[0] == "apply")
        self.assertIn("done", [a[1] for a in actions])
        self.assertTrue(any(a[1] == "done" for a in self.bus.prop("RecentActions")))
        wait_until("the record in Changes", lambda: any(c[4] == "DMA-FQ" and c[5] == "identity"
                                                         for c in self.bus.prop("Changes")))

        status = json.loads(self.iommuctl("status", "--json").stdout)
        self.assertEqual(status["daemon"]["state"], "running")
        self.assertEqual(schemas.problems("status", status), [], "status --json with the daemon's section")
        self.assertTrue(any(a["result"] == "done" for a in status["daemon"]["recent"]))
        text = self.iommuctl("status").stdout
        self.assertRegex(text, r"iommud is running \(since ")

        r = self.iommuctl("revert")
        self.assertIn("done:", r.stdout)
        wait_until("the pair back at DMA-FQ", lambda: self.host.group_type(PAIR) == "DMA-FQ")
        signals.wait("the revert", lambda s: s[0] == "revert")

    def test_a_revert_through_the_daemon_is_not_undone_by_its_own_rebind(self):
        # A rule that acts at start too: the pair goes to identity at coldplug.
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE), testbed.pair_identity_rule("always"))
        wait_until("the pair at identity", lambda: self.host.group_type(PAIR) == "identity")
        mark = d.log_mark()
        r = self.iommuctl("revert")
        self.assertIn("done:", r.stdout)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        # Its rebind's uevents are left alone (those that came while the revert ran are dropped, the
        # later ones ignored): the rule does not put identity back. Whether any of them comes after
        # the revert is a race; a bind event sent now is not, and it is handled after them all (the
        # socket keeps their order): once it is ignored, nothing left can act.
        self.host.uevent(self.host._pci_syspath(NVME_A), "bind")  # noqa: SLF001 (the testbed's own layout)
        d.wait_log(r"ignoring bind of %s: it was reverted" % NVME_A.address, start=mark)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        # A reload applies the policies again, as at start.
        self.bus.call("Reload", None, "()")
        wait_until("the pair at identity after the reload", lambda: self.host.group_type(PAIR) == "identity")

    def test_an_overlong_device_is_refused_before_it_is_queued(self):
        self.start_on(PERMISSIVE)
        r = self.bus.gdbus_as_nobody("Plan", "false", "x" * 100)
        self.assertIn("org.freedesktop.DBus.Error.InvalidArgs: a device name is at most 64 characters", r.stderr)

    def test_a_non_root_caller_is_refused_without_polkits_yes(self):
        # The shipped bus policy lets anyone send Apply, Revert and Reload (as bolt's and fwupd's
        # do); iommud refuses a non-root caller that polkit did not authorise (no polkitd here).
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        r = self.bus.gdbus_as_nobody("Apply", "true", "")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("org.freedesktop.DBus.Error.AccessDenied", r.stderr)
        self.assertIn("org.iommud1.apply", r.stderr)
        self.assertNotIn("Rejected send message", r.stderr)  # iommud's answer, not the bus's
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        for method, args, action in (("Reload", (), "org.iommud1.reload"), ("Revert", ("",), "org.iommud1.revert")):
            r = self.bus.gdbus_as_nobody(method, *args)
            self.assertIn("org.freedesktop.DBus.Error.AccessDenied", r.stderr, f"{method} as nobody: {r.stdout}")
            self.assertIn(action, r.stderr, f"{method} as nobody: {r.stdout}")
        # What anyone may read: the properties, and what the policies would do.
        r = self.bus.busctl_as_nobody("get-property", NAME, PATH, IFACE, "Mode")
        self.assertEqual(r.stdout.strip(), 's "DMA-FQ"', r.stderr)
        r = self.bus.busctl_as_nobody("--json=short", "call", NAME, PATH, IFACE, "Plan", "bs", "true", "")
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(json.loads(r.stdout)["data"][0])
        self.assertEqual(schemas.problems("plan", plan), [], "the Plan method's JSON")
        self.assertTrue(any(c.get("group") == PAIR for c in plan["changes"]), plan["changes"])

    def test_a_non_root_caller_is_refused_by_iommud_on_an_open_bus(self):
        self.start_on(PERMISSIVE)
        r = self.bus.gdbus_as_nobody("Apply", "true", "")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("org.freedesktop.DBus.Error.AccessDenied: Apply changes the running system and needs root",
                      r.stderr)
        r = self.bus.gdbus_as_nobody("Reload")
        self.assertIn("Reload changes the running system and needs root", r.stderr)

        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")

    def test_a_restarted_bus_is_reconnected_and_the_daemon_works_while_it_is_away(self):
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        mark = d.log_mark()
        self.bus.crash()
        d.wait_log(r"the system bus closed iommud's connection", start=mark)
        # Without its bus the daemon goes on: a replugged pair gets its hotplug-time rule. Its
        # reconnections fail meanwhile (the socket is there, nobody listens).
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        d.wait_log(r"reconnection \d+ to the system bus failed \(.*\), next in \d+ ms", start=mark)
        self.assertTrue(d.alive())

        self.bus.restart()
        wait_until("iommud on the restarted bus", self.bus.owned)
        d.wait_log(r"back on the system bus after \d+ attempts?: org\.iommud1 asked for again", start=mark)
        # What it serves there is the present: the change made while the bus was away.
        self.assertEqual(self.bus.prop("State"), "running")
        wait_until("the change in Changes", lambda: any(c[4] == "DMA-FQ" and c[5] == "identity"
                                                         for c in self.bus.prop("Changes")))
        self.assertEqual(self.bus.call("Plan", GLib.Variant("(bs)", (True, NVME_A.address)), "(s)")[0][:1], "{")
        self.assertEqual(self.host.anomalies, [])

    def test_a_non_root_revert_is_refused_by_iommud_on_an_open_bus(self):
        # Something to revert: the pair goes to identity at coldplug and is recorded.
        self.start_on(PERMISSIVE, testbed.pair_identity_rule("always"))
        wait_until("the pair at identity", lambda: self.host.group_type(PAIR) == "identity")
        wait_until("the record in Changes", lambda: any(c[5] == "identity" for c in self.bus.prop("Changes")))
        for args in (("",), (NVME_A.address,)):
            r = self.bus.gdbus_as_nobody("Revert", *args)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            # iommud refused it (the bus lets everything through): the error name only, as the text
            # of the refusal is the authoriser's.
            self.assertIn("org.freedesktop.DBus.Error.AccessDenied", r.stderr)
            self.assertNotIn("Rejected send message", r.stderr)
        self.assertEqual(self.host.group_type(PAIR), "identity")
        self.assertTrue(any(c[5] == "identity" for c in self.bus.prop("Changes")), "the record is kept")

    def test_reload_reports_a_broken_policy_and_keeps_the_last_good_one(self):
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        rules = self.bus.prop("Rules")
        policy_dir = self.daemon_policy_dir()
        with open(os.path.join(policy_dir, "60-broken.toml"), "w") as f:
            f.write("[[rule]]\nname = \"x\"\n[rule.device]\nkind = \"nvme\"\nbogus = 1\n")
        with self.assertRaises(GLib.Error) as e:
            self.bus.call("Reload", None, "()")
        self.assertIn("org.iommud1.Error.InvalidPolicy", e.exception.message)
        self.assertRegex(e.exception.message, r"60-broken\.toml:\d+:\d+")
        self.assertEqual(self.bus.prop("Rules"), rules)
        os.unlink(os.path.join(policy_dir, "60-broken.toml"))
        self.bus.call("Reload", None, "()")
        self.assertEqual(self.bus.prop("State"), "running")

    def test_plan_names_a_device_that_is_not_there(self):
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        with self.assertRaises(GLib.Error) as e:
            self.bus.call("Plan", GLib.Variant("(bs)", (False, "nvme9")), "(s)")
        self.assertIn("org.iommud1.Error.NoSuchDevice", e.exception.message)

    def test_dma_watchers_get_each_devices_rates_until_the_last_one_leaves(self):
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        trace = TraceInstance(self.host, d.proc.pid)
        nvme = NVME_A.address
        name = next(dev[1] for dev in self.bus.prop("Devices") if dev[0] == nvme) or nvme
        rates = Signals(self.bus, "DmaRates")  # the test's own connection listens, and watches nothing

        def moved(maps: int, mapped: int, bounces: int, faults: int):
            """The drive's work summed over the signals seen, as this; the kernel's sums are written
            file by file, so one interval may hold part of a step and the next the rest."""
            def holds(seen) -> bool:
                total = [0.0, 0.0, 0.0, 0]
                for seconds, attributed, devices in seen:
                    for row in devices:
                        if row[0] != nvme:
                            continue
                        self.assertTrue(attributed)
                        self.assertEqual(row[1], name)
                        total = [total[0] + row[2] * seconds, total[1] + row[3] * seconds * MIB,
                                 total[2] + row[4] * seconds, total[3] + row[5]]
                return (abs(total[0] - maps) < 1e-6 * maps and abs(total[1] - mapped) < 1
                        and abs(total[2] - bounces) < 1e-6 * max(bounces, 1) and total[3] == faults)
            return holds

        trace.counts(nvme, maps=1000, mapped=1000 * 4096, bounces=0, faults=0)  # before the watch: not in any rate
        mark = d.log_mark()
        first = watcher(self.bus)
        d.wait_log(r"measuring DMA for D-Bus watchers in tracing instance .*" + trace.name, start=mark)
        since = rates.mark()
        trace.counts(nvme, maps=4000, mapped=4000 * 4096, bounces=5, faults=2)
        rates.wait_since("3000 maps, 5 bounces and 2 faults of the drive", moved(3000, 3000 * 4096, 5, 2), since)

        # A second watcher comes and goes: the first one's watch goes on.
        second = watcher(self.bus)
        second_name = second.get_unique_name()
        second.close_sync(None)
        d.wait_log(r"DMA watcher %s left" % re.escape(second_name), start=mark)
        since = rates.mark()
        trace.counts(nvme, maps=11000, mapped=4000 * 4096 + 7000 * 65536, bounces=5, faults=6)
        rates.wait_since("7000 maps of 64 KiB and 4 faults, after the second watcher left",
                         moved(7000, 7000 * 65536, 0, 4), since)

        # The last one leaves: the daemon stops and removes its instance. A new watch starts afresh
        # (in an instance laid out again, as the kernel's mkdir makes it), and UnwatchDma ends it as
        # leaving the bus does.
        first.close_sync(None)
        wait_until("the instance removed", lambda: not os.path.exists(trace.dir))
        trace = TraceInstance(self.host, d.proc.pid)
        trace.counts(nvme, maps=0, mapped=0, bounces=0, faults=0)
        mark = d.log_mark()
        third = watcher(self.bus)
        d.wait_log(r"measuring DMA for D-Bus watchers in tracing instance .*" + trace.name, start=mark)
        third.call_sync(NAME, PATH, IFACE, "UnwatchDma", None, None, Gio.DBusCallFlags.NONE, int(scaled(10000)), None)
        wait_until("the instance removed again", lambda: not os.path.exists(trace.dir))
        third.close_sync(None)
        self.assertTrue(d.alive())

    def test_a_watch_shares_the_instance_measure_keeps_and_leaves_it_in_place(self):
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        trace = TraceInstance(self.host, d.proc.pid)
        trace.counts(NVME_A.address, maps=0, mapped=0, bounces=0, faults=0)
        # [measure] on at a reload: the daemon arms the instance laid out now, for itself.
        with open(d.config_file, "a") as f:
            f.write("\n[measure]\nenabled = true\neffect-window = 5\n")
        mark = d.log_mark()
        self.reload(d)
        d.wait_log(r"measuring the effect of each change in tracing instance .*" + trace.name, start=mark)
        rates = Signals(self.bus, "DmaRates")
        since = rates.mark()
        first = watcher(self.bus)
        d.wait_log(r"measuring DMA for D-Bus watchers in tracing instance .*" + trace.name, start=mark)
        trace.counts(NVME_A.address, maps=10, mapped=10 * 4096, bounces=0, faults=0)
        rates.wait_since("the drive's 10 maps", lambda seen: any(
            abs(row[2] * seconds - 10) < 1e-6 for seconds, _, devices in seen for row in devices
            if row[0] == NVME_A.address), since)
        first.close_sync(None)
        d.wait_log(r"DMA watch ended; tracing instance .*%s stays for \[measure\]" % trace.name, start=mark)
        self.assertNotRegex(d.log_text(), r"removed tracing instance .*" + trace.name)
        self.assertTrue(os.path.isdir(trace.dir))

    def test_without_tracefs_watch_dma_says_why_in_the_words_of_top(self):
        d = self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        # Anyone may watch (the shipped bus policy lets nobody through): iommud answers, not the bus.
        r = self.bus.gdbus_as_nobody("WatchDma")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertNotIn("Rejected send message", r.stderr)
        with self.assertRaises(GLib.Error) as e:
            self.bus.call("WatchDma", None, "()")
        self.assertEqual(Gio.DBusError.get_remote_error(e.exception), "org.iommud1.Error.CannotMeasure")
        why = e.exception.message.split("org.iommud1.Error.CannotMeasure: ", 1)[1]  # GDBus.Error:NAME: message
        self.assertIn("tracefs is not mounted (mount it with: mount -t tracefs tracefs /sys/kernel/tracing)", why)
        self.assertIn(f"org.iommud1.Error.CannotMeasure: {why}", r.stderr)
        top = self.iommuctl("top", "--once", "--seconds", "0.1", check=False)
        self.assertEqual(top.returncode, 1, top.stdout)
        self.assertEqual(top.stderr.strip(), f"iommuctl: {why}")
        self.assertTrue(d.alive())

    def test_introspection_is_the_interface_file(self):
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        live = self.bus.conn.call_sync(NAME, PATH, "org.freedesktop.DBus.Introspectable", "Introspect", None,
                                       GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, int(scaled(5000)), None).unpack()[0]
        self.assertEqual(canonical(interface_of(ET.fromstring(live))),
                         canonical(interface_of(ET.parse(INTERFACE_FILE).getroot())),
                         f"dbus/org.iommud1.Manager.xml differs from what iommud serves:\n{live}")

    def test_iommuctl_works_alone_when_no_daemon_owns_the_name(self):
        self.bus = PrivateBus(self.work, SYSTEM_LIKE.format(policy=POLICY_FILE))
        self.addCleanup(self.bus.close)
        self.make_host()
        policy_dir = self.policies(PAIR_RULE)
        # iommuctl keeps its lock and records in the host's directories (Host.env()).
        script = f'"$0" apply --hotplug --policies {policy_dir} --device {NVME_A.address} && "$0" status --json'
        env = self.host.env(DBUS_SYSTEM_BUS_ADDRESS=self.bus.address)
        r = subprocess.run(["sh", "-c", script, IOMMUCTL], env=env, capture_output=True, text=True,
                           timeout=scaled(120))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("done:", r.stdout)
        self.assertEqual(self.host.group_type(PAIR), "identity")
        status = json.loads(r.stdout[r.stdout.index("{"):])
        self.assertIsNone(status["daemon"])
        self.assertEqual([c["to"] for c in status["changes"]], ["identity"])
        self.assertEqual(schemas.problems("status", status), [], "status --json with iommuctl's own record")

    def daemon_policy_dir(self) -> str:
        dirs = [os.path.join(self.work, e) for e in os.listdir(self.work) if e.startswith("policies-")]
        self.assertEqual(len(dirs), 1)
        return dirs[0]


# What a site writes to let a group of users apply without a password; here, for nobody.
NOBODY_MAY_APPLY = """polkit.addRule(function(action, subject) {
    if (action.id == "org.iommud1.apply" && subject.user == "nobody") return polkit.Result.YES;
});
"""



class PolkitApi(DaemonTestCase):
    """Apply, Revert and Reload for a caller that is not root, decided by a real polkitd. The bus
    lets anyone send them (as the shipped policy does) and lets polkitd own its name."""

    def start_with_polkit(self, rules: str = ""):
        self.bus = PrivateBus(self.work, PERMISSIVE)
        self.addCleanup(self.bus.close)
        self.polkitd = Polkitd(self.work, self.bus, rules)
        self.addCleanup(self.polkitd.close)
        self.make_host()
        d = self.start([self.policies(PAIR_RULE)], bus_address=self.bus.address)
        self.wait_ready(d)
        wait_until("iommud on the bus", self.bus.owned)
        return d

    def test_polkit_refuses_a_non_root_caller_and_the_refusal_names_the_action(self):
        self.start_with_polkit()
        # No rule, no authentication agent: auth_admin_keep cannot be met.
        for method, args, action in (("Apply", ("true", ""), "org.iommud1.apply"),
                                     ("Revert", ("",), "org.iommud1.revert"),
                                     ("Reload", (), "org.iommud1.reload")):
            r = self.bus.gdbus_as_nobody(method, *args)
            self.assertNotEqual(r.returncode, 0, f"{method} as nobody: {r.stdout}")
            self.assertIn("org.freedesktop.DBus.Error.AccessDenied: %s changes the running system and needs root "
                          "or the polkit authorization %s, which polkit gives only after authentication"
                          % (method, action),
                          r.stderr)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        self.assertEqual(self.host.writes, [])

    def test_a_polkit_rule_lets_a_non_root_caller_apply(self):
        d = self.start_with_polkit(NOBODY_MAY_APPLY)
        mark = d.log_mark()
        r = self.bus.gdbus_as_nobody("Apply", "true", NVME_A.address)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("done", r.stdout)
        self.assertEqual(self.host.group_type(PAIR), "identity")
        d.wait_log(r"group %d.*identity" % PAIR, start=mark)
        # The rule names Apply only: Revert is still refused.
        r = self.bus.gdbus_as_nobody("Revert", "")
        self.assertIn("AccessDenied: Revert changes the running system and needs root or the polkit authorization "
                      "org.iommud1.revert", r.stderr)
        self.assertEqual(self.host.group_type(PAIR), "identity")

    def stop_polkitd_and_count_questions(self) -> threading.Semaphore:
        """polkitd stopped, and a monitor on the bus that counts iommud's questions to it: they stay
        unanswered, as for an authentication agent that never answers, until polkitd goes on."""
        monitor = Gio.DBusConnection.new_for_address_sync(
            self.bus.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)
        self.addCleanup(monitor.close_sync, None)
        asked = threading.Semaphore(0)

        def watch(_conn, message, incoming):
            if not incoming or message.get_message_type() != Gio.DBusMessageType.METHOD_CALL:
                return message  # BecomeMonitor and its reply
            if message.get_member() == "CheckAuthorization":
                asked.release()
            return None  # seen, not handled: a monitor that answered anything would be cut off
        monitor.add_filter(watch)
        monitor.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring",
                          "BecomeMonitor",
                          GLib.Variant("(asu)", (["interface='org.freedesktop.PolicyKit1.Authority'"], 0)),
                          None, Gio.DBusCallFlags.NONE, int(scaled(5000)), None)
        self.polkitd.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(self.polkitd.proc.send_signal, signal.SIGCONT)
        return asked

    def apply_as_nobody_in_background(self) -> subprocess.Popen:
        return subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                 "gdbus", "call", "--address", self.bus.address, "--dest", NAME,
                                 "--object-path", PATH, "--method", f"{IFACE}.Apply", "true", ""],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def assert_refused_once_polkit_goes_on(self, applies: list[subprocess.Popen]):
        self.polkitd.proc.send_signal(signal.SIGCONT)
        for apply in applies:
            _, err = apply.communicate(timeout=scaled(60))
            self.assertIn("AccessDenied: Apply changes the running system and needs root or the polkit "
                          "authorization org.iommud1.apply", err)

    def test_the_daemon_answers_while_polkit_thinks(self):
        self.start_with_polkit()
        asked = self.stop_polkitd_and_count_questions()
        apply = self.apply_as_nobody_in_background()
        self.assertTrue(asked.acquire(timeout=scaled(30)), "iommud did not ask polkit")
        self.assertEqual(self.bus.prop("State"), "running")  # answered while polkit's answer is owed
        self.assertIsNone(apply.poll())
        self.assert_refused_once_polkit_goes_on([apply])

    def test_one_user_holds_four_of_the_places_waiting_for_polkit_not_all(self):
        self.start_with_polkit()
        asked = self.stop_polkitd_and_count_questions()
        applies = [self.apply_as_nobody_in_background() for _ in range(4)]
        for _ in applies:
            self.assertTrue(asked.acquire(timeout=scaled(30)), "iommud did not ask polkit")
        # A fifth call of the same user, on a connection of its own, is refused at once, without
        # a question to polkit (which would leave it waiting as long as polkitd is stopped).
        r = self.bus.gdbus_as_nobody("Apply", "true", "")
        self.assertIn("org.freedesktop.DBus.Error.LimitsExceeded: 4 calls of this user wait for polkit's answer "
                      "already", r.stderr)
        # Root is not held up by them.
        actions = self.bus.call("Apply", GLib.Variant("(bs)", (True, NVME_A.address)), "(a(ssss))")[0]
        self.assertIn("done", [a[1] for a in actions])
        self.assertTrue(all(apply.poll() is None for apply in applies))
        self.assert_refused_once_polkit_goes_on(applies)

    def test_root_needs_no_polkit_and_without_polkit_others_are_told_so(self):
        self.bus = PrivateBus(self.work, PERMISSIVE)  # no polkitd on it
        self.addCleanup(self.bus.close)
        self.make_host()
        self.wait_ready(self.start([self.policies(PAIR_RULE)], bus_address=self.bus.address))
        wait_until("iommud on the bus", self.bus.owned)
        r = self.bus.gdbus_as_nobody("Apply", "true", "")
        self.assertIn("AccessDenied: Apply changes the running system and needs root or the polkit authorization "
                      "org.iommud1.apply, but polkit is not available (org.freedesktop.DBus.Error.ServiceUnknown",
                      r.stderr)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        actions = self.bus.call("Apply", GLib.Variant("(bs)", (True, NVME_A.address)), "(a(ssss))")[0]
        self.assertIn("done", [a[1] for a in actions])
        self.assertEqual(self.host.group_type(PAIR), "identity")


def interface_of(root: ET.Element) -> ET.Element:
    for i in root.iter("interface"):
        if i.get("name") == IFACE:
            return i
    raise AssertionError(f"no interface {IFACE}")


def canonical(e: ET.Element):
    return (e.tag, tuple(sorted(e.attrib.items())), tuple(sorted(canonical(c) for c in e)))


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("test_dbus_umockdev.py: needs root (setpriv to nobody, the daemon's writes)")
    for tool in ("dbus-daemon", "busctl", "setpriv", "unshare", POLKITD):
        if shutil.which(tool) is None:
            sys.exit(f"test_dbus_umockdev.py: {tool} is missing (scripts/setup --tests installs it)")
    unittest.main()
