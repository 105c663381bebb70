"""The Cockpit page (cockpit/iommud) in a real browser, against the real iommud.

As the D-Bus test does (tests/daemon/test_dbus_umockdev.py), a private dbus-daemon with the
project's bus policy and iommud on the testbed host of tests/daemon/testbed.py; then Debian's
cockpit-ws with a local session (cockpit-bridge on that bus, the page found through
XDG_DATA_HOME) and headless Chromium driven over the DevTools protocol. The page's `iommuctl` is
a wrapper on the bridge's PATH that runs the built one on the test's host (the testbed's
preload, or --root of a synthetic host), as the installed one reads the machine it runs on.

Checked: the verdict and the table are what `iommuctl status --json` says of the same host, device
by device; a row opens from the keyboard and shows `iommuctl status DEVICE --json`; every control
has an accessible name; the page notices iommud stopping ("not running") and coming back; a host
without an IOMMU says so; the plan is `iommuctl plan --json`'s, and Revert and Apply from the page
change the device; a Revert's measured effect (the daemon's Measured signal, [measure]
effect-window over tracefs `hist` files the test writes) is in the device's row, a measured
journal entry's before and after in the history. Debian's polkitd runs on the bus
(tests/daemon/polkitd.py) with a rule for a group of the test's own: nobody's session (cockpit-ws
run as nobody) sees the same page and is refused both by polkitd's decision, in words; a user the
test makes in that group, neither root nor with Cockpit's administrative access, reverts and
applies from the page, the table and the plan following. Each state is saved as a screenshot in $COCKPIT_ARTIFACTS. Without
chromium or cockpit-ws the test fails and says what to install.

Run by ctest (cockpit.page); by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl IOMMUD_TESTBED_SYNC=build/lib/libtestbed_sync_writes.so \
SCHEMA_HOSTS=build/bin/schema_hosts COCKPIT_ARTIFACTS=/tmp/shots python3 tests/cockpit/page.py -v"""

import base64
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "daemon"))
import testbed  # noqa: E402
from polkitd import BUS_POLICY, Polkitd  # noqa: E402
from test_dbus_umockdev import POLICY_FILE, SYSTEM_LIKE, PrivateBus, Signals, TraceInstance  # noqa: E402
from test_iommud_umockdev import IOMMUCTL, PAIR, DaemonTestCase  # noqa: E402
from testbed import NIC, NVME_A, scaled, wait_until  # noqa: E402

try:
    import websocket  # python3-websocket
except ImportError as missing:
    raise SystemExit(f"page.py: needs python3-websocket ({missing}): scripts/setup --tests installs it") from None

COCKPIT_WS = "/usr/lib/cockpit/cockpit-ws"
SCHEMA_HOSTS = os.environ.get("SCHEMA_HOSTS", "schema_hosts")
ARTIFACTS = os.environ.get("COCKPIT_ARTIFACTS") or tempfile.mkdtemp(prefix="cockpit-artifacts-")
PAGE = "/cockpit/@localhost/iommud/index.html"
# The page's bus: as the system bus, with iommud's policy and polkitd's (which lets it own its name).
BUS_CONFIG = SYSTEM_LIKE.format(policy=POLICY_FILE) + f"\n  <include>{BUS_POLICY}</include>"
# What a site writes to let its administrators change devices without Cockpit's administrative
# access: the members of a group (the test's own, made and removed by it).
ADMINS = f"iommud-test-{os.getpid()}"
ADMINS_MAY_CHANGE = """polkit.addRule(function(action, subject) {
    if ((action.id == "org.iommud1.apply" || action.id == "org.iommud1.revert") && subject.isInGroup("%s"))
        return polkit.Result.YES;
});
""" % ADMINS
# The daemon's [measure] effect-window in the measured-effect test, in seconds (docs/measure.md).
EFFECT_WINDOW = 2
# What the page shows in each state: body's data-state (cockpit/iommud/index.html).
STATES = ("loading", "loaded", "no-iommu", "not-running", "failed")

# The table as the page shows it, one object per device row.
READ_TABLE = """[...document.querySelectorAll("#device-rows tr[data-address]")].map(r => ({
    address: r.dataset.address,
    shown: r.querySelector("th .address").textContent,
    group: r.querySelector("[data-field=group]").textContent,
    type: r.querySelector("[data-field=type]").textContent,
    exposure: r.querySelector("[data-field=exposure]").textContent,
    driver: r.querySelector("[data-field=driver]").textContent,
}))"""


def needs(path: str, package: str) -> str:
    found = shutil.which(path) if "/" not in path else (path if os.access(path, os.X_OK) else None)
    if not found:
        raise AssertionError(f"{path} is not installed: the Cockpit page test needs the Debian package {package} "
                             "(scripts/setup --tests)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """One page of Chromium over the DevTools protocol: commands in order, events kept."""

    def __init__(self, url: str):
        self.ws = websocket.create_connection(url, timeout=scaled(30), suppress_origin=True)
        self.last = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.last += 1
        ident = self.last
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") != ident:
                self.events.append(message)
                continue
            if "error" in message:
                raise AssertionError(f"DevTools {method}: {message['error']}")
            return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def exceptions(self) -> list[str]:
        """The page's uncaught exceptions so far."""
        return [e["params"]["exceptionDetails"].get("exception", {}).get("description", str(e["params"]))
                for e in self.events if e.get("method") == "Runtime.exceptionThrown"]

    def close(self):
        self.ws.close()


class Chromium:
    """Headless Chromium with a profile of its own; the DevTools port it chose read from
    DevToolsActivePort."""

    def __init__(self, work: str, log: str):
        binary = needs("chromium", "chromium")
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=work)
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--disable-gpu", "--mute-audio",
             "--window-size=1280,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        port_file = os.path.join(self.profile, "DevToolsActivePort")

        def listening():
            if self.proc.poll() is not None:
                raise AssertionError(f"chromium exited {self.proc.returncode}; its log: {log}")
            try:
                with open(port_file) as f:
                    lines = f.read().split("\n")
            except FileNotFoundError:
                return None
            return lines if len(lines) >= 2 and lines[1] else None

        port, path = wait_until("chromium's DevToolsActivePort", listening, timeout=30)[:2]
        self.browser = DevTools(f"ws://127.0.0.1:{port}{path}")
        self.port = port
        self.page = self.new_tab()[1]

    def new_tab(self) -> tuple[str, DevTools]:
        """A tab of its own (its target id, and DevTools on it), at about:blank."""
        target = self.browser.call("Target.createTarget", url="about:blank")["targetId"]
        tools = DevTools(f"ws://127.0.0.1:{self.port}/devtools/page/{target}")
        tools.call("Runtime.enable")
        tools.call("Page.enable")
        return target, tools

    def close(self):
        for tools in (getattr(self, "page", None), getattr(self, "browser", None)):
            if tools:
                tools.close()
        self.proc.terminate()
        try:
            self.proc.wait(scaled(10))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class CockpitWs:
    """cockpit-ws on a free port of 127.0.0.1, its local session's bridge on the test's bus, with
    the page in XDG_DATA_HOME and `bin` first on PATH; as `uid` (setpriv) when given, so that the
    session is that user's (with `gid`, else the group numbered as the user)."""

    def __init__(self, work: str, bus_address: str, bin_dir: str, log: str, uid: int | None = None,
                 gid: int | None = None):
        needs(COCKPIT_WS, "cockpit-ws")
        bridge = needs("cockpit-bridge", "cockpit-bridge")
        share = os.path.join(work, "share" if uid is None else f"share-{uid}")
        os.makedirs(os.path.join(share, "cockpit"))
        os.symlink(os.path.join(REPO, "cockpit", "iommud"), os.path.join(share, "cockpit", "iommud"))
        self.port = free_port()
        env = dict(os.environ, XDG_DATA_HOME=share, DBUS_SYSTEM_BUS_ADDRESS=bus_address,
                   PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
        self.log_path = log
        self.log = open(log, "w")
        as_user = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid if gid is None else gid}",
                                          "--clear-groups"]
        if uid is not None:
            env["HOME"] = work
        # The bridge starts a session dbus-daemon and an ssh-agent of its own when its environment
        # names none, and neither ends with it: the test gives it a session bus it owns (as the
        # session's user, whom a session bus alone admits) and an agent socket that stays unused.
        self.session_bus = subprocess.Popen([*as_user, "dbus-daemon", "--session", "--nofork", "--nopidfile",
                                             "--print-address=1"], env=env, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=self.log, text=True)
        address = self.session_bus.stdout.readline().strip()  # once it listens
        if not address:
            raise AssertionError(f"the session dbus-daemon did not start: {open(log).read()}")
        env.update(DBUS_SESSION_BUS_ADDRESS=address, SSH_AUTH_SOCK=os.path.join(share, "no-ssh-agent"))
        self.proc = subprocess.Popen([*as_user, COCKPIT_WS, "--no-tls", "-a", "127.0.0.1", "-p", str(self.port),
                                      f"--local-session={bridge}"],
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"cockpit-ws exited {self.proc.returncode}: {open(log).read()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False

        wait_until(f"cockpit-ws on port {self.port}", up, timeout=10)
        self.url = f"http://127.0.0.1:{self.port}{PAGE}"

    def close(self):
        for proc in (self.proc, self.session_bus):
            proc.terminate()
            proc.wait(scaled(10))
        self.session_bus.stdout.close()
        self.log.close()


class SyntheticRoot:
    """A host of tests/support's scenarios written out by schema_hosts, in place of the testbed:
    iommud reads it under umockdev's preload (under --root it would not go on the bus), iommuctl
    with --root."""

    writes: list = []
    anomalies: list = []

    def __init__(self, work: str, name: str):
        out = tempfile.mkdtemp(prefix="hosts-", dir=work)
        subprocess.run([SCHEMA_HOSTS, out], check=True, capture_output=True, timeout=scaled(60))
        self.root = os.path.join(out, name)

    def env(self, **extra: str) -> dict[str, str]:
        # As testbed.env: the preload and ASan's runtime (the ASan build's tests) both want to come
        # first in the library list.
        asan = os.environ.get("ASAN_OPTIONS", "")
        return dict(os.environ, UMOCKDEV_DIR=self.root, LD_PRELOAD=testbed.PRELOAD,
                    ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0", **extra)

    def close(self):
        pass


def message_ids() -> list[str]:
    """The MESSAGE_ID of each kind of journal entry iommud writes (src/app/change/message_ids.hpp)."""
    with open(os.path.join(REPO, "src", "app", "change", "message_ids.hpp")) as f:
        return re.findall(r'= "([0-9a-f]{32})";', f.read())


# There is no journald in the test's environment (no systemd as PID 1: journalctl says "No journal
# files were found"), and iommud under test logs to stderr. So the history is checked against a
# stand-in journalctl on the bridge's PATH that records the arguments the page gave it and replays
# entries in journalctl's --output=json form: what is proved is the page's query (every MESSAGE_ID,
# newest first) and its rendering, not journald.
JOURNALCTL_STAND_IN = """#!/bin/sh
# journalctl's stand-in (tests/cockpit/page.py, JOURNALCTL_STAND_IN): no journald in the test.
printf '%s\\n' "$@" > {args}
exec cat {entries}
"""


def readable_by_all(top: str, tree: str) -> None:
    """Opens `tree` (below `top`) to reading by any user, and the directories from `top` to it."""
    for path in (top, *(os.path.join(top, *os.path.relpath(tree, top).split(os.sep)[:i + 1])
                        for i in range(len(os.path.relpath(tree, top).split(os.sep))))):
        os.chmod(path, os.stat(path).st_mode | 0o055)
    for parent, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = os.path.join(parent, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | (0o055 if os.path.isdir(path) else 0o044))


def no_process_left_of(uid: int) -> None:
    """Checks that a session of `uid`, a user of the test's own, left nothing running once closed
    (the session bus and ssh-agent its bridge would start, CockpitWs, outlived it). What is left is
    named in the failure and ended, as userdel refuses a user with processes."""
    def alive() -> dict[int, str]:
        found = {}
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except (FileNotFoundError, ProcessLookupError):
                pass
        return found
    try:
        wait_until(f"uid {uid}'s processes gone", lambda: not alive())
    except AssertionError:
        left = alive()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the session of uid {uid} left processes running: {left}") from None


class CockpitCase(DaemonTestCase):
    """The bus, cockpit-ws and Chromium of a test class, and the page's helpers (chart.py too)."""

    @classmethod
    def setUpClass(cls):
        cls.shared = tempfile.mkdtemp(prefix="cockpit-page-")
        os.chmod(cls.shared, 0o755)
        os.makedirs(ARTIFACTS, exist_ok=True)
        cls.bin = os.path.join(cls.shared, "bin")
        os.mkdir(cls.bin)
        cls.wrapper = os.path.join(cls.bin, "iommuctl")
        try:
            cls.bus = PrivateBus(cls.shared, BUS_CONFIG)
            cls.polkitd = Polkitd(cls.shared, cls.bus, ADMINS_MAY_CHANGE)
            cls.ws = CockpitWs(cls.shared, cls.bus.address, cls.bin, os.path.join(ARTIFACTS, "cockpit-ws.log"))
            cls.chromium = Chromium(cls.shared, os.path.join(ARTIFACTS, "chromium.log"))
        except BaseException:
            cls.tearDownClass()
            raise
        cls.tools = cls.chromium.page

    @classmethod
    def tearDownClass(cls):
        for part in ("chromium", "ws", "polkitd", "bus"):
            if hasattr(cls, part):
                getattr(cls, part).close()
        shutil.rmtree(cls.shared, True)

    def tearDown(self):
        super().tearDown()
        self.assertEqual(self.tools.exceptions(), [], "uncaught exceptions on the page")

    # --- the host the page's iommuctl reads ---------------------------------------------------

    def serve(self, env: dict[str, str], *args: str) -> None:
        """Makes the bridge's `iommuctl` the built one with `env` (the test's host) and `args`."""
        changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
        with open(self.wrapper + ".new", "w") as f:
            f.write("#!/bin/sh\n# iommuctl on the test's host (tests/cockpit/page.py)\n"
                    f"exec env {' '.join(shlex.quote(f'{k}={v}') for k, v in sorted(changed.items()))} "
                    f"{shlex.quote(os.path.abspath(IOMMUCTL))} \"$@\" {' '.join(map(shlex.quote, args))}\n")
        os.chmod(self.wrapper + ".new", 0o755)
        os.rename(self.wrapper + ".new", self.wrapper)

    def iommuctl(self, *args: str) -> dict:
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.bus.address)
        r = subprocess.run([self.wrapper, *args, "--json"], env=env, capture_output=True, text=True,
                           timeout=scaled(60))
        self.assertEqual(r.returncode, 0, f"iommuctl {' '.join(args)} --json: {r.stderr}")
        return json.loads(r.stdout)

    def start_daemon(self, rule: str = testbed.pair_identity_rule(), **kwargs):
        self.policy_dir = self.policies(rule)
        d = self.start([self.policy_dir], bus_address=self.bus.address, **kwargs)
        self.wait_ready(d)
        wait_until("iommud on the bus", self.bus.owned)
        return d

    # --- the page -----------------------------------------------------------------------------

    def state(self) -> str:
        return self.tools.evaluate("document.body.dataset.state")

    def wait_state(self, wanted: str, timeout: float = 30.0) -> None:
        """Until body's data-state is `wanted`; fails with what the page showed."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            state = self.state()
            if state == wanted:
                return
            if time.monotonic() >= deadline or (state == "failed" and wanted != "failed"):
                text = self.tools.evaluate("document.body.innerText")
                raise AssertionError(f"the page is {state!r}, not {wanted!r} (after {scaled(timeout):g} s at most); "
                                     f"it shows:\n{text}\nexceptions: {self.tools.exceptions()}")
            time.sleep(0.05)

    def wait_for(self, what: str, expression: str, timeout: float = 15.0):
        try:
            return wait_until(what, lambda: self.tools.evaluate(expression), timeout=timeout, interval=0.05)
        except AssertionError as e:
            raise AssertionError(f"{e}; the page shows:\n{self.tools.evaluate('document.body.innerText')}") from None

    def in_a_tab_of_its_own(self) -> str:
        """The rest of the test drives a new tab, closed after it; returns the tab's target id."""
        target, tools = self.chromium.new_tab()

        def back():
            try:
                self.chromium.browser.call("Target.closeTarget", targetId=target)
            except AssertionError:
                pass  # the test closed it
            tools.close()
            self.tools = self.chromium.page
        self.addCleanup(back)
        self.tools = tools
        return target

    def open_page(self) -> None:
        self.tools.call("Page.navigate", url=self.ws.url)
        self.wait_for("the page's script", "document.readyState === 'complete' && !!document.body.dataset.state")

    def screenshot(self, name: str, down_to: str | None = None, scale: float = 1.0) -> None:
        """The page as `name`.png; with `down_to`, only from its top to the end of that element."""
        clip = {}
        if down_to:
            bottom = self.tools.evaluate(f"document.querySelector({json.dumps(down_to)}).getBoundingClientRect().bottom")
            width = self.tools.evaluate("document.documentElement.scrollWidth")
            clip = {"clip": {"x": 0, "y": 0, "width": width, "height": bottom + 16, "scale": scale}}
        shot = self.tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, **clip)
        with open(os.path.join(ARTIFACTS, f"{name}.png"), "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def text(self, element_id: str) -> str:
        return self.tools.evaluate(f"document.getElementById({json.dumps(element_id)}).textContent")

    def assert_page_is(self, status: dict) -> None:
        """The verdict and the table say what `status` (iommuctl status --json) says."""
        self.assertTrue(self.text("level").startswith(f"{status['score']['level']} of 3"), self.text("level"))
        self.assertIn(status["iommu"]["mode"], self.text("mode"))
        all_memory = status["exposure"]["all_memory"]
        self.assertTrue(self.text("all-memory").startswith(f"{len(all_memory)}:" if all_memory else "none"),
                        self.text("all-memory"))
        shown = self.tools.evaluate("""[...document.querySelectorAll("#findings > li")].map(f => ({
            id: f.dataset.id, severity: f.querySelector(".severity").textContent,
            remedies: f.querySelectorAll(".remedies > li").length}))""")
        self.assertEqual(shown, [{"id": f["id"], "severity": f["severity"], "remedies": len(f["remedies"])}
                                 for f in status["findings"]])

        types = {g["id"]: g["type"] for g in status["groups"]}
        levels = {e["address"]: e["level"] for e in status["exposure"]["devices"]}
        expected = sorted(({"address": d["address"], "shown": d["address"],
                            "group": "—" if d["group"] is None else str(d["group"]),
                            "type": "—" if d["group"] is None else types[d["group"]],
                            "exposure": levels[d["address"]], "driver": d["driver"] or "—"}
                           for d in status["devices"]), key=lambda r: r["address"])
        table = self.tools.evaluate(READ_TABLE)
        self.assertEqual(sorted(table, key=lambda r: r["address"]), expected)
        groups = [int(r["group"]) for r in table if r["group"] != "—"]
        self.assertEqual(groups, sorted(groups), "the members of a group side by side")

    def assert_plan_is(self, plan: dict) -> None:
        """The plan section says what `plan` (iommuctl plan --json) says, change by change."""
        shown = self.tools.evaluate("""[...document.querySelectorAll("#plan-rows tr")].map(r => ({
            device: r.dataset.device,
            change: r.querySelector("[data-field=change]").textContent,
            mode: r.querySelector("[data-field=mode]").textContent,
            risk: r.querySelector("[data-field=risk]").textContent,
            trade_off: r.querySelector("[data-field=trade-off]").textContent}))""")
        self.assertEqual([{k: v for k, v in r.items() if k != "trade_off"} for r in shown],
                         [{"device": c["device"], "change": f"{c['object']} {c['key']}: {c['from']} → {c['to']}",
                           "mode": c["mode"], "risk": c["risk"]} for c in plan["changes"]])
        for row, change in zip(shown, plan["changes"]):
            self.assertTrue(row["trade_off"].startswith(change["trade_off"]), row)
        self.assertEqual(self.tools.evaluate('document.getElementById("no-changes").hidden'), bool(plan["changes"]))
        self.assertEqual(self.tools.evaluate(
            """[...document.querySelectorAll("#skips > li")].map(l => l.dataset.device)"""),
                         [k["device"] for k in plan["skips"]])

    def plan(self) -> dict:
        return self.iommuctl("plan", "--policies", self.policy_dir)

    def press_button(self, selector: str) -> None:
        """Focuses the button by keyboard's way (focus()) and presses Enter on it."""
        self.tools.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        found = f"document.querySelector({json.dumps(selector)})"
        self.assertEqual(self.tools.evaluate(f"document.activeElement === {found}"), True)
        self.press_enter()

    def act(self, method: str, address: str) -> str:
        """Presses the row's Apply or Revert; returns what the page says of the outcome."""
        self.tools.evaluate('document.getElementById("action-message").dataset.result = ""')
        self.press_button(f"tr[data-address='{address}'] button[data-method={method}]")
        self.wait_for(f"{method} {address}'s outcome", 'document.getElementById("action-message").dataset.result')
        return self.tools.evaluate('document.getElementById("action-message").textContent')

    def act_on_the_drive(self, method: str, domain_type: str) -> None:
        """Apply or Revert on the NVMe drive's row is done: its pair at `domain_type`, in the table too
        (the daemon's PropertiesChanged)."""
        said = self.act(method, NVME_A.address)
        self.assertIn(f"{method} {NVME_A.address}: done", said)
        self.assertEqual(self.host.group_type(PAIR), domain_type)
        self.wait_for(f"the table at {domain_type}", f"""document.querySelector(
            "tr[data-address='{NVME_A.address}'] [data-field=type]").textContent === "{domain_type}" """)

    def assert_accessible(self) -> None:
        """Every control has an accessible name (the browser's accessibility tree), and the table
        has its headers."""
        self.tools.call("Accessibility.enable")
        nodes = self.tools.call("Accessibility.getFullAXTree")["nodes"]
        controls = [n for n in nodes if not n.get("ignored") and n.get("role", {}).get("value") in
                    ("button", "link", "textbox", "checkbox", "combobox", "radio", "switch", "menuitem", "tab")]
        self.assertTrue(controls, "no controls at all")
        unnamed = [n["role"]["value"] for n in controls if not n.get("name", {}).get("value", "").strip()]
        self.assertEqual(unnamed, [], "controls without an accessible name")
        self.assertEqual(self.tools.evaluate("""[...document.querySelectorAll("#device-table thead th")]
                                                 .every(th => th.scope === "col")"""), True)
        self.assertEqual(self.tools.evaluate("""[...document.querySelectorAll("#device-rows tr[data-address]")]
                                                 .every(r => r.firstChild.tagName === "TH"
                                                             && r.firstChild.scope === "row")"""), True)

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.tools.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                            windowsVirtualKeyCode=13, nativeVirtualKeyCode=13,
                            **({"text": "\r"} if kind == "keyDown" else {}))

    def open_row_by_keyboard(self, address: str) -> dict:
        """Focuses the row's button, presses Enter; returns the shown detail's exposure."""
        button = f'document.querySelector("tr[data-address=\'{address}\'] button")'
        self.tools.evaluate(f"{button}.focus()")
        self.assertEqual(self.tools.evaluate(f"document.activeElement === {button}"), True)
        self.press_enter()
        self.wait_for(f"{address}'s details", f"""{button}.getAttribute("aria-expanded") === "true" &&
            document.getElementById({button}.getAttribute("aria-controls")).firstChild.dataset.state === "loaded" """)
        return self.tools.evaluate(f"""(() => {{
            const detail = document.getElementById({button}.getAttribute("aria-controls"));
            return {{hidden: detail.hidden, exposure: detail.querySelector(".exposure").textContent,
                     text: detail.textContent}};
        }})()""")


class CockpitPage(CockpitCase):
    def test_the_page_is_in_cockpits_menu(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ws.port}/cockpit/@localhost/manifests.json",
                                    timeout=scaled(30)) as r:
            manifests = json.load(r)
        self.assertEqual(manifests["iommud"]["tools"]["index"]["label"], "IOMMU")

    def test_the_page_is_what_iommuctl_says_and_follows_the_daemon(self):
        self.make_host()
        d = self.start_daemon()
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        self.open_page()
        self.wait_state("loaded")
        status = self.iommuctl("status")
        self.assertTrue(status["iommu"]["present"])
        self.assert_page_is(status)
        self.assertRegex(self.text("daemon-line"), r"^iommud \S+, running: \d+ devices tuned")
        self.screenshot("loaded")
        self.screenshot("readme", down_to="#devices", scale=0.55)  # docs/images/cockpit.png
        self.assert_accessible()

        detail = self.open_row_by_keyboard(NIC.address)
        report = self.iommuctl("status", NIC.address)
        self.assertFalse(detail["hidden"])
        self.assertEqual(detail["exposure"], report["exposure"]["level"])
        for reason in report["exposure"]["reasons"]:
            self.assertIn(reason["text"], detail["text"])
        self.screenshot("device-open")
        self.press_enter()  # the focus stayed on the button: Enter closes it again
        self.wait_for("the details closed", f"""document.activeElement.getAttribute("aria-expanded") === "false" &&
            document.getElementById(document.activeElement.getAttribute("aria-controls")).hidden""")

        # A device unplugged: the daemon's properties change, the page reads the host again; the
        # row the keyboard opened stays open and focused.
        self.open_row_by_keyboard(NVME_A.address)
        self.host.remove_nic()
        self.host.flush()
        # The NIC goes with its Thunderbolt bridges, in more than one piece of work: the page may
        # read the host between them, and reads it again after the last.
        status = self.iommuctl("status")
        left = json.dumps(sorted(d["address"] for d in status["devices"]), separators=(",", ":"))
        self.wait_for("the unplugged rows gone", f"""JSON.stringify([...document.querySelectorAll(
            "#device-rows tr[data-address]")].map(r => r.dataset.address).sort()) === {json.dumps(left)}""")
        self.assertEqual(self.state(), "loaded")
        self.assert_page_is(status)
        self.assertEqual(self.tools.evaluate("""[document.activeElement.closest("tr").dataset.address,
                                                  document.activeElement.getAttribute("aria-expanded")]"""),
                         [NVME_A.address, "true"])

        self.stop(d)
        d.kill()  # its log and notify socket closed
        self.wait_state("not-running")
        shown = self.tools.evaluate("document.body.innerText")
        self.assertIn("iommud is not running", shown)
        self.assertIn("systemctl start iommud", shown)
        self.assertEqual(self.tools.evaluate("""document.getElementById("devices").hidden &&
                                                 document.getElementById("verdict").hidden"""), True)
        self.screenshot("not-running")

        self.start_daemon(state_of=d)
        self.wait_state("loaded")
        self.assert_page_is(self.iommuctl("status"))
        self.screenshot("running-again")

    def test_the_plan_and_apply_and_revert_from_the_page(self):
        # A rule that acts at start: the pair is at identity once iommud is ready.
        self.make_host()
        d = self.start_daemon(testbed.pair_identity_rule("always"))
        wait_until("the pair at identity", lambda: self.host.group_type(PAIR) == "identity")
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        self.open_page()
        self.wait_state("loaded")
        self.assert_plan_is(self.plan())
        self.assertEqual(self.plan()["changes"], [], "a tuned host has nothing to change")
        self.wait_for("root's session not read-only", """document.getElementById("read-only").dataset.allowed === "true"
            && !document.getElementById("read-only").checkVisibility()""")

        # Revert on the NVMe drive's row, from the keyboard: the pair goes back, the table and the
        # plan follow (the daemon's PropertiesChanged).
        self.act_on_the_drive("Revert", "DMA-FQ")
        plan = self.plan()
        self.assertTrue(any(c["group"] == PAIR and c["to"] == "identity" for c in plan["changes"]), plan)
        self.wait_for("the plan's change", 'document.querySelectorAll("#plan-rows tr").length > 0')
        self.assert_plan_is(plan)
        self.screenshot("plan")
        self.assert_accessible()
        self.assertEqual(self.tools.evaluate("""[...document.querySelectorAll("button.action")]
            .every(b => b.getAttribute("aria-label").endsWith(b.closest("tr").dataset.address))"""), True)

        self.assertEqual(self.tools.evaluate("document.activeElement.getAttribute('aria-label')"),
                         f"Revert iommud's changes on {NVME_A.address}", "the focus stays on the button pressed")
        self.act_on_the_drive("Apply", "identity")
        self.wait_for("the plan empty", '!document.getElementById("no-changes").hidden')
        self.assert_plan_is(self.plan())
        self.screenshot("applied")

    def test_a_reverts_measured_effect_is_in_the_devices_row(self):
        # A rule that acts at start: the pair is at identity, and Revert puts it back in translation.
        self.make_host()
        d = self.start_daemon(testbed.pair_identity_rule("always"))
        wait_until("the pair at identity", lambda: self.host.group_type(PAIR) == "identity")
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        nvme = NVME_A.address
        trace = TraceInstance(self.host, d.proc.pid)
        trace.counts(nvme, maps=0, mapped=0, bounces=0, faults=0)
        # [measure] on at a reload: the daemon arms the instance laid out now.
        with open(d.config_file, "a") as f:
            f.write(f"\n[measure]\nenabled = true\neffect-window = {EFFECT_WINDOW}\n")
        mark = d.log_mark()
        self.reload(d)
        d.wait_log(r"measuring the effect of each change in tracing instance .*" + trace.name, start=mark)
        rates, measured = Signals(self.bus, "DmaRates"), Signals(self.bus, "Measured")
        self.open_page()
        self.wait_state("loaded")
        # The page's watch reads the same instance each second: after EFFECT_WINDOW of its rates the
        # daemon has counted long enough for a before window (half the window at least).
        rates.wait_since(f"{EFFECT_WINDOW} seconds counted", lambda seen: len(seen) >= EFFECT_WINDOW, 0)
        # The drive maps and bounces now, just before the Revert (well within the window), and no
        # more: its before window holds them, its after window nothing.
        trace.counts(nvme, maps=3000, mapped=3000 * 4096, bounces=30, faults=0)
        said = self.act("Revert", nvme)
        self.assertIn(f"Revert {nvme}: done", said)
        effects = measured.wait("the drive's effect", lambda s: any(e[0] == nvme for e in s[0]),
                                timeout=EFFECT_WINDOW + 15)[0]
        effect = next(e for e in effects if e[0] == nvme)
        _, _, _, _, maps_before, maps_after, bounces_before, bounces_after, translated_before, translated_after, \
            attributed = effect
        self.assertTrue(attributed, effect)
        self.assertGreater(maps_before, 0, effect)
        self.assertEqual((maps_after, bounces_after, translated_before, translated_after), (0, 0, "no", "yes"), effect)
        shown = (f"Measured: {maps_before:.1f} → {maps_after:.1f} maps/s, {bounces_before:.1f} → {bounces_after:.1f} "
                 "bounces/s, translated no → yes")
        self.wait_for("the row's measured effect", f"""document.querySelector(
            "tr[data-address='{nvme}'] [data-field=measured]")?.textContent === {json.dumps(shown)}""")
        self.screenshot("measured")

    def open_as(self, user: str) -> None:
        """The page in a session of `user` (cockpit-ws run as that user), on the testbed's host with
        the pair at identity (a rule that acts at start)."""
        self.make_host()
        d = self.start_daemon(testbed.pair_identity_rule("always"))
        wait_until("the pair at identity", lambda: self.host.group_type(PAIR) == "identity")
        env = self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir)
        self.serve(env)
        readable_by_all(self.work, env["UMOCKDEV_DIR"])  # the user's iommuctl reads the testbed's host
        account = pwd.getpwnam(user)
        ws = CockpitWs(self.shared, self.bus.address, self.bin, os.path.join(ARTIFACTS, f"cockpit-ws-{user}.log"),
                       uid=account.pw_uid, gid=account.pw_gid)
        self.addCleanup(ws.close)
        # Root's page stays open in the first tab: cockpit-ws ends a session left without a page a
        # while ("session is idle"), and its --local-session cannot start another.
        self.open_page()
        self.in_a_tab_of_its_own()
        self.tools.call("Page.navigate", url=ws.url)
        self.wait_for("the page's script", "document.readyState === 'complete' && !!document.body.dataset.state")
        self.wait_state("loaded")
        self.assertEqual(self.tools.evaluate("cockpit.user().then(u => u.name)"), user)

    def test_an_unprivileged_session_sees_all_and_is_refused_apply(self):
        # nobody's session: no administrative access, and polkitd, asked by iommud, says no (no rule
        # names nobody, and no authentication agent answers for auth_admin_keep).
        self.open_as("nobody")
        self.wait_for("the page says it is read-only", """
            document.getElementById("read-only").dataset.allowed === "false"
            && document.getElementById("read-only").checkVisibility()""")
        self.assert_page_is(self.iommuctl("status"))
        self.assert_plan_is(self.plan())

        said = self.act("Revert", NVME_A.address)
        result = self.tools.evaluate('document.getElementById("action-message").dataset.result')
        self.assertEqual(result, "denied", said)
        self.assertIn("refused", said)
        self.assertIn("needs root or the polkit authorization org.iommud1.revert, which polkit gives only after "
                      "authentication", said, "polkitd's decision, not its absence")
        self.assertEqual(self.host.group_type(PAIR), "identity", "nobody changed nothing")
        said = self.act("Apply", NVME_A.address)
        self.assertIn("needs root or the polkit authorization org.iommud1.apply, which polkit gives only after "
                      "authentication", said)
        self.screenshot("unprivileged-refused")

    def test_an_administrator_by_a_polkit_rule_reverts_and_applies_from_the_page(self):
        # A user of the test's own, in the group ADMINS_MAY_CHANGE names: not root, no Cockpit
        # administrative access (no sudo), allowed by polkitd's rule.
        user = f"iommud-admin-{os.getpid()}"
        subprocess.run(["groupadd", "--system", ADMINS], check=True, capture_output=True)
        self.addCleanup(subprocess.run, ["groupdel", ADMINS], check=True, capture_output=True)
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--gid", ADMINS,
                        "--shell", "/usr/sbin/nologin", user], check=True, capture_output=True)
        self.addCleanup(subprocess.run, ["userdel", user], check=True, capture_output=True)
        self.addCleanup(no_process_left_of, pwd.getpwnam(user).pw_uid)
        self.open_as(user)
        self.wait_for("the page says it is read-only to Cockpit", """
            document.getElementById("read-only").dataset.allowed === "false" """)

        self.act_on_the_drive("Revert", "DMA-FQ")
        self.wait_for("the plan's change", 'document.querySelectorAll("#plan-rows tr").length > 0')
        self.act_on_the_drive("Apply", "identity")
        self.wait_for("the plan empty", '!document.getElementById("no-changes").hidden')
        self.screenshot("administrator-applied")

    def test_the_history_is_iommuds_journal_newest_first(self):
        self.make_host()
        d = self.start_daemon()
        self.serve(self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir, IOMMUD_STATE_DIRECTORY=d.state_dir))
        ids = message_ids()
        self.assertGreaterEqual(len(ids), 14)
        start = 1_795_000_000_000_000  # µs since the epoch
        entries = [{"__CURSOR": f"s=test;i={i}", "__REALTIME_TIMESTAMP": str(start + (len(ids) - i) * 1_000_000),
                    "MESSAGE_ID": id_,
                    "MESSAGE": f"entry {i}", **({"IOMMUD_DEVICE": NVME_A.address} if i % 2 else {})}
                   for i, id_ in enumerate(ids)]  # newest first, as journalctl --reverse prints
        measured_id = "b282470e86824954844d0a37c8464bd2"  # a measured effect's fields (docs/measure.md)
        next(e for e in entries if e["MESSAGE_ID"] == measured_id).update(
            IOMMUD_MAPS_ATTRIBUTED="yes", IOMMUD_MAPS_PER_S_BEFORE="3083", IOMMUD_MAPS_PER_S_AFTER="3317",
            IOMMUD_BOUNCES_PER_S_BEFORE="12", IOMMUD_BOUNCES_PER_S_AFTER="0", IOMMUD_TRANSLATED_BEFORE="yes",
            IOMMUD_TRANSLATED_AFTER="no")
        args, replay = os.path.join(self.shared, "journalctl.args"), os.path.join(self.shared, "journal.json")
        with open(replay, "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in entries))
        stand_in = os.path.join(self.bin, "journalctl")
        with open(stand_in, "w") as f:
            f.write(JOURNALCTL_STAND_IN.format(args=shlex.quote(args), entries=shlex.quote(replay)))
        os.chmod(stand_in, 0o755)
        self.addCleanup(os.remove, stand_in)

        self.open_page()
        self.wait_state("loaded")
        self.wait_for("the history", f'document.querySelectorAll("#history-entries > li").length === {len(entries)}')
        with open(args) as f:
            asked = f.read().split("\n")
        self.assertIn("--reverse", asked)
        self.assertIn("--output=json", asked)
        self.assertEqual(sorted(a for a in asked if a.startswith("MESSAGE_ID=")),
                         sorted(f"MESSAGE_ID={i}" for i in ids),
                         "the page asks for every kind of entry iommud writes")
        shown = self.tools.evaluate("""[...document.querySelectorAll("#history-entries > li")].map(l => ({
            id: l.dataset.id, device: l.dataset.device ?? null, message: l.querySelector(".message").textContent,
            time: l.querySelector("time").getAttribute("datetime")}))""")
        self.assertEqual([(e["id"], e["device"], e["message"]) for e in shown],
                         [(e["MESSAGE_ID"], e.get("IOMMUD_DEVICE"), e["MESSAGE"]) for e in entries])
        self.assertEqual([e["time"] for e in shown], sorted((e["time"] for e in shown), reverse=True), "newest first")
        self.assertEqual(self.tools.evaluate("""[...document.querySelectorAll("#history-entries > li .measured")]
            .map(p => [p.closest("li").dataset.id, p.textContent])"""),
                         [[measured_id, "3083 → 3317 maps/s, 12 → 0 bounces/s, translated yes → no"]])
        self.assertEqual(self.tools.evaluate('document.getElementById("no-history").hidden'), True)

        # An entry's device takes the keyboard to its row.
        self.press_button("#history-entries > li[data-device] button.link")
        self.wait_for("the focus on the device's row", f"""document.activeElement.classList.contains("disclosure")
            && document.activeElement.closest("tr").dataset.address === "{NVME_A.address}" """)
        self.screenshot("history")
        self.assert_accessible()

    def test_a_host_without_an_iommu_says_so(self):
        self.host = SyntheticRoot(self.work, "no-iommu")
        self.start_daemon()
        self.serve(dict(os.environ), "--root", self.host.root)
        self.open_page()
        self.wait_state("no-iommu")
        status = self.iommuctl("status")
        self.assertFalse(status["iommu"]["present"])
        self.assertIn("No IOMMU", self.tools.evaluate("document.body.innerText"))
        self.assertEqual(self.tools.evaluate('document.getElementById("devices").hidden'), True)
        self.assertIn("no IOMMU", self.text("mode"))
        self.assertEqual(self.tools.evaluate('document.querySelectorAll("#findings > li").length'),
                         len(status["findings"]))
        self.assertTrue(status["findings"], "a host without an IOMMU has a finding that says how to turn it on")
        self.screenshot("no-iommu")


if __name__ == "__main__":
    unittest.main()
