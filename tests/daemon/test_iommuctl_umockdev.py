"""iommuctl under umockdev's preload: the sysfs and procfs reader, and the planner on what it
read, against the testbed host of testbed.py. Run by ctest (label umockdev) with IOMMUCTL set;
by hand: IOMMUCTL=build/bin/iommuctl python3 tests/daemon/test_iommuctl_umockdev.py -v"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testbed  # noqa: E402
from testbed import NIC, NVME_A, NVME_B, SOLO_NVME, TB_DOWN, TB_UP, scaled  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema"))
import schemas  # noqa: E402  (docs/schema, python3-jsonschema)

IOMMUCTL = os.environ.get("IOMMUCTL", "iommuctl")

PAIR_IDENTITY = testbed.pair_identity_rule() + "\n" + testbed.NIC_IDENTITY_RULE


class IommuctlUnderUmockdev(unittest.TestCase):
    def setUp(self):
        self.host = testbed.Host()
        self.addCleanup(self.host.close)
        self.work = tempfile.mkdtemp(prefix="iommuctl-umockdev-")
        self.addCleanup(shutil.rmtree, self.work, True)

    def iommuctl(self, *args):
        r = subprocess.run([IOMMUCTL, *args], env=self.host.env(), capture_output=True, text=True, timeout=scaled(60))
        self.assertEqual(r.returncode, 0, f"iommuctl {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r.stdout

    def json_of(self, schema, *args):
        """iommuctl's JSON, valid against docs/schema/SCHEMA.schema.json."""
        doc = json.loads(self.iommuctl(*args))
        self.assertEqual(schemas.problems(schema, doc), [], f"iommuctl {' '.join(args)}")
        return doc

    def status(self):
        return self.json_of("status", "status", "--json")

    def policies(self, text):
        d = tempfile.mkdtemp(dir=self.work)
        os.chmod(d, 0o755)
        with open(os.path.join(d, "50-test.toml"), "w") as f:
            f.write(text)
        return d

    def test_status_reads_the_testbed_not_the_machine(self):
        s = self.status()
        self.assertEqual(s["kernel"]["release"], testbed.KERNEL_RELEASE)  # /proc through the preload
        self.assertEqual(s["kernel"]["config_source"], "/proc/config.gz")
        self.assertEqual(s["unreadable"], [])
        iommu = s["iommu"]
        self.assertEqual(iommu["vendor"], "intel")
        self.assertEqual(iommu["mode"], "DMA-FQ")
        self.assertTrue(iommu["dmar_platform_opt_in"])
        self.assertEqual([u["name"] for u in iommu["units"]], ["dmar0"])
        self.assertFalse(iommu["units"][0]["caching_mode"])
        self.assertTrue(iommu["units"][0]["pass_through"])
        self.assertEqual(s["thunderbolt"], [{"name": "domain0", "security": "user", "iommu_dma_protection": True}])

    def test_status_sees_three_endpoint_groups_with_the_pair_sharing_one(self):
        s = self.status()
        groups = {g["id"]: g for g in s["groups"]}
        devices = {d["address"]: d for d in s["devices"]}
        endpoint_groups = {d["group"] for d in s["devices"] if d["kind"] in ("nic", "nvme")}
        self.assertEqual(endpoint_groups, {NIC.group, NVME_A.group, SOLO_NVME.group})

        pair = groups[NVME_A.group]
        self.assertTrue(pair["shared"])
        self.assertEqual(pair["type"], "DMA-FQ")
        self.assertEqual(sorted(a for a in pair["devices"] if devices[a]["kind"] == "nvme"),
                         [NVME_A.address, NVME_B.address])
        self.assertEqual(devices[NVME_B.address]["group"], devices[NVME_A.address]["group"])
        self.assertEqual([(c["name"], c["serial"], [n["name"] for n in c["namespaces"]])
                          for a in (NVME_A.address, NVME_B.address) for c in devices[a]["nvme"]],
                         [("nvme0", NVME_A.nvme_serial, ["nvme0n1"]), ("nvme1", NVME_B.nvme_serial, ["nvme1n1"])])
        self.assertFalse(devices[NVME_A.address]["in_use"])

        solo = devices[SOLO_NVME.address]
        self.assertEqual(groups[SOLO_NVME.group]["devices"], [SOLO_NVME.address])
        self.assertTrue(solo["in_use"])
        self.assertIn("root-device", [r["kind"] for r in solo["in_use_reasons"]])

        finding = next(f for f in s["findings"] if f["id"] == "vtd-iotlb-sync-map")
        self.assertEqual(finding["groups"], [NVME_A.group])

    def test_status_marks_the_thunderbolt_nic_untrusted(self):
        s = self.status()
        nic = next(d for d in s["devices"] if d["address"] == NIC.address)
        self.assertEqual(nic["kind"], "nic")
        self.assertEqual(nic["driver"], "atlantic")
        self.assertEqual(nic["removable"], "removable")
        self.assertTrue(nic["thunderbolt"])
        self.assertTrue(nic["untrusted"])
        self.assertIn(TB_UP.address, nic["thunderbolt_reason"])
        self.assertEqual(nic["bridges"], ["0000:00:07.0", TB_UP.address, TB_DOWN.address])
        self.assertEqual([n["name"] for n in nic["netdevs"]], ["enp5s0"])
        self.assertEqual(next(g for g in s["groups"] if g["id"] == NIC.group)["type"], "DMA")
        self.assertIn("untrusted-bounce", [f["id"] for f in s["findings"]])

    def test_plan_at_hotplug_sets_the_pair_to_identity_and_refuses_the_untrusted_nic(self):
        plan = self.json_of("plan", "plan", "--hotplug", "--json", "--policies", self.policies(PAIR_IDENTITY))
        self.assertEqual(plan["trigger"], "hotplug")
        domain = [c for c in plan["changes"] if c["kind"] == "domain"]
        self.assertEqual(len(domain), 1, plan["changes"])
        change = domain[0]
        self.assertEqual(change["group"], NVME_A.group)
        self.assertEqual((change["from"], change["to"]), ("DMA-FQ", "identity"))
        self.assertEqual(change["devices"], [NVME_A.address, NVME_B.address])
        self.assertEqual((change["mode"], change["risk"]), ("apply", "high"))
        self.assertEqual(change["rule"]["name"], "nvme-pair-identity")

        nic = [s for s in plan["skips"] if s["device"] == NIC.address and s["key"] == "type"]
        self.assertEqual(len(nic), 1, plan["skips"])
        self.assertEqual((nic[0]["reason"], nic[0]["wanted"], nic[0]["rule"]["name"]),
                         ("untrusted", "identity", "nic-identity"))

    def test_plan_at_coldplug_leaves_the_pair_for_hotplug(self):
        plan = self.json_of("plan", "plan", "--json", "--policies", self.policies(PAIR_IDENTITY))
        self.assertEqual(plan["trigger"], "coldplug")
        self.assertEqual([c for c in plan["changes"] if c["kind"] == "domain"], [])
        pair = [s for s in plan["skips"] if s["device"] in (NVME_A.address, NVME_B.address)]
        self.assertEqual([(s["reason"], s["object"], s["wanted"]) for s in pair],
                         [("hotplug-only", f"group {NVME_A.group}", "identity")], plan["skips"])

    def test_hotplug_of_the_testbed_shows_in_status(self):
        self.host.remove_nic()
        self.host.remove_pair()
        s = self.status()
        addresses = {d["address"] for d in s["devices"]}
        self.assertFalse(addresses & {NIC.address, TB_UP.address, TB_DOWN.address, NVME_A.address, NVME_B.address})
        self.assertNotIn(NIC.group, [g["id"] for g in s["groups"]])  # freed with its last device
        self.assertIn(NVME_A.group, [g["id"] for g in s["groups"]])  # the switch ports stay in it

        self.host.remove_solo()
        s = self.status()
        self.assertNotIn(SOLO_NVME.group, [g["id"] for g in s["groups"]])
        self.assertNotIn(SOLO_NVME.address, {d["address"] for d in s["devices"]})

        self.host.add_pair()
        self.host.add_nic()
        self.host.add_solo()
        s = self.status()
        devices = {d["address"]: d for d in s["devices"]}
        self.assertEqual(devices[NVME_B.address]["nvme"][0]["name"], "nvme1")
        self.assertEqual([(n["name"], [p["name"] for p in n["partitions"]], n["dev"])
                          for n in devices[SOLO_NVME.address]["nvme"][0]["namespaces"]],
                         [("nvme2n1", ["nvme2n1p1", "nvme2n1p2"], "259:2")])
        self.assertTrue(devices[SOLO_NVME.address]["in_use"])  # / is on it again
        self.assertEqual(devices[NIC.address]["netdevs"][0]["name"], "enp5s0")
        self.assertEqual(self.host.anomalies, [])
        self.assertEqual([a for a, p in self.host.events if p.endswith(NVME_A.address)], ["unbind", "remove", "add", "bind"])

    def test_driver_writes_through_the_preload_move_the_links(self):
        # What iommud's transaction does, written by a program under the preload.
        script = (f"printf %s {NVME_A.address} > /sys/bus/pci/drivers/nvme/unbind && "
                  f"printf %s {NVME_B.address} > /sys/bus/pci/drivers/nvme/unbind && "
                  f"printf %s identity > /sys/kernel/iommu_groups/{NVME_A.group}/type && "
                  f"printf %s {NVME_A.address} > /sys/bus/pci/drivers/nvme/bind && "
                  f"printf %s {NVME_B.address} > /sys/bus/pci/drivers/nvme/bind")
        subprocess.run(["sh", "-c", script], env=self.host.env(), check=True, timeout=scaled(30))
        self.host.settle()
        self.assertEqual(self.host.anomalies, [])
        self.assertEqual(self.host.writes, [
            ("/sys/bus/pci/drivers/nvme/unbind", NVME_A.address),
            ("/sys/bus/pci/drivers/nvme/unbind", NVME_B.address),
            (f"/sys/kernel/iommu_groups/{NVME_A.group}/type", "identity"),
            ("/sys/bus/pci/drivers/nvme/bind", NVME_A.address),
            ("/sys/bus/pci/drivers/nvme/bind", NVME_B.address),
        ])
        self.assertEqual(self.host.group_type(NVME_A.group), "identity")
        for spec in (NVME_A, NVME_B):
            self.assertEqual(self.host.driver_of(spec.address), "nvme")
            self.assertEqual(self.host.uevent_driver(spec.address), "nvme")
        s = self.status()
        self.assertEqual(next(g for g in s["groups"] if g["id"] == NVME_A.group)["type"], "identity")

    def test_type_writes_the_kernel_refuses_are_put_back(self):
        # Drivers still bound: EPERM on 6.4+; identity for an untrusted device: EINVAL.
        script = (f"printf %s identity > /sys/kernel/iommu_groups/{NVME_A.group}/type; "
                  f"printf %s {NIC.address} > /sys/bus/pci/drivers/atlantic/unbind; "
                  f"printf %s identity > /sys/kernel/iommu_groups/{NIC.group}/type")
        subprocess.run(["sh", "-c", script], env=self.host.env(), check=True, timeout=scaled(30))
        self.host.settle()
        self.assertEqual(self.host.group_type(NVME_A.group), "DMA-FQ")
        self.assertEqual(self.host.group_type(NIC.group), "DMA")
        self.assertEqual(len(self.host.anomalies), 2, self.host.anomalies)
        self.assertIn("EPERM", self.host.anomalies[0])
        self.assertIn("untrusted", self.host.anomalies[1])

    def test_uevents_reach_a_monitor_under_the_preload(self):
        self.assertIsNotNone(shutil.which("udevadm"),
                             "udevadm not found: install Debian's udev package (scripts/setup --tests)")
        mon = subprocess.Popen(["udevadm", "monitor", "--udev", "--property", "--subsystem-match=pci"],
                               env=self.host.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(mon.kill)
        testbed.wait_until("udevadm's monitor socket",
                           lambda: any(n.startswith("event") for n in os.listdir(self.host.root)))
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(mon.stdout), daemon=True)
        reader.start()
        self.host.remove_pair()
        # Delivered is not yet printed: wait for the monitor to print all four (or more) events.
        testbed.wait_until("udevadm monitor to print the four events",
                           lambda: sum(line.startswith("ACTION=") for line in list(lines)) >= 4)
        mon.terminate()
        mon.wait(scaled(10))
        reader.join(scaled(10))
        out = "".join(lines)
        blocks = [dict(line.split("=", 1) for line in b.splitlines() if "=" in line)
                  for b in out.split("\n\n") if "ACTION=" in b]
        self.assertEqual([(b["ACTION"], b["PCI_SLOT_NAME"]) for b in blocks],
                         [("unbind", NVME_A.address), ("remove", NVME_A.address),
                          ("unbind", NVME_B.address), ("remove", NVME_B.address)])
        self.assertEqual(blocks[1]["DEVPATH"], "/devices/pci0000:00/0000:00:1b.0/0000:70:00.0/0000:71:00.0/0000:72:00.0")


if __name__ == "__main__":
    unittest.main()
