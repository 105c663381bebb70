"""A synthetic Intel VT-d workstation in a umockdev testbed, for running the real iommuctl and
iommud under umockdev's preload.

libumockdev-preload.so.0 redirects /sys, and the /dev and /proc paths the testbed holds, into the
testbed directory, and turns a program's uevent netlink socket into a Unix socket there
(`event<fd>`). `Host` builds the sysfs and procfs of one machine in it (see HOST below), plugs
and unplugs its devices with the uevents the kernel and udevd would send, and plays the kernel's
part in driver binding: `/sys/bus/pci/drivers/<drv>/{bind,unbind}` are FIFOs read by a thread
that moves the `driver` links, creates and removes the driver's class devices and sends the
`bind`/`unbind` uevents.

The testbed (`UMockdev.Testbed`) gives the directory and its removal; the programs under test
run with the preload (`Host.env()`), this Python does not need it. Where this departs from
umockdev's own helpers, and why:
- uevents are sent by `Host.uevent` in umockdev's wire format (libudev header, properties
  from the device's `uevent` file), not by `UMockdev.Testbed.uevent()`: 0.17.16 sends on a
  non-blocking socket and abort()s the whole test on EAGAIN, which a listener's queue of
  net.unix.max_dgram_qlen (10 by default) gives after ten unread events; and it needs the
  device directory to exist, so a `remove` cannot be sent after the device is gone, which is
  what a listener behind udevd sees. Here a thread delivers them in order and a full queue
  makes it wait (up to `send_timeout`) until the listener reads.
- devices are made with plain file operations, not `Testbed.add_device()`, which in 0.17.16
  always sends an `add` uevent itself, through that same sender.
- bind/unbind are FIFOs, not plain files: the kernel takes each write synchronously, while a
  plain file keeps only the last of two quick writes (the writer neither truncates nor
  appends). inotify on the FIFOs and the groups' `type` files keeps the order of the writes.
  Each FIFO is kept full, so that a writer's write() waits until its open is handled, that is
  until every write before it has taken effect: a program that writes unbind, type, bind and
  then reads back sees the first writes done. Only the effect of the last write can still be
  late (by milliseconds), as a driver's probe can be on a real kernel.
- `/sys/kernel/iommu_groups/N/type` is a plain file. The writer does not truncate, so a value
  shorter than the content leaves a tail ("DMA-FQ" over "identity\\n" reads "DMA-FQity\\n");
  the emulation rewrites the file as the kernel would show it, milliseconds later. A value the
  kernel would refuse (drivers still bound: EPERM since 6.4; identity or DMA-FQ for an
  untrusted device: EINVAL) is put back to the old type and recorded in `Host.anomalies`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import gzip
import os
import re
import select
import shutil
import socket
import struct
import sys
import threading
import time
from typing import Callable

try:
    import gi

    gi.require_version("UMockdev", "1.0")
    from gi.repository import UMockdev  # noqa: E402  (after require_version)
except (ImportError, ValueError) as missing:
    # One line that says what to install, not a traceback (bench/run-daemon and the tests alike).
    raise SystemExit(f"{os.path.basename(sys.argv[0])}: needs umockdev and its Python bindings ({missing}): "
                     "install the Debian packages umockdev, gir1.2-umockdev-1.0 and python3-gi "
                     "(scripts/setup --tests does)") from None

PRELOAD = "libumockdev-preload.so.0"
# Makes a write to an emulated bind, unbind or type file return once taken, as on the kernel
# (sync_writes.cpp; ctest sets the path, bench/run-daemon too).
SYNC_WRITES = os.environ.get("IOMMUD_TESTBED_SYNC", "")


def _timeout_scale() -> float:
    text = os.environ.get("IOMMUD_TEST_TIMEOUT_SCALE", "") or "1"
    try:
        scale = float(text)
    except ValueError:
        raise SystemExit(f"IOMMUD_TEST_TIMEOUT_SCALE={text!r} is not a number") from None
    if scale <= 0:
        raise SystemExit(f"IOMMUD_TEST_TIMEOUT_SCALE={text!r} must be above 0")
    return scale


# The one factor of every deadline of the umockdev tests (a slow or loaded machine, a sanitizer
# build): a deadline only bounds how long a failing test takes; the tests wait for events.
TIMEOUT_SCALE = _timeout_scale()


def scaled(seconds: float) -> float:
    """A deadline of `seconds` on this machine: times IOMMUD_TEST_TIMEOUT_SCALE (default 1)."""
    return seconds * TIMEOUT_SCALE


def wait_until(what: str, predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.01):
    """Polls `predicate` until it returns something true; raises AssertionError naming `what`
    after `timeout` seconds (scaled). Returns the predicate's value."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


KERNEL_RELEASE = "6.12.38-umockdev"
NVME_CHAR_MAJOR = 243
BLOCK_EXT_MAJOR = 259

# As in Debian's 6.12 kernels: VT-d on except for the integrated GPU, lazy invalidation.
KERNEL_CONFIG = """\
CONFIG_IOMMU_SUPPORT=y
CONFIG_INTEL_IOMMU=y
# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set
CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF=y
# CONFIG_INTEL_IOMMU_DEFAULT_OFF is not set
CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON=y
CONFIG_AMD_IOMMU=y
# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set
CONFIG_IOMMU_DEFAULT_DMA_LAZY=y
# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set
CONFIG_SWIOTLB=y
CONFIG_THUNDERBOLT=m
CONFIG_NVME_CORE=m
CONFIG_BLK_DEV_NVME=m
CONFIG_AQTION=m
"""

# A bare-metal VT-d unit (Tiger Lake): no Caching Mode (cap bit 7), no RWBF (cap bit 4),
# pass-through supported (ecap bit 6).
DMAR_CAP = "d2008c40660462"
DMAR_ECAP = "f050da"


@dataclasses.dataclass
class Namespace:
    partitions: int = 0  # nvmeXn1p1 .. pN


@dataclasses.dataclass
class Pci:
    """One PCI function of the host."""

    address: str
    parent: str | None  # the upstream bridge's address; None below the host bridge
    vendor: int
    device: int
    class_code: int
    driver: str | None
    group: int
    removable: str = "fixed"
    sub_vendor: int = 0
    sub_device: int = 0
    revision: int = 1
    # What the driver creates when it binds.
    netdev: str | None = None
    mac: str | None = None
    nvme_model: str | None = None
    nvme_serial: str | None = None
    namespaces: tuple[Namespace, ...] = ()

    @property
    def untrusted(self) -> bool:
        return self.removable == "removable"

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == 0x0604


# HOST: a Tiger Lake workstation, kernel 6.12.38 (inside the 6.10 iotlb_sync_map regression).
#  group 0  0000:00:00.0  host bridge
#  group 1  0000:00:07.0  USB4 root port (external facing)
#  group 2  0000:00:0d.2  USB4 host interface (NHI, driver thunderbolt; domain0 below it)
#  group 3  0000:00:1b.0  PCH root port -> a PCIe switch without ACS:
#  group 6  0000:70:00.0, 0000:71:00.0, 0000:71:01.0 (switch ports), and the NVMe pair in
#           hot-swap bays, 0000:72:00.0 (nvme0) and 0000:73:00.0 (nvme1): ONE group
#  group 4  0000:00:1d.0  PCH root port
#  group 5  0000:01:00.0  the solo NVMe (nvme2), holding / and /boot/efi
#  groups 7, 8, 9: a Thunderbolt 3 10 GbE adapter (Titan Ridge bridges 0000:03:00.0 and
#           0000:04:01.0, Aquantia AQC100 0000:05:00.0 = enp5s0): removable, so type DMA
HOST_BRIDGE = Pci("0000:00:00.0", None, 0x8086, 0x9A14, 0x060000, None, 0)
USB4_PORT = Pci("0000:00:07.0", None, 0x8086, 0x9A23, 0x060400, "pcieport", 1)
USB4_NHI = Pci("0000:00:0d.2", None, 0x8086, 0x9A1B, 0x0C0340, "thunderbolt", 2, sub_vendor=0x8086, sub_device=0x0000)
SWITCH_ROOT_PORT = Pci("0000:00:1b.0", None, 0x8086, 0xA0C0, 0x060400, "pcieport", 3)
SOLO_ROOT_PORT = Pci("0000:00:1d.0", None, 0x8086, 0xA0B0, 0x060400, "pcieport", 4)
SOLO_NVME = Pci(
    "0000:01:00.0", "0000:00:1d.0", 0x15B7, 0x5006, 0x010802, "nvme", 5,
    sub_vendor=0x15B7, sub_device=0x5006,
    nvme_model="WDC WDS500G3X0C-00SJG0", nvme_serial="20071A800123", namespaces=(Namespace(partitions=2),))
SWITCH_UP = Pci("0000:70:00.0", "0000:00:1b.0", 0x1B21, 0x2824, 0x060400, "pcieport", 6)
SWITCH_DOWN0 = Pci("0000:71:00.0", "0000:70:00.0", 0x1B21, 0x2824, 0x060400, "pcieport", 6)
SWITCH_DOWN1 = Pci("0000:71:01.0", "0000:70:00.0", 0x1B21, 0x2824, 0x060400, "pcieport", 6)
NVME_A = Pci(
    "0000:72:00.0", "0000:71:00.0", 0x144D, 0xA808, 0x010802, "nvme", 6,
    sub_vendor=0x144D, sub_device=0xA801,
    nvme_model="Samsung SSD 970 EVO Plus 1TB", nvme_serial="S4EWNX0R100001", namespaces=(Namespace(),))
NVME_B = Pci(
    "0000:73:00.0", "0000:71:01.0", 0x144D, 0xA808, 0x010802, "nvme", 6,
    sub_vendor=0x144D, sub_device=0xA801,
    nvme_model="Samsung SSD 970 EVO Plus 1TB", nvme_serial="S4EWNX0R100002", namespaces=(Namespace(),))
TB_UP = Pci("0000:03:00.0", "0000:00:07.0", 0x8086, 0x15EF, 0x060400, "pcieport", 7, removable="removable")
TB_DOWN = Pci("0000:04:01.0", "0000:03:00.0", 0x8086, 0x15EF, 0x060400, "pcieport", 8, removable="removable")
NIC = Pci(
    "0000:05:00.0", "0000:04:01.0", 0x1D6A, 0x00B1, 0x020000, "atlantic", 9, removable="removable",
    sub_vendor=0x1D6A, sub_device=0x0001, revision=2, netdev="enp5s0", mac="00:17:b6:00:5a:01")

FIXED = (HOST_BRIDGE, USB4_PORT, USB4_NHI, SWITCH_ROOT_PORT, SOLO_ROOT_PORT, SWITCH_UP, SWITCH_DOWN0, SWITCH_DOWN1)
# The units that come and go, in the order the kernel adds their functions.
NIC_UNIT = (TB_UP, TB_DOWN, NIC)
PAIR_UNIT = (NVME_A, NVME_B)
SOLO_UNIT = (SOLO_NVME,)

# The Thunderbolt 3 adapter's router, as the thunderbolt driver shows it.
TB_ROUTER = "0-1"
TB_ROUTER_UUID = "d6010000-0072-7406-a23a-1c1d10f3e910"

DRIVER_MODULES = {"nvme": "nvme", "atlantic": "atlantic", "thunderbolt": "thunderbolt", "pcieport": None}
MODULE_PARAMS = {
    "nvme": {"io_queue_depth": ("1024", 0o644), "poll_queues": ("0", 0o644), "max_host_mem_size_mb": ("128", 0o644)},
    "atlantic": {"aq_itr": ("65535", 0o644), "aq_itr_rx": ("0", 0o644), "aq_itr_tx": ("0", 0o644)},
    "thunderbolt": {"start_icm": ("N", 0o444), "clx": ("Y", 0o444)},
}

# Policies the tests use: identity for the NVMe drives that share a group (when = "always",
# "hotplug", or absent: a domain change waits for hotplug by default), and identity for every
# NIC, which the planner must refuse for the untrusted Thunderbolt one.
def pair_identity_rule(when: str | None = None) -> str:
    return (
        '[[rule]]\nname = "nvme-pair-identity"\ndescription = "NVMe drives sharing a group: identity"\n'
        'domain = "identity"\naccept = ["no-isolation"]\n' + (f'when = "{when}"\n' if when else "")
        + '[rule.match]\nkind = "nvme"\nshares-group-with = "nvme"\n')


NIC_IDENTITY_RULE = (
    '[[rule]]\nname = "nic-identity"\n'
    'description = "Every NIC: identity, which the planner refuses for untrusted ones"\n'
    'domain = "identity"\naccept = ["no-isolation"]\n[rule.match]\nkind = "nic"\n')

PCI_ADDRESS = re.compile(rb"\s*([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*")
DOMAIN_TYPES = ("identity", "DMA-FQ", "DMA", "auto", "blocked")

IN_MODIFY = 0x02
IN_OPEN = 0x20
F_SETPIPE_SZ = 1031
PIPE_PAGE = 4096
FILLER = bytes(PIPE_PAGE)
IN_CLOSE_WRITE = 0x08
IN_IGNORED = 0x8000


def _murmur2(text: str) -> int:
    """systemd's string_hash32() (MurmurHash2, seed = length): the subsystem hash libudev's
    socket filter compares."""
    data = text.encode()
    m, h, n, i = 0x5BD1E995, len(data) & 0xFFFFFFFF, len(data), 0
    while n >= 4:
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
        i += 4
        n -= 4
    if n == 3:
        h ^= data[i + 2] << 16
    if n >= 2:
        h ^= data[i + 1] << 8
    if n >= 1:
        h ^= data[i]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def _dmar_table(flags: int) -> bytes:
    """An ACPI DMAR table without remapping structures: header, host address width, flags."""
    body = bytes([38, flags]) + bytes(10)
    header = bytearray(b"DMAR" + struct.pack("<I", 36 + len(body)) + bytes([1, 0]) + b"INTEL " + b"TGL-ULT "
                       + struct.pack("<I", 2) + b"INTL" + struct.pack("<I", 1))
    table = bytes(header) + body
    checksum = (-sum(table)) & 0xFF
    return table[:9] + bytes([checksum]) + table[10:]


class Host:
    """The testbed host. All public methods may be called while programs run under it."""

    def __init__(self, *, with_nic: bool = True, with_pair: bool = True, with_solo: bool = True,
                 send_timeout: float = 10.0, lossy_uevents: bool = False):
        if not os.path.isfile(SYNC_WRITES):
            raise SystemExit(f"IOMMUD_TESTBED_SYNC={SYNC_WRITES!r} names no file: set it to the testbed_sync_writes "
                             "module of a build (ctest does: build/lib/libtestbed_sync_writes.so)")
        self._lock = threading.RLock()
        self.testbed = UMockdev.Testbed.new()
        self.root = self.testbed.get_root_dir()
        self.run_dir = os.path.join(self.root, "iommud-run")  # iommuctl's (env()); an iommud has its own
        self.state_dir = os.path.join(self.root, "iommud-state")
        os.mkdir(self.run_dir, 0o700)
        os.mkdir(self.state_dir, 0o700)
        self.send_timeout = scaled(send_timeout)
        self.anomalies: list[str] = []  # what the kernel would have refused
        self.writes: list[tuple[str, str]] = []  # (file, value) of every bind/unbind/type write, in order
        self.events: list[tuple[str, str]] = []  # (action, devpath) of every uevent sent
        # A listener's queue that is full drops the uevent and the listener's next recvmsg() fails
        # with ENOBUFS, as a netlink socket's full receive buffer does (docs/kernel.md §12): the
        # queue of net.unix.max_dgram_qlen datagrams plays a deliberately small buffer.
        self.lossy_uevents = lossy_uevents
        self.dropped_uevents: list[tuple[str, str]] = []  # (action, devpath) of every uevent a listener lost
        self._seqnum = 1000
        self._ifindex = 4
        self._present: dict[str, Pci] = {}
        self._driver: dict[str, str | None] = {}
        # address -> (syspath, subsystem, dev) of the class devices its driver registered
        self._class_records: dict[str, list[tuple[str, str, str | None]]] = {}
        self._nvme_instance: dict[str, int] = {}
        self._minors: set[int] = set()
        self._group_types: dict[int, str] = {}
        self._failing_probes: set[str] = set()
        self._fixed_types: set[int] = set()
        self._core = _DriverCore(self)
        self._sender = _Sender(self)
        self._build_static()
        for spec in FIXED:
            self._add_pci(spec, announce=False)
        self._build_thunderbolt_domain()
        # Probe order at boot: the pair gets nvme0 and nvme1, the solo drive nvme2.
        if with_pair:
            self._add_unit(PAIR_UNIT, announce=False)
        if with_solo:
            self._add_unit(SOLO_UNIT, announce=False)
        if with_nic:
            self.add_nic(announce=False)
        self._core.start()
        self._sender.start()

    # --- environment -------------------------------------------------------------------------

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a program run under this testbed."""
        env = dict(os.environ)
        env["UMOCKDEV_DIR"] = self.root
        if PRELOAD not in env.get("LD_PRELOAD", ""):
            env["LD_PRELOAD"] = PRELOAD + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        if SYNC_WRITES not in env["LD_PRELOAD"]:  # first: its close() calls umockdev's
            env["LD_PRELOAD"] = SYNC_WRITES + ":" + env["LD_PRELOAD"]
        env["IOMMUD_TESTBED_ACKS"] = self._core.ack_dir
        if self.lossy_uevents:  # sync_writes.cpp then reports a drop as ENOBUFS
            env["IOMMUD_TESTBED_UEVENT_OVERFLOW"] = "1"
        # The preload and ASan's runtime both want to come first in the library list.
        asan = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "verify_asan_link_order=0"
        # iommuctl's lock, journal and records: this host's, never the machine's /run/iommud and
        # /var/lib/iommud (umockdev redirects neither).
        env["IOMMUD_RUNTIME_DIRECTORY"] = self.run_dir
        env["IOMMUD_STATE_DIRECTORY"] = self.state_dir
        env.update(extra)
        return env

    def path(self, host_path: str) -> str:
        """Where a host path ("/sys/...", "/proc/...") lives in the testbed directory."""
        return self.root + host_path

    def close(self) -> None:
        self._core.stop()
        self._sender.stop()
        self.testbed = None  # its finalizer removes the directory

    # --- what tests look at ------------------------------------------------------------------

    def group_type(self, group: int) -> str | None:
        try:
            with open(self.path(f"/sys/kernel/iommu_groups/{group}/type")) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def driver_of(self, address: str) -> str | None:
        """The driver the `driver` link names, None without one (or without the device)."""
        try:
            return os.path.basename(os.readlink(self.path(f"/sys/bus/pci/devices/{address}/driver")))
        except OSError:
            return None

    def uevent_driver(self, address: str) -> str | None:
        try:
            with open(self.path(f"/sys/bus/pci/devices/{address}/uevent")) as f:
                for line in f:
                    if line.startswith("DRIVER="):
                        return line.strip()[7:]
        except FileNotFoundError:
            pass
        return None

    def set_group_type(self, group: int, value: str) -> None:
        """Sets a group's type as someone else would (an admin, another tool), after the writes
        made so far; it stays out of `writes`."""
        with self._kernel_step():
            drivers = [self._driver[a] for a, s in self._present.items() if s.group == group]
            assert all(d in (None, "pcieport") for d in drivers), f"group {group} has drivers bound: {drivers}"
            self._core.show_type(group, value + "\n")
            self._group_types[group] = value

    def fail_probes(self, address: str, fail: bool = True) -> None:
        """From the writes made after this on, the driver's probe of the device fails (the
        kernel: the bind write returns the probe's error, no driver link)."""
        with self._kernel_step():
            (self._failing_probes.add if fail else self._failing_probes.discard)(address)

    def refuse_types(self, group: int, refuse: bool = True) -> None:
        """From the writes made after this on, the group's type cannot change (the kernel: a
        device that requires its domain type makes the write fail with EINVAL)."""
        with self._kernel_step():
            (self._fixed_types.add if refuse else self._fixed_types.discard)(group)

    def sync(self, timeout: float = 10.0) -> None:
        """Waits until the driver emulation has handled every write made so far."""
        self._core.sync(timeout)

    # --- hotplug -----------------------------------------------------------------------------

    def add_nic(self, announce: bool = True) -> None:
        """Plugs the Thunderbolt 10 GbE adapter: its router appears and is authorized, then the
        PCIe tunnel brings up its bridges and the NIC."""
        router = self._tb_router_path()
        with self._kernel_step():
            self._mkdev(router, "thunderbolt", {
                "authorized": "0", "device": "0x7", "device_name": "Solo 10G Thunderbolt 3 Edition",
                "vendor": "0x8", "vendor_name": "Sonnet Technologies, Inc.", "unique_id": TB_ROUTER_UUID,
                "generation": "3", "rx_lanes": "2", "rx_speed": "20.0 Gb/s", "tx_lanes": "2", "tx_speed": "20.0 Gb/s",
            }, {"DEVTYPE": "thunderbolt_device", "USB4_TYPE": "thunderbolt"}, bus=True)
            if announce:
                self.uevent(router, "add")
        with self._kernel_step():
            # boltd (or the user) authorizes it; the tunnel comes up.
            self._write(router + "/authorized", "1\n")
            if announce:
                self.uevent(router, "change")
        self._add_unit(NIC_UNIT, announce)

    def remove_nic(self) -> None:
        """Unplugs the adapter: pciehp removes the functions below the port, then the router goes."""
        self._remove_unit(NIC_UNIT, one_port=True)
        with self._kernel_step():
            router = self._tb_router_path()
            props = self._uevent_props(router)
            self._rmdev(router, "thunderbolt", bus=True)
            self.uevent(router, "remove", props)

    def add_pair(self) -> None:
        """Both drives, probed, before the first uevent of either is delivered."""
        with self.uevents_held():
            self._add_unit(PAIR_UNIT, True)

    def remove_pair(self) -> None:
        self._remove_unit(PAIR_UNIT, one_port=False)

    def add_solo(self) -> None:
        self._add_unit(SOLO_UNIT, True)

    def remove_solo(self) -> None:
        self._remove_unit(SOLO_UNIT, one_port=False)

    @contextlib.contextmanager
    def _kernel_step(self):
        """One step of the emulated kernel taken on the test's side (a device added, probed,
        unbound, removed). The writes programs made before it are handled first, so that the
        emulated kernel takes both in the order they happened (the real one takes a write when
        it is made); then the step runs under the lock."""
        if self._core.is_alive() and threading.current_thread() is not self._core:
            self.sync()
        with self._lock:
            yield

    # --- uevents -----------------------------------------------------------------------------

    def uevent(self, syspath: str, action: str, props: dict[str, str] | None = None) -> None:
        """Sends a uevent as udevd relays it to libudev listeners: the libudev header and
        ACTION, DEVPATH, SUBSYSTEM, SEQNUM, then the device's uevent properties (`props` for a
        device already gone). The message goes to the listeners there are now; a thread delivers
        it, in order, so that the emulated kernel never waits for a listener (as the real one
        never does: udevd relays, and libudev's socket buffer is 128 MiB)."""
        with self._lock:
            if props is None:
                props = self._uevent_props(syspath)
            subsystem = props.pop("SUBSYSTEM")
            self._seqnum += 1
            fields = [("ACTION", action), ("DEVPATH", syspath[len("/sys"):]), ("SUBSYSTEM", subsystem),
                      ("SEQNUM", str(self._seqnum))]
            for key, value in props.items():
                if key == "DEVNAME" and not value.startswith("/"):
                    value = "/dev/" + value  # udevd adds the prefix
                fields.append((key, value))
            fields.append(("USEC_INITIALIZED", str(int(time.monotonic() * 1e6))))
            body = b"".join(f"{k}={v}".encode() + b"\0" for k, v in fields)
            devtype = props.get("DEVTYPE")
            header = (b"libudev\0" + struct.pack("!I", 0xFEEDCAFE) + struct.pack("=III", 40, 40, len(body))
                      + struct.pack("!IIII", _murmur2(subsystem), _murmur2(devtype) if devtype else 0, 0, 0))
            self.events.append((action, syspath))
            listeners = [os.path.join(self.root, n) for n in sorted(os.listdir(self.root))
                         if re.fullmatch(r"event[0-9]+", n)]
            self._sender.put(listeners, header + body)

    @contextlib.contextmanager
    def uevents_held(self):
        """Holds the uevents back while the block runs, then delivers them in order: whatever
        the block does to sysfs is all there before a listener hears of its first step. (Two
        drives plugged at once are both probed before the daemon's debounce of the first can
        end, however slowly the block runs.)"""
        self._sender.hold(True)
        try:
            yield
        finally:
            self._sender.hold(False)

    @contextlib.contextmanager
    def write_held(self, action: str, nth: int = 1):
        """Holds the `nth` next write to a driver's `action` file (bind, unbind) before it takes
        effect: its writer blocks in
        write() (the FIFO stays full) until the block ends, as a probe that takes its time would
        hold it on a real kernel. `wait()` on the object yielded returns once a writer is held;
        `release(writer_killed=True)` says that its writer was killed meanwhile: it wrote nothing,
        and its close is no write (no anomaly)."""
        hold = self._core.hold_write(action, nth)
        try:
            yield hold
        finally:
            hold.release()

    def flush(self, timeout: float = 30.0) -> None:
        """Waits until every uevent sent so far is delivered."""
        self._sender.flush(timeout)

    def settle(self, timeout: float = 30.0) -> None:
        """Waits until the driver emulation has handled every write so far and its uevents are
        delivered."""
        self.sync(timeout)
        self.flush(timeout)

    # --- building ----------------------------------------------------------------------------

    def _write(self, host_path: str, content: str | bytes, mode: int | None = None) -> None:
        p = self.path(host_path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
        if mode is not None:
            os.chmod(p, mode)

    def _link(self, target_host_path: str, link_host_path: str) -> None:
        """A relative symlink, as sysfs makes them."""
        link = self.path(link_host_path)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        rel = os.path.relpath(target_host_path, os.path.dirname(link_host_path))
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(rel, link)

    def _unlink(self, host_path: str) -> None:
        try:
            os.unlink(self.path(host_path))
        except FileNotFoundError:
            pass

    def _build_static(self) -> None:
        w = self._write
        w("/proc/sys/kernel/osrelease", KERNEL_RELEASE + "\n")
        w("/proc/version", f"Linux version {KERNEL_RELEASE} (iommud@tests) (gcc (GCC) 12.2.0) #1 SMP PREEMPT_DYNAMIC\n")
        # Present and empty: an Ubuntu runner's own must not leak in.
        w("/proc/version_signature", "")
        w("/proc/cmdline", f"BOOT_IMAGE=/boot/vmlinuz-{KERNEL_RELEASE} "
                           "root=UUID=0f3c9a3e-5b1d-4c1e-9d55-3b8f6f1a2c7e ro quiet\n")
        w("/proc/config.gz", gzip.compress(KERNEL_CONFIG.encode()))
        w("/proc/self/mountinfo", "".join([
            "21 26 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n",
            "22 26 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n",
            "23 26 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw,size=16306896k,mode=755\n",
            "25 26 0:23 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,size=3266688k,mode=755\n",
            f"26 1 {BLOCK_EXT_MAJOR}:4 / / rw,relatime shared:1 - ext4 /dev/nvme2n1p2 rw,errors=remount-ro\n",
            f"31 26 {BLOCK_EXT_MAJOR}:3 / /boot/efi rw,relatime shared:31 - vfat /dev/nvme2n1p1 rw,fmask=0077\n",
        ]))
        w("/proc/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
        w("/proc/net/route", "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n")
        w("/proc/net/ipv6_route", "")
        w("/proc/net/if_inet6", "00000000000000000000000000000001 01 80 10 80       lo\n")

        # ACPI: DMAR with the platform opt-in flag (bit 2) and interrupt remapping (bit 0).
        for table in ("APIC", "DSDT", "FACP", "HPET", "MCFG"):
            w(f"/sys/firmware/acpi/tables/{table}", table.encode() + bytes(32), 0o400)
        w("/sys/firmware/acpi/tables/DMAR", _dmar_table(0x05), 0o400)

        unit = "/sys/devices/virtual/iommu/dmar0"
        w(unit + "/intel-iommu/cap", DMAR_CAP + "\n", 0o444)
        w(unit + "/intel-iommu/ecap", DMAR_ECAP + "\n", 0o444)
        w(unit + "/intel-iommu/version", "1:0\n", 0o444)
        w(unit + "/intel-iommu/address", "fed91000\n", 0o444)
        w(unit + "/uevent", "")
        self._link("/sys/class/iommu", unit + "/subsystem")
        self._link(unit, "/sys/class/iommu/dmar0")
        os.makedirs(self.path(unit + "/devices"), exist_ok=True)
        os.makedirs(self.path("/sys/kernel/iommu_groups"), exist_ok=True)

        w("/sys/kernel/debug/swiotlb/io_tlb_nslabs", "32768\n", 0o400)
        w("/sys/kernel/debug/swiotlb/io_tlb_used", "0\n", 0o400)
        w("/sys/kernel/debug/swiotlb/io_tlb_used_hiwater", "1210\n", 0o400)

        os.makedirs(self.path("/sys/devices/pci0000:00"), exist_ok=True)
        w("/sys/devices/pci0000:00/uevent", "")
        for d in ("/sys/class/net", "/sys/class/nvme", "/sys/class/block", "/sys/block", "/sys/dev/block",
                  "/sys/dev/char", "/sys/bus/thunderbolt/devices"):
            os.makedirs(self.path(d), exist_ok=True)

        for driver, module in DRIVER_MODULES.items():
            base = f"/sys/bus/pci/drivers/{driver}"
            os.makedirs(self.path(base), exist_ok=True)
            w(base + "/uevent", "", 0o200)
            w(base + "/new_id", "", 0o200)
            w(base + "/remove_id", "", 0o200)
            for action in ("bind", "unbind"):
                self._core.add_fifo(self.path(f"{base}/{action}"), driver, action)
            if module:
                mod = f"/sys/module/{module}"
                w(mod + "/initstate", "live\n", 0o444)
                w(mod + "/refcnt", "0\n", 0o444)
                for name, (value, perms) in MODULE_PARAMS.get(module, {}).items():
                    w(f"{mod}/parameters/{name}", value + "\n", perms)
                self._link(mod, base + "/module")
                self._link(base, f"{mod}/drivers/pci:{driver}")

    def _build_thunderbolt_domain(self) -> None:
        # The Thunderbolt domain and the host's own router live below the NHI.
        nhi = self._pci_syspath(USB4_NHI)
        self._mkdev(nhi + "/domain0", "thunderbolt", {
            "security": "user", "iommu_dma_protection": "1", "deauthorization": "1", "boot_acl": ",,,,,,,,,,,,,,,",
        }, {"DEVTYPE": "thunderbolt_domain"}, bus=True)
        self._mkdev(nhi + "/domain0/0-0", "thunderbolt", {
            "authorized": "1", "device": "0x9a1b", "device_name": "Tiger Lake", "vendor": "0x8087",
            "vendor_name": "Intel", "unique_id": "a8b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d", "generation": "4",
        }, {"DEVTYPE": "thunderbolt_device", "USB4_VERSION": "1.0"}, bus=True)

    def _tb_router_path(self) -> str:
        return self._pci_syspath(USB4_NHI) + "/domain0/0-0/" + TB_ROUTER

    def _mkdev(self, syspath: str, subsystem: str, attrs: dict[str, str], props: dict[str, str],
               bus: bool = False, dev: str | None = None) -> None:
        """A device directory: uevent, attributes, the subsystem link and the bus's devices/ or
        the class's entry, /sys/dev/. Not UMockdev.Testbed.add_device(): 0.17.16 sends an `add`
        uevent of its own from it (before the device is complete, out of order with ours, and
        through the sender that aborts on a full queue), and has no variant that does not."""
        name = os.path.basename(syspath)
        os.makedirs(self.path(syspath))
        self._write(syspath + "/uevent", "".join(f"{k}={v}\n" for k, v in props.items()))
        for k, v in attrs.items():
            self._write(f"{syspath}/{k}", v if v.endswith("\n") or v == "" else v + "\n")
        if bus:
            self._link(f"/sys/bus/{subsystem}", syspath + "/subsystem")
            self._link(syspath, f"/sys/bus/{subsystem}/devices/{name}")
        else:
            self._link(f"/sys/class/{subsystem}", syspath + "/subsystem")
            self._link(syspath, f"/sys/class/{subsystem}/{name}")
        if dev is not None:
            self._write(syspath + "/dev", dev + "\n")
            self._link(syspath, f"/sys/dev/{'block' if subsystem == 'block' else 'char'}/{dev}")

    def _rmdev(self, syspath: str, subsystem: str, bus: bool = False, dev: str | None = None) -> None:
        name = os.path.basename(syspath)
        self._unlink(f"/sys/bus/{subsystem}/devices/{name}" if bus else f"/sys/class/{subsystem}/{name}")
        if subsystem == "block":
            self._unlink(f"/sys/block/{name}")
        if dev is not None:
            self._unlink(f"/sys/dev/{'block' if subsystem == 'block' else 'char'}/{dev}")
        shutil.rmtree(self.path(syspath), ignore_errors=True)

    def _uevent_props(self, syspath: str) -> dict[str, str]:
        props = {}
        with open(self.path(syspath + "/uevent")) as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    props[key] = value
        props["SUBSYSTEM"] = os.path.basename(os.readlink(self.path(syspath + "/subsystem")))
        return props

    # --- PCI functions -----------------------------------------------------------------------

    def _pci_syspath(self, spec: Pci) -> str:
        chain = [spec.address]
        parent = spec.parent
        by_address = {p.address: p for p in FIXED + NIC_UNIT + PAIR_UNIT + SOLO_UNIT}
        while parent:
            chain.insert(0, parent)
            parent = by_address[parent].parent
        return "/sys/devices/pci0000:00/" + "/".join(chain)

    def _pci_uevent(self, spec: Pci, driver: str | None) -> str:
        lines = [f"DRIVER={driver}"] if driver else []
        lines += [
            f"PCI_CLASS={spec.class_code:X}",
            f"PCI_ID={spec.vendor:04X}:{spec.device:04X}",
            f"PCI_SUBSYS_ID={spec.sub_vendor:04X}:{spec.sub_device:04X}",
            f"PCI_SLOT_NAME={spec.address}",
            "MODALIAS=pci:v{:08X}d{:08X}sv{:08X}sd{:08X}bc{:02X}sc{:02X}i{:02X}".format(
                spec.vendor, spec.device, spec.sub_vendor, spec.sub_device,
                spec.class_code >> 16, (spec.class_code >> 8) & 0xFF, spec.class_code & 0xFF),
        ]
        return "\n".join(lines) + "\n"

    def _add_unit(self, unit: tuple[Pci, ...], announce: bool) -> None:
        for spec in unit:
            self._add_pci(spec, announce)

    def _remove_unit(self, unit: tuple[Pci, ...], one_port: bool) -> None:
        """Below one hotplug port, pciehp stops every function (drivers unbound, deepest
        first), then removes them, deepest first; drives in separate bays go one by one."""
        present = [s for s in unit if s.address in self._present]
        if one_port:
            present.reverse()
            for spec in present:
                with self._kernel_step():
                    if self._driver.get(spec.address):
                        self._unbind(spec.address)
        for spec in present:
            with self._kernel_step():
                if self._driver.get(spec.address):
                    self._unbind(spec.address)
            with self._kernel_step():
                self._remove_pci(spec)

    def _add_pci(self, spec: Pci, announce: bool) -> None:
        """device_add(): the IOMMU group first (iommu_probe_device runs on BUS_NOTIFY_ADD_DEVICE,
        before the uevent), the `add` uevent, then the driver's probe and `bind`."""
        with self._kernel_step():
            self._create_pci(spec, announce)
        if spec.driver:
            with self._kernel_step():
                self._bind(spec.driver, spec.address, announce)

    def _create_pci(self, spec: Pci, announce: bool) -> None:
        assert spec.address not in self._present, f"{spec.address} is already present"
        path = self._pci_syspath(spec)
        attrs = {
            "vendor": f"0x{spec.vendor:04x}", "device": f"0x{spec.device:04x}",
            "subsystem_vendor": f"0x{spec.sub_vendor:04x}", "subsystem_device": f"0x{spec.sub_device:04x}",
            "class": f"0x{spec.class_code:06x}", "revision": f"0x{spec.revision:02x}",
            "removable": spec.removable, "enable": "1", "numa_node": "-1", "d3cold_allowed": "1",
            "msi_bus": "1", "power_state": "D0", "current_link_speed": "8.0 GT/s PCIe", "current_link_width": "4",
            "max_link_speed": "8.0 GT/s PCIe", "max_link_width": "4",
        }
        if spec.is_bridge:
            bus = int(spec.address[5:7], 16)
            attrs["secondary_bus_number"] = str(bus + 1)
            attrs["subordinate_bus_number"] = str(bus + 1)
        self._mkdev(path, "pci", attrs, {}, bus=True)
        self._write(path + "/uevent", self._pci_uevent(spec, None))
        self._present[spec.address] = spec
        self._driver[spec.address] = None

        group = f"/sys/kernel/iommu_groups/{spec.group}"
        if spec.group not in self._group_types:
            default = "DMA" if spec.untrusted else "DMA-FQ"  # untrusted devices get strict DMA
            self._write(group + "/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n", 0o444)
            self._write(group + "/type", default + "\n", 0o644)
            self._group_types[spec.group] = default
            self._core.add_type_file(self.path(group + "/type"), spec.group)
        self._link(path, f"{group}/devices/{spec.address}")
        self._link(group, path + "/iommu_group")
        self._link("/sys/devices/virtual/iommu/dmar0", path + "/iommu")
        self._link(path, f"/sys/devices/virtual/iommu/dmar0/devices/{spec.address}")
        if announce:
            self.uevent(path, "add")

    def _remove_pci(self, spec: Pci) -> None:
        """The device is gone from sysfs (and from its group) when a listener behind udevd
        hears its `remove`; an emptied group is freed."""
        path = self._pci_syspath(spec)
        props = self._uevent_props(path)
        group = f"/sys/kernel/iommu_groups/{spec.group}"
        self._unlink(f"{group}/devices/{spec.address}")
        self._unlink(f"/sys/devices/virtual/iommu/dmar0/devices/{spec.address}")
        self._unlink(f"/sys/bus/pci/devices/{spec.address}")
        shutil.rmtree(self.path(path), ignore_errors=True)
        del self._present[spec.address]
        del self._driver[spec.address]
        if not os.listdir(self.path(group + "/devices")):
            self._core.remove_type_file(spec.group)
            shutil.rmtree(self.path(group), ignore_errors=True)
            del self._group_types[spec.group]
        self.uevent(path, "remove", props)

    # --- the kernel's side of bind and unbind ------------------------------------------------

    def _bind(self, driver: str, address: str, announce: bool = True) -> str | None:
        """really_probe(): links, the class devices the probe registers, `bind`. Returns what
        the kernel would refuse with, or None."""
        with self._lock:
            spec = self._present.get(address)
            if spec is None:
                return "ENODEV: no such device"
            if self._driver[address]:
                return f"EBUSY: already bound to {self._driver[address]}"
            if driver != spec.driver:
                return f"ENODEV: {driver} does not match the device"
            if address in self._failing_probes:
                return "ENXIO: the probe failed (as the test asked)"
            path = self._pci_syspath(spec)
            self._link(f"/sys/bus/pci/drivers/{driver}", path + "/driver")
            self._link(path, f"/sys/bus/pci/drivers/{driver}/{address}")
            self._write(path + "/uevent", self._pci_uevent(spec, driver))
            self._driver[address] = driver
            created: list[tuple[str, str, str | None]] = []
            later: list[tuple[str, str, str | None]] = []
            if spec.netdev:
                created.append(self._add_netdev(spec, path))  # register_netdev() in probe
            if spec.nvme_model:
                ctrl = self._add_nvme_ctrl(spec, path)  # nvme_init_ctrl() in probe
                created.append(ctrl)
                later += self._add_namespaces(spec, ctrl[0])  # the scan work, after probe
            if announce:
                for syspath, _, _ in created:
                    self.uevent(syspath, "add")
                self.uevent(path, "bind")
                for syspath, _, _ in later:
                    self.uevent(syspath, "add")
            self._class_records[address] = created + later
            return None

    def _unbind(self, address: str, driver: str | None = None) -> str | None:
        """device_release_driver(): the driver's remove() unregisters its class devices
        (namespaces first), then the links go and `unbind` is sent."""
        with self._lock:
            spec = self._present.get(address)
            if spec is None:
                return "ENODEV: no such device"
            bound = self._driver[address]
            if bound is None or (driver is not None and bound != driver):
                return f"ENODEV: not bound to {driver}"
            path = self._pci_syspath(spec)
            for syspath, subsystem, dev in reversed(self._class_records.get(address, [])):
                props = self._uevent_props(syspath)
                self._rmdev(syspath, subsystem, dev=dev)
                if subsystem == "nvme":
                    self._nvme_instance.pop(address, None)
                if subsystem == "block" and dev:
                    self._minors.discard(int(dev.split(":")[1]))
                self.uevent(syspath, "remove", props)
            self._class_records[address] = []
            self._unlink(path + "/driver")
            self._unlink(f"/sys/bus/pci/drivers/{bound}/{address}")
            self._write(path + "/uevent", self._pci_uevent(spec, None))
            self._driver[address] = None
            self.uevent(path, "unbind")
            return None

    def _add_netdev(self, spec: Pci, pci_path: str) -> tuple[str, str, str | None]:
        self._ifindex += 1
        path = f"{pci_path}/net/{spec.netdev}"
        self._mkdev(path, "net", {
            "address": spec.mac, "addr_len": "6", "addr_assign_type": "0", "broadcast": "ff:ff:ff:ff:ff:ff",
            "dev_id": "0x0", "flags": "0x1002", "ifindex": str(self._ifindex), "iflink": str(self._ifindex),
            "mtu": "1500", "operstate": "down", "type": "1", "tx_queue_len": "1000", "name_assign_type": "4",
        }, {"INTERFACE": spec.netdev, "IFINDEX": str(self._ifindex)})
        self._link(pci_path, path + "/device")
        return (path, "net", None)

    def _add_nvme_ctrl(self, spec: Pci, pci_path: str) -> tuple[str, str, str | None]:
        used = set(self._nvme_instance.values())
        instance = next(i for i in range(64) if i not in used)
        self._nvme_instance[spec.address] = instance
        name = f"nvme{instance}"
        path = f"{pci_path}/nvme/{name}"
        dev = f"{NVME_CHAR_MAJOR}:{instance}"
        self._mkdev(path, "nvme", {
            "model": f"{spec.nvme_model:<40}", "serial": f"{spec.nvme_serial:<20}", "firmware_rev": "2B2QEXM7",
            "address": spec.address, "transport": "pcie", "state": "live", "cntlid": "0", "numa_node": "-1",
            "queue_count": "9", "sqsize": "1023",
            "subsysnqn": f"nqn.2014.08.org.nvmexpress:{spec.vendor:04x}{spec.sub_vendor:04x}{spec.nvme_serial}",
        }, {"MAJOR": str(NVME_CHAR_MAJOR), "MINOR": str(instance), "DEVNAME": name, "NVME_TRTYPE": "pcie"}, dev=dev)
        self._link(pci_path, path + "/device")
        return (path, "nvme", dev)

    def _minor(self) -> int:
        minor = next(i for i in range(1024) if i not in self._minors)
        self._minors.add(minor)
        return minor

    def _add_namespaces(self, spec: Pci, ctrl_path: str) -> list[tuple[str, str, str | None]]:
        out = []
        ctrl = os.path.basename(ctrl_path)
        for n, ns in enumerate(spec.namespaces, start=1):
            disk = f"{ctrl}n{n}"
            minor = self._minor()
            dev = f"{BLOCK_EXT_MAJOR}:{minor}"
            path = f"{ctrl_path}/{disk}"
            self._mkdev(path, "block", {
                "size": "1953525168", "ro": "0", "removable": "0", "range": "0", "ext_range": "256",
                "capability": "0", "nsid": str(n), "wwid": f"eui.0025385{n}91b0{minor:04x}",
            }, {"MAJOR": str(BLOCK_EXT_MAJOR), "MINOR": str(minor), "DEVNAME": disk, "DEVTYPE": "disk",
                "DISKSEQ": str(minor + 1)}, dev=dev)
            os.makedirs(self.path(path + "/holders"), exist_ok=True)
            os.makedirs(self.path(path + "/slaves"), exist_ok=True)
            self._link(path, f"/sys/block/{disk}")
            out.append((path, "block", dev))
            for p in range(1, ns.partitions + 1):
                part = f"{disk}p{p}"
                pminor = self._minor()
                pdev = f"{BLOCK_EXT_MAJOR}:{pminor}"
                ppath = f"{path}/{part}"
                self._mkdev(ppath, "block", {"partition": str(p), "start": str(2048 * p), "size": "1048576", "ro": "0"},
                            {"MAJOR": str(BLOCK_EXT_MAJOR), "MINOR": str(pminor), "DEVNAME": part,
                             "DEVTYPE": "partition", "PARTN": str(p), "DISKSEQ": str(minor + 1)}, dev=pdev)
                os.makedirs(self.path(ppath + "/holders"), exist_ok=True)
                out.append((ppath, "block", pdev))
        return out

    # --- what the driver core thread calls ---------------------------------------------------

    def _driver_write(self, driver: str, action: str, value: bytes) -> None:
        m = PCI_ADDRESS.fullmatch(value)
        text = value.decode(errors="replace")
        self.writes.append((f"/sys/bus/pci/drivers/{driver}/{action}", text.strip()))
        if not m:
            self.anomalies.append(f"{driver}/{action} <- {text!r}: not a PCI address (the kernel: ENODEV)")
            return
        address = m.group(1).decode().lower()
        refused = self._bind(driver, address) if action == "bind" else self._unbind(address, driver)
        if refused:
            self.anomalies.append(f"{driver}/{action} <- {address}: the kernel would fail it with {refused}")

    def _type_written(self, group: int) -> None:
        """iommu_group_store_type() on 6.12, for a write just closed: the file shows what the
        kernel would show afterwards."""
        with self._lock:
            old = self._group_types.get(group)
            if old is None:
                return
            content = self._core.read_type(group)
            value = _written_value(content, old)
            self.writes.append((f"/sys/kernel/iommu_groups/{group}/type", value or content))
            members = [a for a, s in self._present.items() if s.group == group]
            refused = None
            if value is None:
                refused = "EINVAL: not a domain type"
            elif value == "DMA-FQ" and old == "DMA":
                pass  # the live upgrade: 6.4+ checks neither drivers nor trust
            else:
                bound = [a for a in members if self._driver[a] not in (None, "pcieport")]
                if value == "blocked":
                    refused = "EINVAL: not writable"
                elif group in self._fixed_types and value != old:
                    refused = "EINVAL: a device requires the group's type (as the test asked)"
                elif bound:
                    refused = f"EPERM: {', '.join(bound)} still bound"
                elif value != "DMA" and value != "auto" and any(self._present[a].untrusted for a in members):
                    refused = f"EINVAL: {value} for an untrusted device"
            if refused:
                self.anomalies.append(f"group {group} type <- {value or content!r}: the kernel would fail it with {refused}")
                value = old
            elif value == "auto":
                value = "DMA-FQ"
            self._group_types[group] = value
            if content != value + "\n":
                self._core.show_type(group, value + "\n")


def _written_value(content: str, old: str) -> str | None:
    """What a write at offset 0 without O_TRUNC put over `old`+"\\n" to give `content`. Where
    the content allows both, the value stays: "DMA" written over "DMA-FQ\\n" leaves the file as
    it was and is taken for "DMA-FQ" (a limit of plain files; the tests never write it)."""
    before = old + "\n"
    candidates = []
    for v in DOMAIN_TYPES:
        for w in (v + "\n", v):
            if content == w + before[len(w):]:
                candidates.append(v)
    if not candidates:
        return None
    return old if old in candidates else candidates[0]


class _WriteHold:
    """One held write to a driver's bind or unbind file (Host.write_held)."""

    def __init__(self, action: str, nth: int):
        self.action = action
        self.skip = nth - 1  # writes to let through first
        self.held = threading.Event()
        self.released = threading.Event()
        self.writer_killed = False

    def wait(self, timeout: float = 10.0) -> None:
        if not self.held.wait(scaled(timeout)):
            raise AssertionError(f"no write to an {self.action} file within {scaled(timeout):g} s")

    def release(self, writer_killed: bool = False) -> None:
        if not self.released.is_set():
            self.writer_killed = writer_killed
        self.released.set()


class _DriverCore(threading.Thread):
    """Reads the FIFOs and watches the type files, in the order of the writes: inotify reports
    each open and each close of a written FIFO, and each write and each close of a written type
    file, and two different events in a row are never merged, so every IN_CLOSE_WRITE stands for
    one write. A type file is not watched for opens: a program that only reads it (iommud reads
    every group's at every read of the host) wakes nothing here, as on a kernel."""

    def __init__(self, host: Host):
        super().__init__(name="driver-core", daemon=True)
        self._host = host
        libc = ctypes.CDLL(None, use_errno=True)
        self._add_watch = libc.inotify_add_watch
        self._add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._rm_watch = libc.inotify_rm_watch
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._wake_r, self._wake_w = os.pipe()
        self._fifos: dict[int, tuple[int, str, str, bytearray]] = {}  # wd -> (fd, driver, action, buffer)
        self._types: dict[int, int] = {}  # wd -> group
        self._type_files: dict[int, tuple[int, int]] = {}  # group -> (wd, fd)
        # wd -> (the FIFO sync_writes.cpp waits on in a writer's close(2), our fd on it)
        self._acks: dict[int, tuple[str, int]] = {}
        self.ack_dir = os.path.join(host.root, "acks")
        os.mkdir(self.ack_dir, 0o700)
        self._stopping = False
        self._idle = threading.Condition()
        self._pending = 0  # events read and not handled yet
        self._hold: _WriteHold | None = None  # a write to hold
        self._killed_writers: set[int] = set()  # FIFOs whose held writer was killed: its close is next

    def hold_write(self, action: str, nth: int) -> _WriteHold:
        self._hold = _WriteHold(action, nth)
        return self._hold

    def _watch(self, path: str, mask: int) -> int:
        wd = self._add_watch(self._fd, path.encode(), mask)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
        st = os.stat(path)
        ack = os.path.join(self.ack_dir, f"{st.st_dev}-{st.st_ino}")
        os.mkfifo(ack, 0o600)
        self._acks[wd] = (ack, os.open(ack, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC))
        return wd

    def _unwatch(self, wd: int) -> None:
        self._rm_watch(self._fd, wd)
        ack, fd = self._acks.pop(wd)
        os.close(fd)
        os.unlink(ack)

    def _acknowledge(self, wd: int) -> None:
        """The writer's close(2) returns (sync_writes.cpp): its write has taken effect."""
        if wd in self._acks:
            os.write(self._acks[wd][1], b"a")

    def add_fifo(self, path: str, driver: str, action: str) -> None:
        """A bind or unbind file: a FIFO of one page, kept full. A writer blocks in write()
        until the open it made is handled here, so that every write waits until the ones
        before it have taken effect; the kernel takes each write before write() returns."""
        os.mkfifo(path, 0o600)
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)  # ours: read end and filler
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_PAGE)
        os.write(fd, FILLER)
        os.chmod(path, 0o200)  # as sysfs shows it
        self._fifos[self._watch(path, IN_OPEN | IN_CLOSE_WRITE)] = (fd, driver, action, bytearray())

    @staticmethod
    def _drain(fd: int, buf: bytearray) -> None:
        """Reads what the FIFO holds; the writers' bytes go to `buf`, the filler away."""
        while True:
            try:
                chunk = os.read(fd, PIPE_PAGE)
            except BlockingIOError:
                return
            if not chunk:
                return
            buf += chunk.replace(b"\0", b"")

    def _refill(self, fd: int, buf: bytearray) -> None:
        """Fills the FIFO again, so that the next writer blocks until its open is handled."""
        while True:
            self._drain(fd, buf)
            try:
                os.write(fd, FILLER)  # all or nothing: a pipe write of at most PIPE_BUF
                return
            except BlockingIOError:
                continue  # a writer got in first; take its bytes too

    def add_type_file(self, path: str, group: int) -> None:
        # Opened before the watch and never closed while watched: writes through this fd
        # raise no IN_CLOSE_WRITE, so the emulation's own writes are not taken for a writer's
        # (their IN_MODIFY is read and passed over).
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        wd = self._watch(path, IN_MODIFY | IN_CLOSE_WRITE)
        self._types[wd] = group
        self._type_files[group] = (wd, fd)

    def remove_type_file(self, group: int) -> None:
        wd, fd = self._type_files.pop(group)
        self._types.pop(wd, None)
        self._unwatch(wd)
        os.close(fd)

    def read_type(self, group: int) -> str:
        return os.pread(self._type_files[group][1], 4096, 0).decode(errors="replace")

    def show_type(self, group: int, content: str) -> None:
        """Replaces the file's content. A shorter value is padded with newlines before the file
        is cut, so that a reader in between sees the new value (trailing whitespace aside)."""
        fd = self._type_files[group][1]
        data = content.encode()
        size = os.fstat(fd).st_size
        os.pwrite(fd, data + b"\n" * max(0, size - len(data)), 0)
        os.ftruncate(fd, len(data))

    def stop(self) -> None:
        self._stopping = True
        os.write(self._wake_w, b"x")
        if self.is_alive():
            self.join(scaled(10))
        for fd, _, _, _ in self._fifos.values():
            os.close(fd)
        for _, fd in self._acks.values():
            os.close(fd)
        for _, fd in self._type_files.values():
            os.close(fd)
        os.close(self._fd)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def sync(self, timeout: float) -> None:
        """Returns once every event inotify has queued so far is handled."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            with self._idle:
                if self._pending == 0 and not select.select([self._fd], [], [], 0)[0]:
                    return
                self._idle.wait(0.01)
            if time.monotonic() > deadline:
                raise AssertionError("the driver emulation did not catch up")

    def run(self) -> None:
        while not self._stopping:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            with self._idle:  # sync() must not see the events between the read and the count
                try:
                    data = os.read(self._fd, 65536)
                except BlockingIOError:
                    continue
                events = []
                off = 0
                while off < len(data):
                    wd, mask, _cookie, length = struct.unpack_from("iIII", data, off)
                    off += 16 + length
                    events.append((wd, mask))
                self._pending += len(events)
            for wd, mask in events:
                try:
                    self._handle(wd, mask)
                except Exception as e:  # keep the kernel alive; the test sees the anomaly
                    self._host.anomalies.append(f"driver emulation failed: {e!r}")
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _handle(self, wd: int, mask: int) -> None:
        if wd in self._fifos:
            fd, driver, action, buf = self._fifos[wd]
            if mask & IN_OPEN and self._hold is not None and action == self._hold.action and self._hold.skip:
                self._hold.skip -= 1
            elif mask & IN_OPEN and self._hold is not None and action == self._hold.action:
                hold, self._hold = self._hold, None
                hold.held.set()
                hold.released.wait(scaled(60))  # the writer waits in write(), the FIFO still full
                if hold.writer_killed:  # it wrote nothing; its close (next) is no write, and the
                    self._killed_writers.add(wd)  # FIFO stays full for the next writer
                    return
            if wd in self._killed_writers and mask & IN_CLOSE_WRITE:
                self._killed_writers.discard(wd)
                return
            if mask & IN_OPEN:
                self._drain(fd, buf)  # room for the writer that opened: its write() goes through
            if not mask & IN_CLOSE_WRITE:
                return
            self._refill(fd, buf)
            # One write per close: the first address in the stream is this write's.
            m = PCI_ADDRESS.match(buf)
            if m:
                value = bytes(m.group(0))
                del buf[:m.end()]
            else:
                value = bytes(buf)
                buf.clear()
            try:
                self._host._driver_write(driver, action, value)
            finally:
                self._acknowledge(wd)
        elif wd in self._types and mask & IN_CLOSE_WRITE:
            try:
                self._host._type_written(self._types[wd])
            finally:
                self._acknowledge(wd)


class _Sender(threading.Thread):
    """Delivers uevents in order. A listener whose queue is full (net.unix.max_dgram_qlen, 10
    by default) makes it wait, up to the host's send_timeout (with lossy_uevents: loses the
    uevent and flags the overflow); one that is closed is dropped, as umockdev does."""

    def __init__(self, host: Host):
        super().__init__(name="uevent-sender", daemon=True)
        self._host = host
        self._queue: list[tuple[list[str], bytes] | None] = []
        self._cond = threading.Condition()
        self._busy = False
        self._held = 0

    def hold(self, held: bool) -> None:
        with self._cond:
            self._held += 1 if held else -1
            self._cond.notify_all()

    def put(self, listeners: list[str], message: bytes) -> None:
        with self._cond:
            self._queue.append((listeners, message))
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._queue.append(None)
            self._cond.notify_all()
        if self.is_alive():
            self.join(self._host.send_timeout + 5)

    def flush(self, timeout: float) -> None:
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            assert not self._held, "flush() while the uevents are held would wait for ever"
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self._queue)} uevents still undelivered after {timeout:g} s")
                self._cond.wait(left)

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._queue or (self._held and self._queue[0] is not None):
                    self._cond.wait()
                item = self._queue.pop(0)
                self._busy = item is not None
            if item is None:
                return
            listeners, message = item
            for listener in listeners:
                self._send(listener, message)
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _send(self, listener: str, message: bytes) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            s.settimeout(0 if self._host.lossy_uevents else self._host.send_timeout)
            try:
                s.connect(listener)
                s.send(message)
            except BlockingIOError:
                # Lossy: the listener's queue is full. The kernel drops the message for that
                # socket and flags it (netlink_overrun()); the flag file is what the preload turns
                # into one ENOBUFS at the listener's next recvmsg().
                fields = dict(f.split(b"=", 1) for f in message[40:].split(b"\0") if b"=" in f)
                self._host.dropped_uevents.append((fields[b"ACTION"].decode(), fields[b"DEVPATH"].decode()))
                with open(listener + "-overflow", "w"):
                    pass
            except (ConnectionRefusedError, FileNotFoundError):
                # The monitor was closed (its process ended): umockdev drops such sockets too.
                try:
                    os.unlink(listener)
                except FileNotFoundError:
                    pass
            except socket.timeout:
                self._host.anomalies.append(
                    f"the uevent listener at {listener} read nothing for {self._host.send_timeout:g} s; dropped an event")
        finally:
            s.close()
