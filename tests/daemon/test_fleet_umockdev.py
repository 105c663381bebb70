"""The fleet exports (docs/metrics.md) on the testbed host of testbed.py, judged by the tools a
fleet runs: Prometheus' own parser and linter (`promtool check metrics`, Debian package
prometheus) on what `iommuctl status --format=prometheus` prints and on the textfile the real
daemon writes, and node-feature-discovery's documented feature-file syntax on the NFD file.
Without promtool the test fails, it does not skip. Run by ctest (labels fleet, umockdev) with
IOMMUD and IOMMUCTL set; by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_fleet_umockdev.py -v"""

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import unittest
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nfd_local  # noqa: E402
import testbed  # noqa: E402
from test_iommud_umockdev import IOMMUCTL, PAIR, PAIR_DEBOUNCE_MS, DaemonTestCase  # noqa: E402
from testbed import scaled, wait_until  # noqa: E402

PROMTOOL = shutil.which("promtool")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")
FLEET_HOSTS = os.environ.get("FLEET_HOSTS", "build/bin/fleet_hosts")


def promtool_check(test: unittest.TestCase, text: str, what: str) -> None:
    test.assertIsNotNone(PROMTOOL, "promtool not found: install Debian's prometheus package (scripts/setup --tests)")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=scaled(60))
    test.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""), f"promtool check metrics on {what}:\n{text}")


def nfd_labels(test: unittest.TestCase, text: str) -> dict[str, str]:
    """Reads a feature file as nfd-worker's local source does and checks its labels as nfd-master and
    Kubernetes do (nfd_local.py); returns the labels."""
    test.assertTrue(text.endswith("\n"), text)
    keys = [line.partition("=")[0] for line in text.splitlines() if line and not line.startswith("#")]
    test.assertEqual(len(keys), len(set(keys)), f"a label written twice:\n{text}")
    test.assertNotIn("# +", text, "iommud writes no NFD directive")
    labels, errors = nfd_local.check_text(text)
    test.assertEqual(errors, [], f"NFD would refuse or ignore:\n{text}")
    test.assertEqual(sorted(labels), sorted(keys), "a line NFD does not read as a label")
    return labels


class NodeExporter:
    """Debian's prometheus-node-exporter with only the textfile collector, on a loopback port,
    reading `directory`. Ready once it answers /metrics (polled, no sleep)."""

    def __init__(self, test: unittest.TestCase, directory: str):
        test.assertIsNotNone(NODE_EXPORTER, "prometheus-node-exporter not found: install Debian's "
                             "prometheus-node-exporter package (scripts/setup --tests)")
        self.log = tempfile.TemporaryFile(mode="w+")
        for _ in range(5):  # another process may take the free port before the exporter binds it
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
                address = f"127.0.0.1:{s.getsockname()[1]}"
            self.proc = subprocess.Popen(
                [NODE_EXPORTER, f"--web.listen-address={address}", "--collector.disable-defaults",
                 "--collector.textfile", f"--collector.textfile.directory={directory}"],
                stdout=self.log, stderr=subprocess.STDOUT)
            if wait_until("node_exporter to answer or exit", self._answers_or_exited, 30) == "up":
                test.addCleanup(self.stop)
                return
        test.fail(f"node_exporter did not start:\n{self.log_text()}")

    def _answers_or_exited(self):
        if self.proc.poll() is not None:
            return "exited"
        try:
            with urllib.request.urlopen(self.url, timeout=scaled(5)):
                return "up"
        except OSError:
            return None

    def scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=scaled(30)) as r:
            return r.read().decode()

    def log_text(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def gathering_errors(self) -> tuple[str, str]:
        """Scrapes twice; returns the second scrape and what went wrong gathering the first:
        node_exporter serves what it could and counts the rest in
        promhttp_metric_handler_errors_total{cause="gathering"}, logging each error."""
        self.scrape()
        text = self.scrape()
        s = samples(text)
        return text, (s.get('promhttp_metric_handler_errors_total{cause="gathering"}', "missing") + " gathering "
                      "error(s), textfile scrape error " + s.get("node_textfile_scrape_error", "missing"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=scaled(30))
        self.log.close()


def node_exporter_reads(test: unittest.TestCase, directory: str, what: str) -> dict[str, str]:
    """node_exporter reads the textfiles of `directory` with no error; returns its samples."""
    exporter = NodeExporter(test, directory)
    text, errors = exporter.gathering_errors()
    test.assertEqual(errors, "0 gathering error(s), textfile scrape error 0",
                     f"node_exporter on {what}:\n{exporter.log_text()[-4000:]}")
    test.assertNotIn("level=error", exporter.log_text())
    return samples(text)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def samples(text: str) -> dict[str, str]:
    """Sample lines of the text format: 'name{labels}' -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = value
    return out


def fleet_hosts() -> str:
    """Writes fleet_hosts' roots into a temporary directory; returns it."""
    out = tempfile.mkdtemp(prefix="iommud-fleet-hosts-")
    r = subprocess.run([FLEET_HOSTS, out, "two-nvme-pairs", "synthetic-4096"], capture_output=True, text=True,
                       timeout=scaled(600))
    if r.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise AssertionError(f"{FLEET_HOSTS} failed: {r.stderr}")
    return out


def textfile_of(test: unittest.TestCase, root: str) -> str:
    """`iommuctl --root ROOT status --format=prometheus` written as a textfile directory; returns it."""
    r = subprocess.run([IOMMUCTL, "--root", root, "status", "--format=prometheus"], capture_output=True, text=True,
                       timeout=scaled(300))
    test.assertEqual(r.returncode, 0, r.stderr)
    directory = tempfile.mkdtemp(prefix="iommud-textfile-")
    test.addCleanup(shutil.rmtree, directory, ignore_errors=True)
    with open(os.path.join(directory, "iommud.prom"), "w") as f:
        f.write(r.stdout)
    return directory


def groups_by_type(host: testbed.Host) -> dict[str, tuple[int, int]]:
    """The testbed's groups as its sysfs holds them, read here: type -> (groups, devices)."""
    out: dict[str, tuple[int, int]] = {}
    base = host.path("/sys/kernel/iommu_groups")
    for g in os.listdir(base):
        with open(os.path.join(base, g, "type")) as f:
            kind = f.read().strip()
        n = len(os.listdir(os.path.join(base, g, "devices")))
        groups, devices = out.get(kind, (0, 0))
        out[kind] = (groups + 1, devices + n)
    return out


def iommud_series(s: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in s.items() if k.startswith("iommud_")}


class NodeExporterReadsTheTextfile(unittest.TestCase):
    """Debian's node_exporter (textfile collector) reads iommud's metrics: the real consumer, which
    refuses a series written twice where promtool check metrics does not."""

    @classmethod
    def setUpClass(cls):
        cls.hosts = fleet_hosts()  # once: the 4096-device host takes seconds to write

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.hosts, ignore_errors=True)

    def test_node_exporter_counts_a_series_written_twice_as_an_error(self):
        # The oracle first: a planted duplicate series must be reported, or the tests below prove nothing.
        directory = tempfile.mkdtemp(prefix="iommud-textfile-")
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        with open(os.path.join(directory, "planted.prom"), "w") as f:
            f.write('# HELP x_finding planted\n# TYPE x_finding gauge\n'
                    'x_finding{id="a",severity="info"} 1\nx_finding{id="a",severity="info"} 1\n')
        exporter = NodeExporter(self, directory)
        _, errors = exporter.gathering_errors()
        self.assertNotEqual(errors, "0 gathering error(s), textfile scrape error 0", exporter.log_text())
        self.assertIn("was collected before with the same name and label values", exporter.log_text())

    def test_a_host_with_repeated_findings_has_one_series_per_id_and_severity(self):
        directory = textfile_of(self, os.path.join(self.hosts, "two-nvme-pairs"))
        promtool_check(self, read(os.path.join(directory, "iommud.prom")), "two NVMe pairs")
        s = iommud_series(node_exporter_reads(self, directory, "two NVMe pairs"))
        self.assertEqual(s['iommud_findings{id="vtd-iotlb-sync-map",severity="warning"}'], "2")
        self.assertEqual(s['iommud_groups{type="DMA-FQ"}'], "3")
        self.assertEqual(s['iommud_grouped_devices{type="DMA-FQ"}'], "11")
        self.assertEqual(s['iommud_iommu_info{mode="DMA-FQ",vendor="intel"}'], "1")

    def test_the_4096_device_host_exports_a_bounded_set_of_series(self):
        directory = textfile_of(self, os.path.join(self.hosts, "synthetic-4096"))
        promtool_check(self, read(os.path.join(directory, "iommud.prom")), "the 4096-device host")
        s = iommud_series(node_exporter_reads(self, directory, "the 4096-device host"))
        groups = {k: int(v) for k, v in s.items() if k.startswith("iommud_groups{")}
        devices = {k: int(v) for k, v in s.items() if k.startswith("iommud_grouped_devices{")}
        self.assertEqual(sum(groups.values()), 1024, groups)
        self.assertEqual(sum(devices.values()), 4096, devices)
        findings = {k: int(v) for k, v in s.items() if k.startswith("iommud_findings{")}
        self.assertGreater(max(findings.values(), default=0), 1, f"no repeated finding on this host: {findings}")
        # docs/metrics.md, "How many series": 43, and two per IOMMU unit, at most.
        units = [k for k in s if k.startswith("iommud_iommu_unit_")]
        self.assertLessEqual(len(s), 43 + len(units), sorted(s))


class NfdLocalSource(unittest.TestCase):
    """nfd_local.py, the NFD checker, refuses what NFD and Kubernetes refuse (planted labels)."""

    def test_the_checker_refuses_planted_bad_labels_and_reads_directives_as_nfd_does(self):
        good = "feature.node.kubernetes.io/iommud-iommu-mode=DMA-FQ\n"
        self.assertEqual(nfd_local.check_text(good), ({"feature.node.kubernetes.io/iommud-iommu-mode": "DMA-FQ"}, []))
        for bad in ("iommud-iommu-mode=DMA\n",  # no namespace
                    "example.com/iommud-x=1\n",  # a namespace nfd-master drops
                    "Feature.node.kubernetes.io/x=1\n",  # the prefix is no DNS-1123 subdomain
                    "feature.node.kubernetes.io/-iommud-x=1\n",  # a name starting with '-'
                    "-feature.node.kubernetes.io/iommud-x\n",
                    "feature.node.kubernetes.io/" + "n" * 64 + "=1\n",  # a name of 64 characters
                    "feature.node.kubernetes.io/x=DMA FQ\n",  # a value with a space
                    "feature.node.kubernetes.io/x=" + "v" * 64 + "\n",
                    "feature.node.kubernetes.io/x=_v\n",
                    "# +expiry-time=tomorrow\n" + good,  # a directive NFD cannot parse
                    "# +ttl=5\n" + good):  # an unknown directive
            labels, errors = nfd_local.check_text(bad)
            self.assertNotEqual(errors, [], f"accepted: {bad!r} -> {labels}")
        # The value defaults to "true"; the last line for a key wins; an expired expiry-time drops
        # what follows until the next one; no-label drops only the next line; whitespace is trimmed.
        labels, errors = nfd_local.check_text(
            "  feature.node.kubernetes.io/a  \n"
            "feature.node.kubernetes.io/b=1\nfeature.node.kubernetes.io/b=2\n"
            "# +expiry-time=2012-07-28T11:22:33Z\nfeature.node.kubernetes.io/c=old\n"
            "# +expiry-time=2080-07-28T11:22:33+02:00\n# +no-label\nfeature.node.kubernetes.io/d=x\n"
            "feature.node.kubernetes.io/e=y\n")
        self.assertEqual(errors, [])
        self.assertEqual(labels, {"feature.node.kubernetes.io/a": "true", "feature.node.kubernetes.io/b": "2",
                                  "feature.node.kubernetes.io/e": "y"})
        self.assertEqual(nfd_local.parse(b"#" * 65537)[0], {})
        self.assertNotEqual(nfd_local.parse(b"#" * 65537)[1], [])


class FleetExport(DaemonTestCase):
    def test_iommuctl_prints_metrics_promtool_accepts_and_nfd_labels_by_the_rules(self):
        self.make_host()
        r = subprocess.run([IOMMUCTL, "status", "--format=prometheus"], env=self.host.env(), capture_output=True,
                           text=True, timeout=scaled(60))
        self.assertEqual(r.returncode, 0, r.stderr)
        promtool_check(self, r.stdout, "iommuctl status --format=prometheus")
        s = samples(r.stdout)
        self.assertEqual(s["iommud_iommu_present"], "1")
        self.assertEqual(s['iommud_iommu_info{vendor="intel",mode="DMA-FQ"}'], "1")
        # Counts by type, as the testbed's sysfs holds them (the pair's group of two drives and three
        # bridges among the DMA-FQ ones); no group numbers.
        for kind, (groups, devices) in groups_by_type(self.host).items():
            self.assertEqual(s[f'iommud_groups{{type="{kind}"}}'], str(groups), kind)
            self.assertEqual(s[f'iommud_grouped_devices{{type="{kind}"}}'], str(devices), kind)
        self.assertEqual(s['iommud_findings{id="vtd-iotlb-sync-map",severity="warning"}'], "1")  # the pair
        self.assertNotIn("group=", r.stdout)
        self.assertEqual(s['iommud_changes_total{result="done"}'], "0")  # the daemon's counters: 0 here
        r = subprocess.run([IOMMUCTL, "status", "--format=nfd"], env=self.host.env(), capture_output=True, text=True,
                           timeout=scaled(60))
        self.assertEqual(r.returncode, 0, r.stderr)
        labels = nfd_labels(self, r.stdout)
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-iommu-vendor"], "intel")
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-iommu-mode"], "DMA-FQ")
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-nvme-identity"], "false")
        r = subprocess.run([IOMMUCTL, "status", "--json", "--format=text"], env=self.host.env(), capture_output=True,
                           text=True, timeout=scaled(60))
        self.assertNotEqual(r.returncode, 0, "--json and --format together were accepted")

    def test_the_daemon_writes_both_files_at_start_and_again_when_the_host_changes(self):
        self.make_host()
        prom_dir = os.path.join(self.work, "textfile")
        nfd_dir = os.path.join(self.work, "features.d")
        os.mkdir(prom_dir)
        os.mkdir(nfd_dir)
        prom = os.path.join(prom_dir, "iommud.prom")
        nfd = os.path.join(nfd_dir, "iommud")
        conf = (f'[prometheus]\nenabled = true\ndirectory = "{prom_dir}"\n'
                f'[nfd]\nenabled = true\nfile = "{nfd}"\n')
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS,
                       extra_conf=conf)
        self.wait_ready(d)
        for path in (prom, nfd):
            self.assertTrue(os.path.exists(path), f"no {path} by READY=1:\n{d.log_text()}")
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o644, path)
        self.assertEqual(sorted(os.listdir(prom_dir)), ["iommud.prom"])
        self.assertEqual(sorted(os.listdir(nfd_dir)), ["iommud"])
        first = read(prom)
        promtool_check(self, first, "the daemon's textfile at start")
        at_start = groups_by_type(self.host)
        self.assertEqual(samples(first)['iommud_groups{type="DMA-FQ"}'], str(at_start["DMA-FQ"][0]))
        exported = node_exporter_reads(self, prom_dir, "the daemon's textfile at start")
        self.assertEqual(exported['iommud_groups{type="DMA-FQ"}'], str(at_start["DMA-FQ"][0]))
        self.assertEqual(nfd_labels(self, read(nfd))["feature.node.kubernetes.io/iommud-iommu-mode"], "DMA-FQ")
        written_at = os.stat(prom).st_mtime_ns

        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()

        def identity_exported():
            s = samples(read(prom))
            # The pair's group went from DMA-FQ to identity.
            return (s.get('iommud_groups{type="identity"}') == str(at_start.get("identity", (0, 0))[0] + 1)
                    and s.get('iommud_groups{type="DMA-FQ"}') == str(at_start["DMA-FQ"][0] - 1)
                    and int(s.get('iommud_changes_total{result="done"}', "0")) >= 1)

        wait_until("the textfile to show the pair's group as identity and a change done", identity_exported, 15)
        after = read(prom)
        promtool_check(self, after, "the daemon's textfile after a hotplug")
        node_exporter_reads(self, prom_dir, "the daemon's textfile after a hotplug")
        self.assertGreater(os.stat(prom).st_mtime_ns, written_at)
        self.assertEqual(sorted(os.listdir(prom_dir)), ["iommud.prom"], "a temporary file was left")
        nfd_labels(self, read(nfd))

        # A view that changed nothing writes nothing (an idle daemon does not touch the disk).
        mtime = os.stat(prom).st_mtime_ns
        mark = d.log_mark()
        self.reload(d)
        d.wait_log(r"textfile/iommud\.prom says this already", start=mark)
        d.wait_log(r"features\.d/iommud says this already", start=mark)
        self.assertEqual(os.stat(prom).st_mtime_ns, mtime, "the textfile was rewritten with the same metrics")

        # A reload that turns an export off removes its file: it would go stale.
        with open(d.config_file) as f:
            text = f.read()
        with open(d.config_file, "w") as f:
            f.write(text.replace("[nfd]\nenabled = true", "[nfd]\nenabled = false"))
        self.reload(d)
        wait_until("the NFD file to go", lambda: not os.path.exists(nfd), 10)
        self.assertTrue(os.path.exists(prom))
        self.stop(d)

    def test_an_unwritable_directory_is_logged_once_and_the_daemon_keeps_running(self):
        self.make_host()
        missing = os.path.join(self.work, "no-such-dir")
        nfd_dir = os.path.join(self.work, "features.d")
        os.mkdir(nfd_dir)
        conf = (f'[prometheus]\nenabled = true\ndirectory = "{missing}"\n'
                f'[nfd]\nenabled = true\nfile = "{nfd_dir}/iommud"\n')
        d = self.start([self.policies(testbed.pair_identity_rule("hotplug"))], debounce_ms=PAIR_DEBOUNCE_MS,
                       extra_conf=conf)
        self.wait_ready(d)
        d.wait_log(r"cannot write .*no-such-dir/iommud\.prom: No such file or directory")
        self.assertTrue(os.path.exists(os.path.join(nfd_dir, "iommud")), "one failed export kept the other out")

        mark = d.log_mark()
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        # At least one more view met the same error: it is not said again.
        d.wait_log(r"features\.d/iommud says this already", start=mark, timeout=15)
        self.assertTrue(d.alive())
        self.assertEqual(len(re.findall(r"cannot write .*no-such-dir", d.log_text())), 1, d.log_text())

        # Once the directory is there, the next change writes it, and says so.
        os.mkdir(missing)
        mark = d.log_mark()
        self.reload(d)
        d.wait_log(r"no-such-dir/iommud\.prom is written again", start=mark)
        promtool_check(self, read(os.path.join(missing, "iommud.prom")), "the textfile once writable")
        self.stop(d)


if __name__ == "__main__":
    unittest.main()
