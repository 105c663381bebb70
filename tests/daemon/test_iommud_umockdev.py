"""The real iommud under umockdev's preload, on the testbed host of testbed.py: its systemd
contract (READY=1 after coldplug, STATUS=, RELOADING=1/READY=1 around SIGHUP, STOPPING=1 and exit 0
on SIGTERM, through a fake NOTIFY_SOCKET), domain changes at hotplug through the emulated driver
core, refusals, a burst of uevents, a broken reload, --once and --once --early (its log read back from the
kernel's, as root). Run by ctest (label umockdev) with
IOMMUD and IOMMUCTL set; by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_iommud_umockdev.py -v
(IOMMUD_TEST_LOG=1 prints iommud's log and the emulated kernel's record after each test)."""

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
from testbed import NIC, NVME_A, NVME_B, scaled, wait_until  # noqa: E402

IOMMUD = os.environ.get("IOMMUD", "iommud")
IOMMUCTL = os.environ.get("IOMMUCTL", "iommuctl")
PAIR = NVME_A.group

# The daemon's debug line for each uevent it receives (of a PCI function, or Thunderbolt's).
UEVENT_LINE = re.compile(r"^iommud: debug: (pci|nvme|block|net|thunderbolt) (add|remove|change|move|bind|unbind) ")
STATUS_LINE = re.compile(r"(\d+) devices tuned, (\d+) advised, (?:.*, )?(\d+) failed")


# The pair's debounce. Its length decides nothing: Host.add_pair() holds the plug's uevents until
# both drives are probed, so when the first one's wait ends the second is there, and one
# transaction takes both (one fixed sequence) however slowly the machine runs.
PAIR_DEBOUNCE_MS = 1000

# The one transaction that puts the pair's group to identity, as the kernel sees it.
PAIR_TRANSACTION = [
    ("/sys/bus/pci/drivers/nvme/unbind", NVME_A.address),
    ("/sys/bus/pci/drivers/nvme/unbind", NVME_B.address),
    (f"/sys/kernel/iommu_groups/{PAIR}/type", "identity"),
    ("/sys/bus/pci/drivers/nvme/bind", NVME_A.address),
    ("/sys/bus/pci/drivers/nvme/bind", NVME_B.address),
]


class NotifySocket:
    """A fake $NOTIFY_SOCKET: every datagram the daemon sends, in order."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, "notify")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.settimeout(0.1)
        self.messages: list[str] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, name="notify", daemon=True)
        self._thread.start()

    def _read(self):
        while not self._closed:
            try:
                data = self._sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self._cond:
                self.messages.append(data.decode(errors="replace"))
                self._cond.notify_all()

    def close(self):
        self._closed = True
        self._thread.join(scaled(5))
        self._sock.close()

    def lines(self, start: int = 0) -> list[str]:
        with self._cond:
            return [line for m in self.messages[start:] for line in m.splitlines()]

    def mark(self) -> int:
        with self._cond:
            return len(self.messages)

    def wait_for(self, *expected: str, start: int = 0, timeout: float = 10.0) -> int:
        """Waits until the lines `expected` were sent in this order (not necessarily adjacent)
        in the messages from index `start`; returns the index of the message with the last."""
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                want = list(expected)
                for i, m in enumerate(self.messages[start:], start):
                    for line in m.splitlines():
                        if want and line == want[0]:
                            want.pop(0)
                    if not want:
                        return i
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {' then '.join(expected)} on $NOTIFY_SOCKET within {timeout:g} s; "
                                         f"got {self.messages[start:]}")
                self._cond.wait(left)

    def statuses(self, start: int = 0) -> list[str]:
        return [line[7:] for line in self.lines(start) if line.startswith("STATUS=")]


class Iommud:
    """One iommud process with its own configuration, runtime and state directories."""

    def __init__(self, host: testbed.Host, work: str, policy_dirs: list[str], *, debounce_ms: int = 50,
                 args: tuple[str, ...] = (), config_file: str | None = None, bus_address: str | None = None,
                 extra_conf: str = "", advise_only: bool = False, revert_on_stop: bool = False,
                 state_of: "Iommud | None" = None, run_dir: str | None = None):
        self.host = host
        self.conf_dir = tempfile.mkdtemp(prefix="conf-", dir=work)
        # A daemon started after another one (a restart) keeps its runtime and state directories.
        self.run_dir = run_dir or (state_of.run_dir if state_of else tempfile.mkdtemp(prefix="run-", dir=work))
        self.state_dir = state_of.state_dir if state_of else tempfile.mkdtemp(prefix="state-", dir=work)
        self.notify = NotifySocket(tempfile.mkdtemp(prefix="notify-", dir=work))
        conf = (f'log-level = "debug"\ndebounce-ms = {debounce_ms}\nadvise-only = {str(advise_only).lower()}\n'
                f'revert-on-stop = {str(revert_on_stop).lower()}\n'
                f"policy-dirs = [{', '.join(repr(d).replace(chr(39), chr(34)) for d in policy_dirs)}]\n" + extra_conf)
        self.config_file = config_file or os.path.join(self.conf_dir, "iommud.conf")
        with open(self.config_file, "w") as f:
            f.write(conf)
        env = host.env(RUNTIME_DIRECTORY=self.run_dir, STATE_DIRECTORY=self.state_dir,
                       CONFIGURATION_DIRECTORY=self.conf_dir, NOTIFY_SOCKET=self.notify.path)
        env.pop("JOURNAL_STREAM", None)  # logs to stderr
        # The test's own bus, or none: never the machine's system bus.
        env["DBUS_SYSTEM_BUS_ADDRESS"] = bus_address or f"unix:path={work}/no-system-bus"
        self.log: list[str] = []
        self._log_cond = threading.Condition()
        self.proc = subprocess.Popen([IOMMUD, *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read_log, name="iommud-log", daemon=True)
        self._reader.start()

    def _read_log(self):
        for line in self.proc.stdout:
            with self._log_cond:
                self.log.append(line.rstrip("\n"))
                self._log_cond.notify_all()

    def log_text(self) -> str:
        with self._log_cond:
            return "\n".join(self.log)

    def wait_log(self, pattern: str, timeout: float = 10.0, start: int = 0) -> re.Match:
        regex = re.compile(pattern)
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        with self._log_cond:
            while True:
                for line in self.log[start:]:
                    if m := regex.search(line):
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"iommud logged nothing matching {pattern!r} within {timeout:g} s:\n"
                                         + "\n".join(self.log[start:]))
                self._log_cond.wait(left)

    def log_mark(self) -> int:
        with self._log_cond:
            return len(self.log)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 30.0) -> int:
        timeout = scaled(timeout)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"iommud did not exit within {timeout:g} s:\n{self.log_text()}")
        self._reader.join(scaled(5))
        return rc

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
            self.proc.wait(scaled(10))
        self._reader.join(scaled(5))
        self.proc.stdout.close()
        self.notify.close()


class DaemonTestCase(unittest.TestCase):
    """A testbed host and one iommud on it, with the helpers every daemon test needs (no tests)."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="iommud-umockdev-")
        os.chmod(self.work, 0o755)
        self.addCleanup(shutil.rmtree, self.work, True)
        self.daemon = None

    def tearDown(self):
        if self.daemon is not None:
            self.daemon.kill()
            out = self.daemon.log_text()
            if self._failed() or os.environ.get("IOMMUD_TEST_LOG"):
                sys.stderr.write(f"\n--- iommud's log ---\n{out}\n--- emulated kernel ---\nwrites: "
                                 f"{self.host.writes}\nanomalies: {self.host.anomalies}\n")
        if getattr(self, "host", None) is not None:
            self.host.close()

    def _failed(self) -> bool:
        result = self._outcome.result
        return any(test is self for test, _ in result.failures + result.errors)

    def make_host(self, **kwargs) -> testbed.Host:
        self.host = testbed.Host(**kwargs)
        return self.host

    def policies(self, text: str, name: str = "50-test.toml") -> str:
        d = tempfile.mkdtemp(prefix="policies-", dir=self.work)
        os.chmod(d, 0o755)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        return d

    def start(self, policy_dirs: list[str], **kwargs) -> Iommud:
        self.daemon = Iommud(self.host, self.work, policy_dirs, **kwargs)
        return self.daemon

    def wait_ready(self, d: Iommud, timeout: float = 30.0) -> str:
        """READY=1 after coldplug, with a STATUS= line; returns the status."""
        i = d.notify.wait_for("READY=1", timeout=timeout)
        status = [line[7:] for line in d.notify.messages[i].splitlines() if line.startswith("STATUS=")]
        self.assertTrue(status, f"READY=1 came without STATUS=: {d.notify.messages[i]!r}")
        self.assertRegex(status[-1], STATUS_LINE)
        return status[-1]

    def stop(self, d: Iommud) -> None:
        """SIGTERM: STOPPING=1, exit 0."""
        mark = d.notify.mark()
        d.signal(signal.SIGTERM)
        d.notify.wait_for("STOPPING=1", start=mark)
        rc = d.wait_exit()
        self.assertEqual(rc, 0, f"iommud exited {rc} on SIGTERM:\n{d.log_text()}")

    def reload(self, d: Iommud, timeout: float = 10.0) -> None:
        """SIGHUP: RELOADING=1, then READY=1."""
        mark = d.notify.mark()
        d.signal(signal.SIGHUP)
        d.notify.wait_for("RELOADING=1", "READY=1", start=mark, timeout=timeout)

    def wait_status(self, what: str, holds, d: Iommud, timeout: float = 10.0) -> None:
        """Until the latest STATUS= line's counts of tuned and failed devices satisfy `holds`."""
        def latest():
            statuses = d.notify.statuses()
            m = STATUS_LINE.search(statuses[-1]) if statuses else None
            return m is not None and holds(int(m.group(1)), int(m.group(3)))

        try:
            wait_until(f"STATUS= with {what}", latest, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; the last ones: {d.notify.statuses()[-3:]}") from None

    def wait_handled(self, d: Iommud, drives) -> None:
        """Until the daemon has handled every uevent of `drives` sent so far: a `change` sent now
        comes after them (the socket keeps the order) and re-arms their debounce, so once the
        daemon reacted to it, nothing of theirs is pending or running."""
        mark = d.log_mark()
        for drive in drives:
            self.host.uevent(self.host._pci_syspath(drive), "change")  # noqa: SLF001 (the testbed's own layout)
        for drive in drives:
            d.wait_log(r"reacted to %s " % re.escape(drive.address), start=mark)

    def wait_pair_identity(self, timeout: float = 10.0) -> None:
        """Until the pair's group reads identity and both drives are bound again."""
        def done():
            if self.host.group_type(PAIR) != "identity":
                return False
            self.host.sync()  # the unbinds written before the type are handled by now
            return all(self.host.driver_of(s.address) == "nvme" and self.host.uevent_driver(s.address) == "nvme"
                       for s in (NVME_A, NVME_B))

        wait_until(f"group {PAIR} to read identity with both drives bound to nvme", done, timeout)
        self.host.flush()

    # (a)

class IommudUnderUmockdev(DaemonTestCase):
    def test_a_start_waits_for_the_writer_lock_says_who_holds_it_and_goes_on(self):
        # Before, a held lock made the daemon exit 1 within 20 ms, to be restarted in a loop.
        self.make_host()
        run_dir = tempfile.mkdtemp(prefix="run-", dir=self.work)
        fd = os.open(os.path.join(run_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()} lock-holder\n".encode())  # as a holder names itself
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], run_dir=run_dir)
        holder = f"pid {os.getpid()} (lock-holder)"
        d.wait_log(re.escape(f"waiting for the writer lock, held by {holder}"))
        d.notify.wait_for(f"STATUS=waiting for the writer lock, held by {holder}")
        self.assertTrue(d.alive(), f"iommud exited while the lock was held:\n{d.log_text()}")
        self.assertNotIn("READY=1", d.notify.lines())
        os.close(fd)  # the holder lets go
        self.wait_ready(d)
        self.stop(d)

    def test_pair_is_set_to_identity_when_replugged_and_left_alone_at_start(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(d)
        self.host.settle()
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        self.assertEqual(self.host.writes, [], "coldplug wrote to sysfs although the rule waits for hotplug")

        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.assertEqual(self.host.anomalies, [])
        self.assertTrue(d.alive())
        self.wait_status("the pair tuned and nothing failed", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.stop(d)
        self.assertEqual(self.host.group_type(PAIR), "identity")  # revert-on-stop = false

    def test_a_worker_killed_mid_transaction_is_replaced_recovers_and_loses_no_event(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(d)
        self.host.settle()
        self.host.remove_pair()
        self.host.flush()
        mark = d.log_mark()
        with self.host.write_held("unbind", nth=2) as hold:
            self.host.add_pair()
            hold.wait(timeout=30)
            # Half done: the first drive unbound, the second's unbind waits.
            self.assertEqual(self.host.writes, PAIR_TRANSACTION[:1])
            self.assertEqual([self.host.driver_of(s.address) for s in (NVME_A, NVME_B)], [None, "nvme"])
            worker = int(re.findall(r"worker process (\d+) started", d.log_text())[-1])
            os.kill(worker, signal.SIGKILL)
            d.wait_log(r"the worker process for 2 devices was killed by signal 9", start=mark)
            hold.release(writer_killed=True)
        # The next worker rebinds the first drive (the type was not written: rolled back) ...
        d.wait_log(r"a transaction an earlier process left half-done was rolled back; rebound 1 device", start=mark)
        # ... and, no event lost, does the batch the first one died in: the pair's group changes.
        self.wait_pair_identity(timeout=30)
        started = [int(p) for p in re.findall(r"worker process (\d+) started", "\n".join(d.log[mark:]))]
        self.assertTrue(started and worker not in started, f"no new worker after {worker}: {started}")
        self.assertEqual(self.host.writes,
                         PAIR_TRANSACTION[:1] + [("/sys/bus/pci/drivers/nvme/bind", NVME_A.address)] + PAIR_TRANSACTION)
        self.assertEqual(self.host.anomalies, [])
        self.wait_status("the pair tuned and nothing failed", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.assertTrue(d.alive())
        self.stop(d)

    def test_a_replugged_pair_is_recognised_by_serial_and_tuned_again(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(d)
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        self.wait_status("the pair tuned", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        # Done with the first plug (its debounces, and those of the transaction's own rebinds)
        # before the second, so that the second is a plug of its own. (A worker still running at
        # the removal no longer brings the drive back: HotplugFilter.removedMeanwhile.)
        self.wait_handled(d, (NVME_A, NVME_B))
        # Unplugged and plugged again: the daemon knows the drives by their serials. (Their group
        # keeps the switch's ports, so it keeps its type here and nothing is written again.)
        mark = d.log_mark()
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        for drive in (NVME_A, NVME_B):
            d.wait_log(rf"serial {re.escape(drive.nvme_serial)}\) is back at {re.escape(drive.address)} ", timeout=30,
                       start=mark)
        self.wait_pair_identity(timeout=30)
        self.wait_status("the pair tuned again", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.stop(d)

    # (b)
    def test_untrusted_nic_is_refused_identity_and_its_removal_is_survived(self):
        self.make_host(with_nic=False)
        d = self.start([self.policies(testbed.NIC_IDENTITY_RULE)])
        self.wait_ready(d)
        mark = d.log_mark()
        self.host.add_nic()
        nic = rf"({re.escape(NIC.address)}|enp5s0)"
        line = d.wait_log(rf"(?i)^(?=.*{nic})(?=.*\bidentity\b)(?=.*untrusted)", start=mark).string
        self.assertRegex(line, r"(?i)refus|never")
        self.host.remove_nic()
        self.host.flush()
        self.reload(d)  # still answering
        self.assertTrue(d.alive())
        self.host.settle()
        self.assertEqual(self.host.writes, [], "nothing may be written for an untrusted device")
        self.assertIsNone(self.host.group_type(NIC.group))
        self.stop(d)

    # (c)
    def test_a_burst_of_a_thousand_uevents_leaves_it_up_answering_and_right(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug") + "\n" + testbed.NIC_IDENTITY_RULE)])
        self.wait_ready(d)
        target = 1000
        first = len(self.host.events)
        mark = d.log_mark()
        done = threading.Event()
        failure = []

        def burst():
            try:
                while len(self.host.events) - first < target:
                    self.host.remove_pair()
                    # Back to the default while the drives are out (only the switch ports stay
                    # in the group, bound to pcieport), so that every re-plug needs the change
                    # again and the last one shows in the final state.
                    self.host.set_group_type(PAIR, "DMA-FQ")
                    self.host.remove_nic()
                    self.host.add_nic()
                    self.host.add_pair()
            except BaseException as e:  # reported by the main thread
                failure.append(e)
            finally:
                done.set()

        t = threading.Thread(target=burst, name="burst")
        t.start()
        try:
            wait_until("a quarter of the burst", lambda: len(self.host.events) - first >= target // 4 or done.is_set(),
                       timeout=60)
            self.assertFalse(done.is_set(), "the burst ended before the reload could be tested")
            self.reload(d, timeout=10)
            sent_at_ready = len(self.host.events) - first
            self.assertTrue(d.alive())
        finally:
            t.join(scaled(300))
        self.assertFalse(failure, failure)
        sent = len(self.host.events) - first
        self.assertGreaterEqual(sent, target)
        self.assertLess(sent_at_ready, sent, "READY=1 came only after the burst")
        self.host.flush(60)
        self.assertTrue(d.alive(), d.log_text()[-4000:])

        # The burst ended with everything plugged in: the pair just appeared, so its rule applies.
        self.wait_pair_identity(timeout=60)
        self.assertEqual(self.host.group_type(NIC.group), "DMA")
        self.assertEqual(self.host.driver_of(NIC.address), "atlantic")
        self.wait_status("the pair tuned and nothing failed", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.reload(d)
        # No event was lost: the daemon logged each uevent sent (its debug line names every one of
        # a PCI function or of Thunderbolt, which is all the testbed sends), no listener stalled
        # for the send timeout, and the daemon never saw its socket overflow.
        self.host.settle()
        sent = len(self.host.events) - first

        def heard():
            with d._log_cond:  # noqa: SLF001 (the reader thread appends)
                return sum(1 for line in d.log[mark:] if UEVENT_LINE.match(line))
        try:
            wait_until("the daemon to have heard every uevent sent", lambda: heard() >= sent, timeout=30)
        finally:
            self.assertEqual(heard(), sent, "uevents sent and uevents the daemon heard")
        self.assertEqual([a for a in self.host.anomalies if "dropped an event" in a], [])
        self.assertNotIn("events were lost", d.log_text())
        self.stop(d)

    # (c2)
    def test_a_storm_that_overflows_the_monitor_is_followed_by_a_rescan_that_tunes_every_device(self):
        # The pair is unplugged and plugged in again while the daemon reads nothing, its plug behind
        # more uevents than the listener's queue holds: the plug's uevents are lost, and only the
        # rescan after the overflow can find that the pair just appeared.
        self.make_host(lossy_uevents=True)
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))])
        self.wait_ready(d)
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")  # the rule waits for a plug
        d.signal(signal.SIGSTOP)
        try:
            self.host.remove_pair()  # fewer uevents than the queue holds: all of them are read
            self.host.set_group_type(PAIR, "DMA-FQ")
            for _ in range(20):  # more than net.unix.max_dgram_qlen (10)
                self.host.uevent(self.host._pci_syspath(testbed.SOLO_NVME), "change")  # noqa: SLF001
            self.host.add_pair()
            self.host.flush()
        finally:
            d.signal(signal.SIGCONT)
        lost = [(action, path.rsplit("/", 1)[-1]) for action, path in self.host.dropped_uevents]
        self.assertIn(("add", NVME_A.address), lost, "the storm did not lose the pair's plug")
        d.wait_log(r"udev monitor: its receive buffer overflowed and hotplug events were lost; rescanning the "
                   r"\d+ PCI functions present")
        self.wait_pair_identity(timeout=30)
        self.wait_status("the pair tuned and nothing failed", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.assertEqual(self.host.anomalies, [])
        self.stop(d)

    # (settings, iommud.conf(5))
    def test_advise_only_changes_nothing_at_hotplug_and_says_what_it_would_have_done(self):
        self.make_host(with_pair=False)
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], advise_only=True)
        self.wait_ready(d)
        mark = d.log_mark()
        self.host.add_pair()  # a plug the rule would act on
        d.wait_log(r"advised: group %d .*identity" % PAIR, start=mark)
        self.wait_handled(d, (NVME_A, NVME_B))
        self.host.settle()
        self.assertEqual(self.host.writes, [], "advise-only wrote to the emulated kernel")
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        for drive in (NVME_A, NVME_B):
            self.assertEqual(self.host.driver_of(drive.address), "nvme")
        self.assertNotRegex("\n".join(d.log[mark:]), r"(?m)^(?!.*advised: ).*group %d .*-> identity, done" % PAIR)
        wait_until("STATUS= with the pair advised and nothing tuned",
                   lambda: re.match(r"0 devices tuned, 2 advised, ", (d.notify.statuses() or [""])[-1]))
        self.assertEqual(self.host.anomalies, [])
        self.stop(d)
        self.assertEqual(self.host.writes, [], "advise-only wrote at stop")

    def test_revert_on_stop_puts_back_what_it_changed_when_stopped(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("always"))], revert_on_stop=True)
        self.wait_ready(d)
        self.wait_pair_identity()
        def changes():
            r = subprocess.run([IOMMUCTL, "status", "--json"], capture_output=True, text=True, timeout=scaled(60),
                               env=self.host.env(IOMMUD_RUNTIME_DIRECTORY=d.run_dir,
                                                 IOMMUD_STATE_DIRECTORY=d.state_dir))
            self.assertEqual(r.returncode, 0, r.stderr)
            return [(c["object"], c["to"]) for c in json.loads(r.stdout)["changes"]]

        self.assertIn((f"group {PAIR}", "identity"), changes())
        writes = len(self.host.writes)
        mark = d.log_mark()
        self.stop(d)
        self.host.settle()
        self.assertEqual(self.host.group_type(PAIR), "DMA-FQ")
        for drive in (NVME_A, NVME_B):
            self.assertEqual(self.host.driver_of(drive.address), "nvme")
        # The revert is the same transaction backwards: unbind both, the old type, bind both.
        self.assertEqual([v for _, v in self.host.writes[writes:]],
                         [NVME_A.address, NVME_B.address, "DMA-FQ", NVME_A.address, NVME_B.address])
        d.wait_log(r"reverted: group %d .*identity -> DMA-FQ.*; the change was made by rule nvme-pair-identity" % PAIR,
                   start=mark)
        # What iommud changed is no longer on record: nothing is left for iommuctl revert.
        self.assertEqual(changes(), [])
        self.assertEqual(self.host.anomalies, [])

    def test_advise_only_reverts_nothing_at_stop_even_with_revert_on_stop_and_says_so(self):
        self.make_host()
        policies = self.policies(testbed.pair_identity_rule("always"))
        first = self.start([policies])
        self.wait_ready(first)
        self.wait_pair_identity()
        self.stop(first)
        first.kill()
        # The same directories (the first one's records), now advising only.
        d = self.start([policies], advise_only=True, revert_on_stop=True, state_of=first)
        self.wait_ready(d)
        writes = len(self.host.writes)
        mark = d.log_mark()
        self.stop(d)
        d.wait_log(r"not reverting at stop: advise-only = true changes nothing", start=mark)
        self.host.settle()
        self.assertEqual(self.host.writes[writes:], [], "advise-only reverted at stop")
        self.assertEqual(self.host.group_type(PAIR), "identity")

    # (d)
    def test_a_broken_policy_on_reload_is_reported_and_the_last_good_one_stays(self):
        self.make_host()
        policies = self.policies(testbed.pair_identity_rule("hotplug"))
        d = self.start([policies], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(d)
        broken = testbed.pair_identity_rule("hotplug").replace('domain = "identity"', "domain = ")
        with open(os.path.join(policies, "50-test.toml"), "w") as f:
            f.write(broken)
        check = subprocess.run([IOMMUCTL, "check", policies], capture_output=True, text=True, timeout=scaled(60))
        self.assertNotEqual(check.returncode, 0)
        located = re.search(r"\S*50-test\.toml:\d+:\d+: error: .*", check.stdout)
        self.assertIsNotNone(located, f"iommuctl check located nothing: {check.stdout}")
        mark = d.log_mark()
        self.reload(d)
        d.wait_log(re.escape(located.group(0)), start=mark)
        self.assertTrue(d.alive())

        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.stop(d)

    # Beyond the contract's cases: what STATUS= says must not depend on the road to a state,
    # and a change the kernel refuses must not be retried until the device appears again.
    def test_a_failed_change_then_a_good_plug_leaves_nothing_failed(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(d)
        self.host.remove_pair()
        # Plugged and probed; from now on the first drive's probe fails, so the daemon's rebind of
        # it does. Armed before the daemon hears of the plug, so before its debounce can end.
        with self.host.uevents_held():
            self.host.add_pair()
            self.host.fail_probes(NVME_A.address)
        self.wait_status("a failure", lambda tuned, failed: failed > 0, d, timeout=30)

        self.host.fail_probes(NVME_A.address, False)
        self.host.remove_pair()
        self.host.add_pair()
        self.wait_pair_identity(timeout=30)
        self.wait_status("the pair tuned and nothing failed", lambda tuned, failed: tuned >= 2 and failed == 0, d)
        self.stop(d)

    def test_status_counts_a_tuned_host_alike_after_start_and_reload(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("always"))])
        at_start = self.wait_ready(d)  # after the coldplug change
        self.wait_pair_identity()
        mark = d.notify.mark()
        self.reload(d)  # nothing to change now: READY=1 with a STATUS=, then the coldplug's
        wait_until("the STATUS= after the reload's coldplug", lambda: len(d.notify.statuses(mark)) >= 2)
        self.assertEqual(len(self.host.writes), len(PAIR_TRANSACTION))  # one change, at start
        self.assertEqual(d.notify.statuses(mark)[-1], at_start)
        self.stop(d)

    def test_a_change_the_kernel_refuses_is_not_retried_without_a_new_plug(self):
        self.make_host()
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=200)
        self.wait_ready(d)
        self.host.refuse_types(PAIR)  # a device that requires its type: EINVAL
        self.host.remove_pair()
        self.host.add_pair()
        self.wait_status("the refused change reported as failed", lambda tuned, failed: failed > 0, d, timeout=30)
        attempts = lambda: sum(1 for w in self.host.writes if w == PAIR_TRANSACTION[2])  # noqa: E731
        first = attempts()
        self.assertEqual(first, 1)
        # The rollback rebinds the drives; their `bind` uevents are not a new appearance. Whether
        # they come before or after the failure is reported is a race; bind events sent now are
        # not: the socket keeps the order, so once the daemon has ignored these, it has handled
        # the rollback's too (a debounce they armed was dropped with the failure).
        mark = d.log_mark()
        for drive in (NVME_A, NVME_B):
            self.host.uevent(self.host._pci_syspath(drive), "bind")  # noqa: SLF001 (the testbed's own layout)
        for drive in (NVME_A, NVME_B):
            d.wait_log(r"ignoring bind of %s: its last change failed" % re.escape(drive.address), start=mark)
        self.assertEqual(attempts(), first, "the daemon tried the refused change again by itself")
        self.stop(d)

    # (e)
    def test_once_applies_at_coldplug_and_exits_0(self):
        self.make_host()
        elsewhere = tempfile.mkdtemp(prefix="elsewhere-", dir=self.work)
        d = self.start([self.policies(testbed.pair_identity_rule("always"))], args=("--once", "--config",
                                                                  os.path.join(elsewhere, "iommud.conf")),
                       config_file=os.path.join(elsewhere, "iommud.conf"))
        rc = d.wait_exit(60)
        self.assertEqual(rc, 0, d.log_text())
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.assertEqual(self.host.anomalies, [])


    # (f) The boot pass: only the boot rules, the others without a word; a broken policy exits 78.
    # Without a journal it writes to the kernel's log (umockdev does not redirect /dev/kmsg): read
    # back from there, records written since the test began.
    def test_early_applies_only_boot_rules_and_exits_0(self):
        self.make_host()
        klog = KernelLog()
        d = self.start([self.policies(testbed.pair_identity_rule("boot") + "\n" + testbed.NIC_IDENTITY_RULE)],
                       args=("--once", "--early"))
        rc = d.wait_exit(60)
        records = klog.iommud()
        self.assertEqual(rc, 0, f"{d.log_text()}\n{records}")
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        # The identity change is a warning (4) of facility user (1): 1 * 8 + 4.
        self.assertTrue(any(p == 12 and m.startswith("group ") and "nvme-pair-identity" in m for p, m in records),
                        records)
        self.assertFalse(any("nic-identity" in m for _, m in records), records)

    def test_early_with_a_broken_policy_exits_78_and_names_the_place(self):
        self.make_host()
        klog = KernelLog()
        d = self.start([self.policies(testbed.pair_identity_rule("boot").replace("domain =", "domian ="))],
                       args=("--once", "--early"))
        rc = d.wait_exit(60)
        records = klog.iommud()
        self.assertEqual(rc, 78, f"{d.log_text()}\n{records}")
        self.assertTrue(any(p == 11 and re.search(r"\.toml:4:1: error: unknown key 'domian'", m) for p, m in records),
                        records)
        self.assertTrue(any("not applying the boot rules" in m for _, m in records), records)
        self.assertEqual(self.host.writes, [])


class KernelLog:
    """The kernel's log from now on (/dev/kmsg, as root): records as (syslog prio+facility, text)."""

    def __init__(self):
        self.fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def iommud(self) -> list[tuple[int, str]]:
        out = []
        while True:
            try:
                record = os.read(self.fd, 8192).decode(errors="replace")
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten meanwhile: go on with the next
                continue
            head, _, text = record.partition(";")
            text = text.split("\n", 1)[0]
            if text.startswith("iommud: "):
                out.append((int(head.split(",")[0]), text[len("iommud: "):]))
        os.close(self.fd)
        return out

if __name__ == "__main__":
    unittest.main()
