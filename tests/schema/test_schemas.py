"""The JSON Schemas of iommuctl's --json output (docs/schema/*.schema.json) against the real output.

- the schemas are valid JSON Schema draft 2020-12, and strict: every object closed
  (additionalProperties: false), every member required (absent values are null, never omitted) but
  the vendor-specific members of an IOMMU unit, every member described;
- every stored golden (tests/data/golden: status and plan) and every recorded real-kernel status
  (tests/vm/testdata) is valid;
- status, plan (coldplug, --hotplug, --boot; the shipped policies and tests/schema/policies*),
  explain and status DEVICE of every device, printed by the built iommuctl on each synthetic host
  of tests/support (written out by schema_hosts), are valid; and together they contain what the schemas must be
  checked against (findings, untrusted devices, unreadable files, records of changes, every kind of
  change, many kinds of skip), so that a valid corpus is not an empty one;
- mutated documents (an unknown member, a wrong enum, a missing member, a wrong type or pattern)
  are rejected.

The daemon's section of status --json and the D-Bus Plan reply are validated where the daemon
runs: tests/daemon/test_dbus_umockdev.py.

Run by ctest (label schema); by hand:
IOMMUCTL=build/bin/iommuctl SCHEMA_HOSTS=build/tests/schema/schema_hosts python3 tests/schema/test_schemas.py -v"""

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import schemas  # noqa: E402

from jsonschema import Draft202012Validator  # noqa: E402

IOMMUCTL = os.environ.get("IOMMUCTL", "")
SCHEMA_HOSTS = os.environ.get("SCHEMA_HOSTS", "")
POLICY_SETS = {"shipped": REPO / "policies", "test": HERE / "policies", "test-2": HERE / "policies-2"}
TRIGGERS = {"coldplug": [], "hotplug": ["--hotplug"], "boot": ["--boot"]}

# Members that are present only for some objects, with the reason in the schema's if/then.
OPTIONAL_BY_DESIGN = {"page_selective_invalidation", "super_pages", "domains", "snoop_control", "scalable_mode",
                      "first_level_translation", "second_level_translation", "iotlb", "efr_supported"}

# A record as iommud writes it to /run/iommud/changes.json (app/change/apply.cpp toJson), for status's changes[].
RECORD = {"kind": "domain", "device": "0000:03:00.0", "object": "group 20", "key": "type", "original": "DMA-FQ",
          "written": "identity", "existed": True, "rule": "nvme-identity", "rule_where": "test.toml:1:1",
          "time": "2026-11-22T08:07:46Z", "irreversible": False, "ifindex": 0, "group": 20}

# What a running iommud adds to status --json; hand-written, for the mutations only (the real one is
# validated in tests/daemon/test_dbus_umockdev.py).
DAEMON = {"state": "running", "summary": "1 devices tuned, 0 advised, 0 refused, 0 failed",
          "started_at": "2026-11-22T08:07:46Z", "last_run_at": "",
          "rules": 3, "recent": [{"time": "2026-11-22T08:07:47Z", "result": "done", "device": "0000:03:00.0",
                                  "message": "group 20 (0000:03:00.0): DMA-FQ -> identity, done"}]}


def run(*args: str) -> str:
    r = subprocess.run([IOMMUCTL, *args], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"iommuctl {' '.join(args)} exited {r.returncode}: {r.stderr.strip()[:2000]}")
    return r.stdout


class Corpus:
    """Every document iommuctl printed on the synthetic hosts: (what, schema name, document)."""

    def __init__(self, work: Path):
        self.docs: list[tuple[str, str, object]] = []
        hosts = work / "hosts"
        made = subprocess.run([SCHEMA_HOSTS, str(hosts)], capture_output=True, text=True, timeout=120)
        if made.returncode != 0:
            raise AssertionError(f"schema_hosts failed: {made.stderr}")
        self.hosts = sorted(p for p in hosts.iterdir() if p.is_dir())
        if len(self.hosts) < 10:
            raise AssertionError(f"schema_hosts wrote only {[p.name for p in self.hosts]}")
        # One host with iommud's records of what it changed.
        recorded = hosts / "two-nvme-one-group-recorded"
        shutil.copytree(hosts / "two-nvme-one-group", recorded, symlinks=True)
        (recorded / "run/iommud").mkdir(parents=True)
        (recorded / "run/iommud/changes.json").write_text(json.dumps([RECORD], indent=2))
        self.hosts.append(recorded)
        for host in self.hosts:
            root = ["--root", str(host)]
            status = json.loads(run(*root, "status", "--json"))
            self.docs.append((f"status of {host.name}", "status", status))
            for dev in status["devices"]:
                self.docs.append((f"status {dev['address']} of {host.name}", "device",
                                  json.loads(run(*root, "status", "--json", dev["address"],
                                                 "--policies", str(POLICY_SETS["test"])))))
            for pname, pdir in POLICY_SETS.items():
                for tname, targs in TRIGGERS.items():
                    plan = json.loads(run(*root, "plan", "--json", "--policies", str(pdir), *targs))
                    self.docs.append((f"plan of {host.name}, {pname} policies, {tname}", "plan", plan))
                for dev in status["devices"]:
                    what = f"explain {dev['address']} of {host.name}, {pname} policies"
                    self.docs.append((what, "explain", json.loads(run(*root, "explain", "--json", dev["address"],
                                                                      "--policies", str(pdir), "--hotplug"))))

    def of(self, name: str) -> list:
        return [d for _, n, d in self.docs if n == name]


class Schemas(unittest.TestCase):
    corpus: Corpus

    @classmethod
    def setUpClass(cls):
        if not IOMMUCTL or not SCHEMA_HOSTS:
            raise AssertionError("set IOMMUCTL and SCHEMA_HOSTS (ctest does)")
        cls.work = Path(tempfile.mkdtemp(prefix="iommud-schema-"))
        try:
            cls.corpus = Corpus(cls.work)
        except BaseException:
            shutil.rmtree(cls.work)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work)

    def assertValid(self, name: str, doc, what: str):
        problems = schemas.problems(name, doc)
        self.assertEqual(problems, [], f"{what} breaks docs/schema/{name}.schema.json")

    # --- the schemas themselves ---

    def test_schemas_are_valid_draft_2020_12(self):
        for name in schemas.ALL:
            s = schemas.load(name)
            Draft202012Validator.check_schema(s)
            self.assertEqual(s["$schema"], "https://json-schema.org/draft/2020-12/schema")
            self.assertEqual(s["$id"], f"https://iommud.invalid/schema/1/{name}.schema.json")
            self.assertTrue(s.get("title") and s.get("description"), name)
            self.assertEqual(s["properties"]["schema_version"]["const"], 1)

    def test_schemas_are_strict_and_described(self):
        # Every object closed, every member required and described (directly or by its $ref).
        def defs_of(name):
            return schemas.load(name)["$defs"] if "$defs" in schemas.load(name) else {}

        def described(node) -> bool:
            if "description" in node:
                return True
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return False  # a local ref: checked where it is defined
            return ref.split("#")[0] in {f"{n}.schema.json" for n in schemas.ALL}

        def walk(name, node, path):
            if isinstance(node, dict):
                if "properties" in node and node.get("type") == "object":
                    self.assertIs(node.get("additionalProperties"), False, f"{name}{path}: not closed")
                    missing = set(node["properties"]) - set(node.get("required", [])) - OPTIONAL_BY_DESIGN
                    self.assertEqual(missing, set(), f"{name}{path}: members not required")
                    for key, sub in node["properties"].items():
                        ok = described(sub) or (sub.get("$ref", "").startswith("#/$defs/")
                                                and "description" in defs_of(name)[sub["$ref"].split("/")[-1]])
                        self.assertTrue(ok, f"{name}{path}/{key}: no description")
                for k, v in node.items():
                    walk(name, v, f"{path}/{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(name, v, f"{path}/{i}")

        for name in schemas.ALL:
            walk(name, schemas.load(name), "")

    # --- stored documents ---

    def test_goldens(self):
        goldens = sorted((REPO / "tests/data/golden").glob("*.json"))
        self.assertGreaterEqual(len(goldens), 10)
        for g in goldens:
            self.assertValid("plan" if g.name.startswith("plan_") else "status", json.loads(g.read_text()),
                             f"tests/data/golden/{g.name}")

    def test_recorded_real_kernels(self):
        recorded = sorted((REPO / "tests/vm/testdata").glob("*/status.json"))
        self.assertGreaterEqual(len(recorded), 4)
        for r in recorded:
            self.assertValid("status", json.loads(r.read_text()), str(r.relative_to(REPO)))

    def test_recorded_top(self):
        # `iommuctl top --json` measures the running kernel: recorded by tests/vm (measure_scenario.py,
        # which validates each fresh run too), on 6.12 (maps per device) and 6.1 (no dma:* events).
        recorded = sorted((REPO / "tests/data/trace").glob("*/top.json"))
        self.assertGreaterEqual(len(recorded), 2)
        for r in recorded:
            doc = json.loads(r.read_text())
            self.assertValid("top", doc, str(r.relative_to(REPO)))
            mutants = {
                "an unknown member": lambda d: d.update(extra=1),
                "a missing member": lambda d: d["devices"][0].pop("maps"),
                "a negative count": lambda d: d["host"].update(iommu_maps=-1),
                "a wrong type": lambda d: d["devices"][0].update(translated="yes"),
                "another version": lambda d: d.update(schema_version=2),
            }
            for what, mutate in mutants.items():
                bad = json.loads(r.read_text())
                mutate(bad)
                self.assertNotEqual(schemas.problems("top", bad), [], f"{r.name} with {what} passes")

    def test_verify(self):
        # `iommuctl verify --json` on a root with a record in each state: as recorded, drifted,
        # gone (a module not loaded) and unchecked (a NIC setting under --root).
        root = self.work / "verify-root"
        for d in ("sys/bus/pci/devices/0000:03:00.0", "sys/kernel/iommu_groups/20", "sys/kernel/iommu_groups/21",
                  "sys/class/net/enp5s0", "run/iommud"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "sys/kernel/iommu_groups/20/type").write_text("identity\n")
        (root / "sys/kernel/iommu_groups/21/type").write_text("DMA\n")
        (root / "sys/class/net/enp5s0/ifindex").write_text("2\n")
        records = [RECORD, dict(RECORD, object="group 21", group=21),
                   dict(RECORD, kind="module-param", object="nvme.poll_queues", key="poll_queues", group=None),
                   dict(RECORD, kind="rings", object="enp5s0", key="rx", written="4096", group=None)]
        (root / "run/iommud/changes.json").write_text(json.dumps(records))
        r = subprocess.run([IOMMUCTL, "--root", str(root), "verify", "--json"], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 3, r.stderr)
        doc = json.loads(r.stdout)
        self.assertValid("verify", doc, "verify --json")
        self.assertEqual([x["state"] for x in doc["records"]], ["as-recorded", "drifted", "gone", "unchecked"])
        mutants = {
            "an unknown member": lambda d: d["records"][0].update(extra=1),
            "a missing member": lambda d: d["records"][0].pop("now"),
            "a wrong state": lambda d: d["records"][0].update(state="fine"),
            "a negative count": lambda d: d["summary"].update(gone=-1),
            "another version": lambda d: d.update(schema_version=2),
        }
        for what, mutate in mutants.items():
            bad = json.loads(r.stdout)
            mutate(bad)
            self.assertNotEqual(schemas.problems("verify", bad), [], f"verify --json with {what} passes")

    # --- what the built iommuctl prints ---

    def test_fresh_output_on_synthetic_hosts(self):
        for what, name, doc in self.corpus.docs:
            with self.subTest(what):
                self.assertValid(name, doc, what)

    def test_the_output_covers_what_the_schemas_describe(self):
        statuses, plans, explains, shown = (self.corpus.of(n) for n in schemas.NAMES)
        devices = [d for s in statuses for d in s["devices"]]
        self.assertTrue(any(d["untrusted"] for d in devices), "no untrusted device")
        self.assertTrue(any(d["in_use_reasons"] for d in devices), "no device in use")
        self.assertTrue(any(d["nvme"] and d["netdevs"] == [] for d in devices), "no NVMe drive")
        self.assertTrue(any(d["removable"] is None for d in devices) and any(d["removable"] for d in devices))
        units = [u for s in statuses for u in s["iommu"]["units"]]
        self.assertEqual({u["vendor"] for u in units} >= {"intel", "amd"}, True, units)
        self.assertEqual({s["iommu"]["mode"] for s in statuses} >= {"off", "identity", "DMA", "DMA-FQ"}, True)
        self.assertEqual({f["severity"] for s in statuses for f in s["findings"]} >= {"info", "warning"}, True)
        self.assertTrue(any(s["unreadable"] for s in statuses), "no unreadable file")
        self.assertEqual([c["to"] for s in statuses for c in s["changes"]], ["identity"], "the record is not read")
        self.assertTrue(any(s["thunderbolt"] for s in statuses), "no Thunderbolt domain")
        changes = [c for p in plans + explains for c in p["changes"]]
        self.assertEqual({c["kind"] for c in changes},
                         {"module-param", "domain", "rings", "channels", "coalesce", "modprobe-conf"})
        self.assertEqual({c["mode"] for c in changes}, {"apply", "advise"})
        reasons = {s["reason"] for p in plans + explains for s in p["skips"]}
        # Not seen: unsupported (needs a unit without pass-through, ethtool maxima or a built-in module).
        want = {"hotplug-only", "untrusted", "needs-acceptance", "in-use", "never-unbind", "group-uncovered",
                "conflict", "kernel-too-old", "no-iommu", "no-netdev", "param-missing", "param-read-only",
                "overridden"}
        self.assertEqual(want - reasons, set(), f"skip reasons seen: {sorted(reasons)}")
        self.assertTrue(any(p["satisfied"] for p in plans), "nothing satisfied")
        self.assertEqual({p["trigger"] for p in plans}, {"coldplug", "hotplug", "boot"})
        self.assertTrue(any(r["nearly"] for e in explains for r in e["rules"]), "no rule nearly matches")
        self.assertTrue(any(e["group"] is None for e in explains) and any(e["group"] for e in explains))
        self.assertTrue(any(d["group"] is None for d in shown) and any(d["group"] for d in shown))
        self.assertTrue(any(d["rules"] for d in shown), "status DEVICE: no rule matches")
        self.assertTrue(any(d["changes"] for d in shown), "status DEVICE: no record read")

    # --- mutations must be rejected ---

    def mutants(self):
        """(what, schema, mutation) for documents of the corpus; each mutation makes it invalid."""
        def dev(d, i=0):
            return d["devices"][i] if "devices" in d else d["device"]

        def unit(d):
            return d["iommu"]["units"][0]

        def first(key):
            return lambda d: d[key][0]

        return [
            ("an unknown top-level member", "status", lambda d: d.update(extra=1)),
            ("an unknown member in a device", "status", lambda d: dev(d).update(mtu=1500)),
            ("an unknown member in a unit", "status", lambda d: unit(d).update(colour="red")),
            ("schema_version 2", "status", lambda d: d.update(schema_version=2)),
            ("a mode of no kind", "status", lambda d: d["iommu"].update(mode="fast")),
            ("a vendor of no kind", "status", lambda d: d["iommu"].update(vendor="via")),
            ("a finding of no kind", "status", lambda d: first("findings")(d).update(id="made-up")),
            ("a severity of no kind", "status", lambda d: first("findings")(d).update(severity="critical")),
            ("a device kind of no kind", "status", lambda d: dev(d).update(kind="gpu")),
            ("kernel.release missing", "status", lambda d: d["kernel"].pop("release")),
            ("a null member omitted", "status", lambda d: d["iommu"].pop("dmar_platform_opt_in")),
            ("the daemon member omitted", "status", lambda d: d.pop("daemon")),
            ("a group id as a string", "status", lambda d: d["groups"][0].update(id=str(d["groups"][0]["id"]))),
            ("a short PCI address", "status", lambda d: dev(d).update(address="5:00.0")),
            ("an upper-case id", "status", lambda d: dev(d).update(vendor_id="0x8086".upper())),
            ("a cap as a number", "status", lambda d: unit(d).update(cap=123)),
            ("an Intel unit without super_pages", "status", lambda d: unit(d).pop("super_pages")),
            ("AMD members on an Intel unit", "status", lambda d: unit(d).update(iotlb=True, efr_supported=True)),
            ("in use without a reason", "status", lambda d: dev(d).update(in_use=True, in_use_reasons=[])),
            ("a reason without in_use", "status",
             lambda d: dev(d).update(in_use=False, in_use_reasons=[{"kind": "swap", "detail": "x"}])),
            ("a tunnel's reason on a fixed device", "status",
             lambda d: dev(d).update(thunderbolt=False, thunderbolt_reason="below a bridge")),
            ("a removable device that is trusted", "status",
             lambda d: dev(d).update(removable="removable", untrusted=False)),
            ("a daemon that does not say its state", "status-daemon", lambda d: d["daemon"].pop("state")),
            ("a daemon state of no kind", "status-daemon", lambda d: d["daemon"].update(state="dozing")),
            ("an unknown member in the daemon", "status-daemon", lambda d: d["daemon"].update(pid=1)),
            ("a daemon outcome of no kind", "status-daemon", lambda d: d["daemon"]["recent"][0].update(result="ok")),
            ("a daemon time that is not ISO 8601", "status-daemon",
             lambda d: d["daemon"].update(started_at="Sun Nov 22 08:07:46 2026")),
            ("a change record of no kind", "status-changes", lambda d: first("changes")(d).update(kind="ring")),
            ("a change record without its time", "status-changes", lambda d: first("changes")(d).pop("time")),
            ("an unknown member in a plan", "plan", lambda d: d.update(host="x")),
            ("a trigger of no kind", "plan", lambda d: d.update(trigger="reboot")),
            ("a change kind of no kind", "plan", lambda d: first("changes")(d).update(kind="ring")),
            ("a risk of no kind", "plan", lambda d: first("changes")(d).update(risk="some")),
            ("a change without its rule", "plan", lambda d: first("changes")(d).pop("rule")),
            ("a change without devices", "plan", lambda d: first("changes")(d).update(devices=[])),
            ("a rule at line 0", "plan", lambda d: first("changes")(d)["rule"].update(line=0)),
            ("an initramfs on a non-modprobe change", "plan",
             lambda d: first("changes")(d).update(kind="rings", initramfs={"image": "i", "rebuild": "r",
                                                                           "holds_module": True})),
            ("a skip reason of no kind", "plan-skips", lambda d: first("skips")(d).update(reason="because")),
            ("a skip without its message", "plan-skips", lambda d: first("skips")(d).pop("message")),
            ("an unknown member in a skip", "plan-skips", lambda d: first("skips")(d).update(hint="x")),
            ("rules as a string", "plan", lambda d: d.update(rules="3")),
            ("an explain without its host", "explain", lambda d: d.pop("host")),
            ("an explain device with an unknown member", "explain", lambda d: d["device"].update(x=1)),
            ("a rule condition with an unknown member", "explain-rules",
             lambda d: d["rules"][0].update(score=1)),
            ("a condition that holds as a string", "explain-conditions",
             lambda d: d["rules"][0]["conditions"][0].update(holds="yes")),
            ("an explain host mode of no kind", "explain", lambda d: d["host"].update(mode="fast")),
            ("a status DEVICE with an unknown member", "device", lambda d: d.update(host="x")),
            ("a status DEVICE without its rules", "device", lambda d: d.pop("rules")),
            ("a matching rule of no mode", "device-rules", lambda d: d["rules"][0].update(mode="enforce")),
            ("a status DEVICE change without its time", "device-changes", lambda d: d["changes"][0].pop("time")),
        ]

    def base(self, kind: str):
        """A valid document of the corpus to mutate, with what the mutation needs."""
        statuses, plans, explains, shown = (self.corpus.of(n) for n in schemas.NAMES)
        intel = [s for s in statuses if s["iommu"]["vendor"] == "intel" and s["findings"] and s["devices"]]
        if kind == "status":
            return "status", intel[0]
        if kind == "status-daemon":
            d = copy.deepcopy(intel[0])
            d["daemon"] = copy.deepcopy(DAEMON)
            return "status", d
        if kind == "status-changes":
            return "status", next(s for s in statuses if s["changes"])
        if kind == "plan":
            return "plan", next(p for p in plans if p["changes"])
        if kind == "plan-skips":
            return "plan", next(p for p in plans if p["skips"])
        if kind == "explain":
            return "explain", explains[0]
        if kind.startswith("device"):
            member = kind.removeprefix("device-") if kind != "device" else "device"
            return "device", next(d for d in shown if d[member])
        return "explain", next(e for e in explains if e["rules"] and e["rules"][0]["conditions"])

    def test_mutated_documents_are_rejected(self):
        for what, kind, mutate in self.mutants():
            with self.subTest(what):
                name, doc = self.base(kind)
                self.assertValid(name, doc, f"the unmutated document for {what!r}")
                mutated = copy.deepcopy(doc)
                mutate(mutated)
                self.assertNotEqual(mutated, doc, "the mutation changed nothing")
                self.assertNotEqual(schemas.problems(name, mutated), [], f"accepted with {what}")


if __name__ == "__main__":
    unittest.main()
