"""The four views of one host agree (issue 30, point 5): the score and the exposure list of
`iommuctl status --json`, the Prometheus textfile (`--format=prometheus`) and the
node-feature-discovery file (`--format=nfd`), from the real iommuctl on the hosts fleet_hosts
writes (healthy VT-d, iommu=pt with every device reaching all memory, a GPU in a VFIO group under
iommu=pt, an untrusted Thunderbolt NIC, Arm SMMUv3, no IOMMU, the synthetic workstation, a guest with
a virtio device that bypasses its vIOMMU) and on its
capture, the README's (docs/examples/workstation.tar). Run by ctest (label fleet) with IOMMUCTL
and FLEET_HOSTS set; by hand:
IOMMUCTL=build/bin/iommuctl FLEET_HOSTS=build/bin/fleet_hosts python3 tests/daemon/test_fleet_agreement.py -v"""

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nfd_local  # noqa: E402

IOMMUCTL = os.environ.get("IOMMUCTL", "build/bin/iommuctl")
FLEET_HOSTS = os.environ.get("FLEET_HOSTS", "build/bin/fleet_hosts")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOSTS = ["intel-bare-metal", "amd-iommu-pt", "vfio-group-pt", "thunderbolt-nic", "arm-smmu-v3", "no-iommu",
         "workstation", "virtio-guest"]
NFD = "feature.node.kubernetes.io/iommud-"
# What a device's group type lets its DMA reach (docs/score.md, status.schema.json exposure_level).
EXPOSURE_OF_TYPE = {"identity": {"all-memory"}, "DMA-FQ": {"mapped-window"}, "DMA": {"mapped", "mapped-subpage"},
                    "blocked": {"none"}}


def iommuctl(root: str, fmt: str) -> str:
    r = subprocess.run([IOMMUCTL, "--root", root, "status", f"--format={fmt}"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"iommuctl --root {root} status --format={fmt} exited {r.returncode}: {r.stderr}")
    return r.stdout


def samples(text: str) -> dict[str, float]:
    """Sample lines of the Prometheus text format: 'name{labels}' -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


class Views:
    """The three outputs of one root."""

    def __init__(self, root: str):
        self.status = json.loads(iommuctl(root, "json"))
        self.metrics = samples(iommuctl(root, "prometheus"))
        labels, errors = nfd_local.check_text(iommuctl(root, "nfd"))
        if errors:
            raise AssertionError(f"NFD would refuse the feature file of {root}: {errors}")
        self.nfd = {k.removeprefix(NFD): v for k, v in labels.items()}

    def series(self, name: str) -> dict[str, float]:
        """The samples of one metric: '{labels}' (empty without labels) -> value."""
        return {k[len(name):]: v for k, v in self.metrics.items() if k == name or k.startswith(name + "{")}


class ViewsAgree(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="iommud-agreement-")
        r = subprocess.run([FLEET_HOSTS, cls.dir, *HOSTS], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise AssertionError(f"{FLEET_HOSTS} failed: {r.stderr}")
        captured = os.path.join(cls.dir, "captured-workstation")
        os.mkdir(captured)
        subprocess.run(["tar", "-xf", os.path.join(SOURCE, "docs/examples/workstation.tar"), "-C", captured],
                       check=True, timeout=60)
        cls.views = {name: Views(os.path.join(cls.dir, name)) for name in HOSTS + ["captured-workstation"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_the_protection_level_is_one_number(self):
        for name, v in self.views.items():
            with self.subTest(host=name):
                level = v.status["score"]["level"]
                self.assertEqual(v.series("iommud_protection_level"), {"": level})
                self.assertEqual(v.nfd["protection-level"], str(level))

    def test_the_devices_reaching_all_memory_are_one_set(self):
        for name, v in self.views.items():
            with self.subTest(host=name):
                exposure = v.status["exposure"]
                kinds = {d["address"]: d["kind"] for d in v.status["devices"]}
                reaching = {e["address"] for e in exposure["devices"] if e["level"] == "all-memory"}
                endpoints = {a for a in reaching if kinds[a] != "bridge"}
                self.assertEqual(set(exposure["all_memory"]), endpoints)
                self.assertEqual(v.series("iommud_devices_all_memory"), {"": len(endpoints)})
                # The score's first criterion is that list being empty.
                met = {c["id"]: c["met"] for c in v.status["score"]["criteria"]}
                self.assertEqual(met["no-device-reaches-all-memory"], not endpoints)
                if endpoints:
                    self.assertEqual(v.status["score"]["level"], 0)

    def test_each_device_exposure_follows_its_group_in_every_view(self):
        for name, v in self.views.items():
            with self.subTest(host=name):
                types = {g["id"]: g["type"] for g in v.status["groups"]}
                level = {e["address"]: e["level"] for e in v.status["exposure"]["devices"]}
                self.assertEqual(list(level), [d["address"] for d in v.status["devices"]])
                # A virtio device without VIRTIO_F_ACCESS_PLATFORM reaches all memory whatever its group.
                bypass = {a for f in v.status["findings"] if f["id"] == "virtio-bypasses-iommu" for a in f["devices"]}
                grouped = collections.Counter()
                for d in v.status["devices"]:
                    if d["group"] is None:
                        continue
                    kind = types[d["group"]]
                    grouped[kind or "unknown"] += 1
                    if not v.status["iommu"]["present"] or d["class"].startswith("0x0600"):
                        continue
                    if d["address"] in bypass:
                        self.assertEqual(level[d["address"]], "all-memory", d["address"])
                    elif d["driver"] == "vfio-pci":  # the VFIO domain, strict, whatever the default type
                        self.assertEqual(level[d["address"]], "mapped", d["address"])
                    elif kind in EXPOSURE_OF_TYPE:
                        self.assertIn(level[d["address"]], EXPOSURE_OF_TYPE[kind], d["address"])
                    if d["untrusted"] and kind == "DMA":
                        self.assertEqual(level[d["address"]], "mapped-subpage", d["address"])
                # Prometheus counts the groups' members by type: the same devices as status's groups.
                members = collections.Counter()
                for g in v.status["groups"]:
                    members[g["type"] or "unknown"] += len(g["devices"])
                self.assertEqual(grouped, members)
                self.assertEqual(v.series("iommud_grouped_devices"),
                                 {f'{{type="{t}"}}': n for t, n in members.items()})
                # NFD's per-kind labels: every NVMe drive (NIC) in an identity group, i.e. reaching all memory.
                for kind in ("nvme", "nic"):
                    of_kind = [d for d in v.status["devices"] if d["kind"] == kind]
                    if not of_kind:
                        self.assertNotIn(f"{kind}-identity", v.nfd)
                        continue
                    identity = all(d["group"] is not None and types[d["group"]] == "identity" for d in of_kind)
                    self.assertEqual(v.nfd[f"{kind}-identity"], str(identity).lower())
                    if identity and v.status["iommu"]["present"]:
                        self.assertTrue(all(level[d["address"]] == "all-memory" for d in of_kind))

    def test_the_iommu_is_named_alike(self):
        for name, v in self.views.items():
            with self.subTest(host=name):
                iommu = v.status["iommu"]
                self.assertEqual(v.series("iommud_iommu_present"), {"": 1 if iommu["present"] else 0})
                info = v.series("iommud_iommu_info")
                self.assertEqual(list(info.values()), [1])
                self.assertEqual(list(info), [f'{{vendor="{v.nfd["iommu-vendor"]}",mode="{v.nfd["iommu-mode"]}"}}'])
                self.assertEqual(v.nfd["iommu-vendor"], iommu["vendor"])

    def test_the_findings_count_alike_by_severity(self):
        for name, v in self.views.items():
            with self.subTest(host=name):
                by_id = collections.Counter((f["id"], f["severity"]) for f in v.status["findings"])
                self.assertEqual(v.series("iommud_findings"),
                                 {f'{{id="{i}",severity="{s}"}}': n for (i, s), n in by_id.items()})
                warning = any(f["severity"] != "info" for f in v.status["findings"])
                self.assertEqual(v.nfd["findings-warning"], str(warning).lower())

    def test_the_hosts_cover_the_cases(self):
        # The oracle: each case the issue names is in the set, so the checks above are not vacuous.
        def reaching(name):
            return len(self.views[name].status["exposure"]["all_memory"])
        self.assertEqual(reaching("intel-bare-metal"), 0)
        self.assertGreater(reaching("amd-iommu-pt"), 0)
        self.assertTrue(any(d["driver"] == "vfio-pci" for d in self.views["vfio-group-pt"].status["devices"]))
        self.assertTrue(any(d["untrusted"] for d in self.views["thunderbolt-nic"].status["devices"]))
        self.assertEqual(self.views["arm-smmu-v3"].status["iommu"]["vendor"], "arm-smmu-v3")
        self.assertEqual(self.views["virtio-guest"].status["exposure"]["all_memory"], ["0000:00:05.0"])
        self.assertTrue(self.views["captured-workstation"].status["findings"])


if __name__ == "__main__":
    unittest.main()
