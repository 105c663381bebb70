"""org.iommud1.Manager against a private dbus-daemon: the real iommud under umockdev's preload (the
testbed host of testbed.py) owns the name on a bus this test starts with its own configuration.

Two buses: one configured as Debian's system bus is (deny by default) plus our policy file
dbus/org.iommud1.conf, where the bus itself refuses a non-root Apply; and one that allows
everything, where iommud's own uid check must refuse it. Root's calls go through Gio (python3-gi);
the non-root caller is gdbus or busctl run as nobody (setpriv); gdbus, because busctl shows every
AccessDenied as "Access denied", whoever sent it. iommuctl, run with
DBUS_SYSTEM_BUS_ADDRESS pointing at the bus, must go through the daemon.

Run by ctest (label umockdev); by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_dbus_umockdev.py -v"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
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
        self.proc = subprocess.Popen(["dbus-daemon", "--config-file", config, "--nofork", "--nopidfile",
                                      "--print-address=1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"dbus-daemon did not start: {self.proc.stderr.read()}")
        os.chmod(self.socket, 0o777)
        self.conn = Gio.DBusConnection.new_for_address_sync(
            self.address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None, None)

    def close(self):
        self.conn.close_sync(None)
        self.proc.terminate()
        self.proc.wait(scaled(10))
        self.proc.stdout.close()
        self.proc.stderr.close()

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
    """Acted signals, as they arrive on the bus."""

    def __init__(self, bus: PrivateBus):
        self.seen: list[tuple[str, list]] = []
        self._bus = bus
        self._id = bus.conn.signal_subscribe(NAME, IFACE, "Acted", PATH, None, Gio.DBusSignalFlags.NONE,
                                             self._on, None)

    def _on(self, _conn, _sender, _path, _iface, _member, params, _data):
        self.seen.append(params.unpack())

    def wait(self, what: str, predicate, timeout: float = 15.0):
        ctx = GLib.MainContext.default()
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while ctx.iteration(False):
                pass
            for s in self.seen:
                if predicate(s):
                    return s
            time.sleep(0.02)
        raise AssertionError(f"no Acted signal with {what} within {timeout:g} s; got {self.seen}")


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

    def test_a_non_root_caller_is_refused_by_the_bus_policy(self):
        self.start_on(SYSTEM_LIKE.format(policy=POLICY_FILE))
        r = self.bus.gdbus_as_nobody("Apply", "true", "")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        # The bus refused it: dbus-daemon's words, not iommud's.
        self.assertIn("org.freedesktop.DBus.Error.AccessDenied", r.stderr)
        self.assertIn("Rejected send message", r.stderr)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        for method, args in (("Reload", ()), ("Revert", ("",))):
            r = self.bus.gdbus_as_nobody(method, *args)
            self.assertIn("Rejected send message", r.stderr, f"{method} as nobody: {r.stdout}")
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
    for tool in ("dbus-daemon", "busctl", "setpriv"):
        if shutil.which(tool) is None:
            sys.exit(f"test_dbus_umockdev.py: {tool} is missing (scripts/setup --tests installs it)")
    unittest.main()
