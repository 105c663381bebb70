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
import stat
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
from test_iommud_umockdev import IOMMUCTL, PAIR, PAIR_DEBOUNCE_MS, DaemonTestCase  # noqa: E402
from testbed import wait_until  # noqa: E402

PROMTOOL = shutil.which("promtool")

# Kubernetes label rules, which NFD's labels must meet: a name and a value of at most 63
# characters, alphanumeric at both ends, '-', '_', '.' between (a value may be empty); the
# prefix before '/' a DNS subdomain. NFD's local source reads "<key>[=<value>]" lines and "#"
# comments ("# +" starts a directive), ignores files over 64 KiB and dot files.
LABEL_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def promtool_check(test: unittest.TestCase, text: str, what: str) -> None:
    test.assertIsNotNone(PROMTOOL, "promtool not found: install Debian's prometheus package (scripts/setup --tests)")
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    test.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""), f"promtool check metrics on {what}:\n{text}")


def nfd_labels(test: unittest.TestCase, text: str) -> dict[str, str]:
    """Checks a feature file against NFD's documented syntax; returns its labels."""
    test.assertLessEqual(len(text.encode()), 65536)
    test.assertTrue(text.endswith("\n"), text)
    labels = {}
    for line in text.splitlines():
        if line.startswith("#"):
            test.assertFalse(line.startswith("# +"), f"an NFD directive: {line!r}")
            continue
        key, sep, value = line.partition("=")
        test.assertTrue(sep, f"no value: {line!r}")
        prefix, slash, name = key.partition("/")
        test.assertTrue(slash, f"no namespace (NFD would prefix it, and will stop doing so): {line!r}")
        test.assertRegex(prefix, DNS_SUBDOMAIN)
        test.assertLessEqual(len(prefix), 253)
        test.assertTrue(prefix == "feature.node.kubernetes.io" or prefix.endswith(".feature.node.kubernetes.io"),
                        f"a namespace nfd-master would drop without -extra-label-ns: {line!r}")
        test.assertRegex(name, LABEL_PART)
        if value:
            test.assertRegex(value, LABEL_PART)
        test.assertNotIn(key, labels)
        labels[key] = value
    return labels


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


class FleetExport(DaemonTestCase):
    def test_iommuctl_prints_metrics_promtool_accepts_and_nfd_labels_by_the_rules(self):
        self.make_host()
        r = subprocess.run([IOMMUCTL, "status", "--format=prometheus"], env=self.host.env(), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        promtool_check(self, r.stdout, "iommuctl status --format=prometheus")
        s = samples(r.stdout)
        self.assertEqual(s["iommud_iommu_present"], "1")
        self.assertEqual(s['iommud_iommu_info{vendor="intel",mode="DMA-FQ"}'], "1")
        self.assertEqual(s[f'iommud_group_info{{group="{PAIR}",type="DMA-FQ"}}'], "1")
        self.assertEqual(s[f'iommud_group_devices{{group="{PAIR}"}}'], "5")  # the two drives and three bridges
        self.assertEqual(s['iommud_changes_total{result="done"}'], "0")  # the daemon's counters: 0 here
        r = subprocess.run([IOMMUCTL, "status", "--format=nfd"], env=self.host.env(), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        labels = nfd_labels(self, r.stdout)
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-iommu-vendor"], "intel")
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-iommu-mode"], "DMA-FQ")
        self.assertEqual(labels["feature.node.kubernetes.io/iommud-nvme-identity"], "false")
        r = subprocess.run([IOMMUCTL, "status", "--json", "--format=text"], env=self.host.env(), capture_output=True,
                           text=True, timeout=60)
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
        self.assertEqual(samples(first)[f'iommud_group_info{{group="{PAIR}",type="DMA-FQ"}}'], "1")
        self.assertEqual(nfd_labels(self, read(nfd))["feature.node.kubernetes.io/iommud-iommu-mode"], "DMA-FQ")
        written_at = os.stat(prom).st_mtime_ns

        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()

        def identity_exported():
            s = samples(read(prom))
            return (s.get(f'iommud_group_info{{group="{PAIR}",type="identity"}}') == "1"
                    and int(s.get('iommud_changes_total{result="done"}', "0")) >= 1)

        wait_until("the textfile to show the pair's group as identity and a change done", identity_exported, 15)
        after = read(prom)
        promtool_check(self, after, "the daemon's textfile after a hotplug")
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
