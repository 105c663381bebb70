"""Who may write what configures iommud, as the real binaries enforce it when they run as root
(docs/CONVENTIONS.md §3): a policy file writable by others or by its group, a policy directory
others can write, a policy file owned by someone else (nobody), a symlink to a file owned by
someone else, and the same owner and mode rules for iommud.conf. Each must be refused with a
message naming the file and what to do, by `iommuctl check`, by `iommuctl plan` and by the daemon,
which keeps the last good set at a reload (SIGHUP) and exits 78 at start. Needs root, as CI runs
it: the rules apply to root only, and the files are given to nobody with chown; without root, or
where chown to nobody fails (a user namespace without that uid), it fails and says so. Run by
ctest (label umockdev) with IOMMUD and IOMMUCTL set; by hand:
IOMMUD=build/bin/iommud IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_security_umockdev.py -v"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
from testbed import scaled  # noqa: E402
from test_iommud_umockdev import IOMMUCTL, IOMMUD, PAIR_DEBOUNCE_MS, PAIR_TRANSACTION, DaemonTestCase  # noqa: E402

NOBODY = 65534
POLICY = "50-test.toml"


def chown_to_nobody(test: unittest.TestCase, path: str) -> None:
    try:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    except OSError as e:
        test.fail(f"cannot chown {path} to nobody ({e.strerror}): this test gives files to another user to see "
                  "them refused, which needs root with uid 65534 mapped (run it as root, as CI does)")


class Refusals(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.assertEqual(os.geteuid(), 0, "needs root: iommud refuses files others can write only when it runs as "
                         "root, and the test chowns files to nobody (run it as root, as CI does)")

    # Each case makes the policy directory `d` unsafe in one way and returns what the refusal
    # must say (a regex over one diagnostic line) and how to make it safe again.
    def cases(self, d: str):
        policy = os.path.join(d, POLICY)

        def mode(path, bits):
            def bad():
                os.chmod(path, bits)
            return bad

        def owned_by_nobody():
            chown_to_nobody(self, policy)

        elsewhere = tempfile.mkdtemp(prefix="elsewhere-", dir=self.work)
        os.chmod(elsewhere, 0o755)
        target = os.path.join(elsewhere, "theirs.toml")

        def symlink_to_theirs():
            with open(policy) as f:
                text = f.read()
            with open(target, "w") as f:
                f.write(text)
            chown_to_nobody(self, target)
            os.rename(policy, policy + ".good")
            os.symlink(target, policy)

        def restore():
            if os.path.islink(policy):
                os.unlink(policy)
                os.rename(policy + ".good", policy)
            os.chown(policy, 0, 0)
            os.chmod(policy, 0o644)
            os.chmod(d, 0o755)

        q = re.escape
        return [
            ("other-writable file", mode(policy, 0o646),
             rf"{q(policy)}: error: refusing a policy file writable by group or others \(mode 0646\).*"
             rf"chmod go-w {q(policy)}"),
            ("group-writable file", mode(policy, 0o664),
             rf"{q(policy)}: error: refusing a policy file writable by group or others \(mode 0664\)"),
            ("writable directory", mode(d, 0o777),
             rf"{q(d)}: error: refusing a policy directory writable by group or others \(mode 0777\)"),
            ("sticky world-writable directory", mode(d, 0o1777),
             rf"{q(d)}: error: refusing a policy directory writable by group or others \(mode 1777\)"),
            ("file owned by nobody", owned_by_nobody,
             rf"{q(policy)}: error: refusing a policy file owned by uid {NOBODY}, not uid 0: anyone who can write "
             r"it controls iommud"),
            ("symlink to a file owned by nobody", symlink_to_theirs,
             rf"{q(policy)}: error: a symlink to {q(target)}: refusing a policy file owned by uid {NOBODY}"),
        ], restore

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([IOMMUCTL, *args], env=self.host.env(), capture_output=True, text=True, timeout=scaled(60))

    def test_unsafe_policies_are_refused_by_check_plan_and_a_reload_that_keeps_the_last_good_set(self):
        self.make_host()
        d = self.policies(testbed.pair_identity_rule("hotplug"))
        daemon = self.start([d], debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(daemon)
        self.assertEqual(self.cli("check", d).returncode, 0, "the good set is refused")
        cases, restore = self.cases(d)
        for name, make_bad, says in cases:
            with self.subTest(name):
                make_bad()
                try:
                    check = self.cli("check", d)
                    self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
                    self.assertRegex(check.stdout, says)
                    plan = self.cli("plan", "--policies", d)
                    self.assertEqual(plan.returncode, 1, plan.stdout + plan.stderr)
                    self.assertRegex(plan.stderr, says)
                    self.assertEqual(plan.stdout, "")
                    line = re.search(says + ".*", check.stdout).group(0)
                    mark = daemon.log_mark()
                    self.reload(daemon)
                    daemon.wait_log(re.escape(line), start=mark)  # what check printed, the daemon logs
                    self.assertTrue(daemon.alive())
                finally:
                    restore()
        # The last good set is the one in force: the pair, plugged again, goes to identity.
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.stop(daemon)

    def test_an_unsafe_iommud_conf_is_refused_at_start_at_reload_and_by_print_policy_dirs(self):
        self.make_host()
        d = self.policies(testbed.pair_identity_rule("hotplug"))
        conf_dir = tempfile.mkdtemp(prefix="conf-", dir=self.work)
        os.chmod(conf_dir, 0o755)
        conf = os.path.join(conf_dir, "iommud.conf")
        q = re.escape

        # At start: an other-writable file (created so: Iommud rewrites it, keeping its mode) exits 78.
        with open(conf, "w"):
            pass
        os.chmod(conf, 0o646)
        early = self.start([d], config_file=conf, args=("--once", "--config", conf))
        self.assertEqual(early.wait_exit(60), 78, early.log_text())
        self.assertRegex(early.log_text(), rf"{q(conf)}: error: refusing the configuration writable by group or "
                         rf"others \(mode 0646\).*chmod go-w {q(conf)}")
        early.kill()
        self.assertEqual(self.host.writes, [])
        dirs = subprocess.run([IOMMUD, "--print-policy-dirs", "--config", conf], capture_output=True, text=True,
                              timeout=scaled(60))
        self.assertEqual(dirs.returncode, 78, dirs.stderr)
        self.assertRegex(dirs.stderr, rf"{q(conf)}: error: refusing the configuration writable")
        os.chmod(conf, 0o644)

        daemon = self.start([d], config_file=conf, args=("--config", conf), debounce_ms=PAIR_DEBOUNCE_MS)
        self.wait_ready(daemon)
        for name, make_bad, says in [
                ("group-writable", lambda: os.chmod(conf, 0o664),
                 rf"{q(conf)}: error: refusing the configuration writable by group or others \(mode 0664\)"),
                ("owned by nobody", lambda: chown_to_nobody(self, conf),
                 rf"{q(conf)}: error: refusing the configuration owned by uid {NOBODY}, not uid 0"),
                ("in a writable directory", lambda: os.chmod(conf_dir, 0o777),
                 rf"{q(conf_dir)}: error: refusing the configuration's directory writable by group or others")]:
            with self.subTest(name):
                make_bad()
                try:
                    mark = daemon.log_mark()
                    self.reload(daemon)
                    daemon.wait_log(says, start=mark)
                    self.assertTrue(daemon.alive())
                    dirs = subprocess.run([IOMMUD, "--print-policy-dirs", "--config", conf], capture_output=True,
                                          text=True, timeout=scaled(60))
                    self.assertEqual(dirs.returncode, 78, dirs.stderr)
                    self.assertRegex(dirs.stderr, says)
                finally:
                    os.chown(conf, 0, 0)
                    os.chmod(conf, 0o644)
                    os.chmod(conf_dir, 0o755)
        # The last good configuration and policies still act.
        self.host.remove_pair()
        self.host.flush()
        self.host.add_pair()
        self.wait_pair_identity()
        self.assertEqual(self.host.writes, PAIR_TRANSACTION)
        self.stop(daemon)


if __name__ == "__main__":
    unittest.main()
