"""Debian's polkitd on a test's private bus (tests/daemon/test_dbus_umockdev.py's PolkitApi and the
Cockpit page's test, tests/cockpit/page.py): the shipped polkit/org.iommud1.policy and the test's
rules only."""

import os
import shutil
import subprocess
import tempfile

from testbed import scaled, wait_until

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLKIT_POLICY = os.path.join(REPO, "polkit", "org.iommud1.policy")
POLKITD = "/usr/lib/polkit-1/polkitd"
POLKIT_NAME = "org.freedesktop.PolicyKit1"
# Debian's bus policy for polkitd (package polkitd): a bus configured as the system bus includes
# it, as the system bus includes system.d, so that polkitd may own its name.
BUS_POLICY = "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"


class Polkitd:
    """Debian's polkitd on the test's bus (it reads DBUS_SYSTEM_BUS_ADDRESS), in a mount namespace
    of its own where /usr/share/polkit-1/actions holds only our shipped .policy file,
    /etc/polkit-1/rules.d only the test's rules and /usr/share/polkit-1/rules.d nothing: the host's
    polkit files are neither touched nor read. It runs as on a host: started as root, it drops to
    the polkitd user. `bus` is a PrivateBus (its address and connection)."""

    def __init__(self, work: str, bus, rules: str = ""):
        self.dir = tempfile.mkdtemp(prefix="polkit-", dir=work)
        actions, rules_dir = os.path.join(self.dir, "actions"), os.path.join(self.dir, "rules.d")
        no_rules = os.path.join(self.dir, "no-rules")
        for d in (self.dir, actions, rules_dir, no_rules):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
        shutil.copy(POLKIT_POLICY, actions)
        if rules:
            with open(os.path.join(rules_dir, "50-test.rules"), "w") as f:
                f.write(rules)
        script = ('mount --bind "$1" /usr/share/polkit-1/actions && mount --bind "$2" /etc/polkit-1/rules.d '
                  '&& mount --bind "$3" /usr/share/polkit-1/rules.d && exec "$4" --no-debug')
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus.address)
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "polkitd",
                                      actions, rules_dir, no_rules, POLKITD], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._bus = bus
        wait_until("polkitd on the bus", self._up)

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"polkitd ended with {self.proc.returncode}: {self.proc.stdout.read()}")
        return self._bus.conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                        "NameHasOwner", GLib.Variant("(s)", (POLKIT_NAME,)), GLib.VariantType("(b)"),
                                        Gio.DBusCallFlags.NONE, int(scaled(5000)), None).unpack()[0]

    def close(self):
        self.proc.terminate()
        self.proc.wait(scaled(10))
        self.proc.stdout.close()
