"""Boot a real Debian kernel under QEMU (q35) for iommud's real-kernel tests.

The guest's root is the host's root, shared read-only over virtio-9p, with a
tmpfs overlay for writes: the guest runs the freshly built binaries with all
their libraries and needs no image.  A second 9p share (``/vm`` in the guest)
is private to one boot and carries the test script in and results out.

Typical use (see README.md for more)::

    import vmlib
    kernel = vmlib.find_kernel("6.12")
    machine = vmlib.Machine(iommu="intel", caching_mode=True,
                            devices=["nvme-solo", "e1000e"])
    result = vmlib.boot(kernel, machine, script="#!/bin/bash\\nlspci\\n")
    result.check()                     # raises if the guest script failed
    print(result.output, result.out_dir)

Python 3 standard library only, so it runs on a bare Debian host.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("IOMMUD_VM_CACHE", "/var/cache/iommud-vm"))
# The one factor of the host-side deadlines (a guest's life, console markers, QMP), as in
# tests/daemon/testbed.py: they bound a failing run; the scenarios wait for events.
TIMEOUT_SCALE = float(os.environ.get("IOMMUD_TEST_TIMEOUT_SCALE", "") or "1")
QEMU = "qemu-system-x86_64"
BUSYBOX = Path("/bin/busybox")

# Modules the initramfs loads to reach the 9p root.  Their dependencies come
# from the kernel's modules.dep; which of them are built in differs between
# 6.1 (virtio_pci is a module) and 6.12 (built in), so absent ones are fine.
INITRAMFS_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]

# Every guest gets these; `quiet` because printk to an emulated UART is slow
# under TCG (dmesg still has everything), panic=-1 + -no-reboot so a guest
# that panics ends QEMU at once instead of waiting for the timeout. no_timer_check: the
# IO-APIC timer check counts ticks in a busy loop, and a TCG guest on a loaded host loses
# them and panics ("IO-APIC + timer doesn't work!", seen with load 16 on 2 cores).
BASE_CMDLINE = ["console=ttyS0", "quiet", "panic=-1", "no_timer_check"]


class SetupMissing(RuntimeError):
    """tests/vm/setup has not been run (or not completely)."""


class GuestFailed(AssertionError):
    """The guest did not finish its script successfully."""


# --------------------------------------------------------------------------
# Kernels


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One unpacked Debian kernel package in the cache."""

    series: str  # "6.1" or "6.12"
    package: str  # e.g. linux-image-6.1.0-56-amd64
    release: str  # uname -r, e.g. 6.1.0-56-amd64
    root: Path  # dpkg -x target
    arch: str = "amd64"  # amd64 | arm64 (ARCHES)

    @property
    def vmlinuz(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def config(self) -> Path:
        return self.root / "boot" / f"config-{self.release}"

    @property
    def modules(self) -> Path:
        return self.root / "lib" / "modules" / self.release


SERIES = ("6.1", "6.12")


@dataclasses.dataclass(frozen=True)
class Arch:
    """What differs between the guest architectures (README.md, "arm64")."""

    qemu: str
    kernels: Path  # the cache's kernels/<series> links
    # The guest's root, shared read-only over 9p: the host's own root on amd64; on arm64
    # Debian's arm64 packages unpacked by tests/vm/setup (there is no arm64 host root).
    root: Path
    busybox: Path  # static, of the guest's architecture: the initramfs's only binary
    console: str
    initramfs_modules: tuple[str, ...]
    # Kernel command line every guest of the architecture gets (besides BASE_CMDLINE's).
    cmdline: tuple[str, ...] = ()


ARM64_CACHE = CACHE / "arm64"
ARCHES: dict[str, Arch] = {
    "amd64": Arch(QEMU, CACHE / "kernels", Path("/"), BUSYBOX, "ttyS0",
                  tuple(INITRAMFS_MODULES), ("no_timer_check",)),
    # arm_smmu_v3 is built into both Debian arm64 kernels (CONFIG_ARM_SMMU_V3=y).
    "arm64": Arch("qemu-system-aarch64", ARM64_CACHE / "kernels", ARM64_CACHE / "root",
                  ARM64_CACHE / "root" / "usr" / "bin" / "busybox", "ttyAMA0",
                  tuple(INITRAMFS_MODULES)),
}


def find_kernel(series: str, arch: str = "amd64") -> Kernel:
    """The cached kernel of a series; SetupMissing says how to get it."""
    link = ARCHES[arch].kernels / series
    hint = f"run tests/vm/setup (as root) first; cache is {CACHE}"
    if not (link / ".complete").exists():
        raise SetupMissing(f"{arch} kernel series {series} is not in the cache: {hint}")
    if arch != "amd64" and not (ARCHES[arch].root / ".complete").exists():
        raise SetupMissing(f"the {arch} guest root {ARCHES[arch].root} is not built: {hint}")
    release = (link / "release").read_text().strip()
    kernel = Kernel(series, link.resolve().name, release, link.resolve() / "root", arch)
    for p in (kernel.vmlinuz, kernel.config, kernel.modules / "modules.dep"):
        if not p.exists():
            raise SetupMissing(f"{p} missing: {hint}")
    return kernel


def check_host(arch: str = "amd64") -> None:
    """Raise SetupMissing unless the host tools the harness needs are there."""
    # modprobe and udevadm run in the guest, from the host's root (amd64).
    a = ARCHES[arch]
    missing = [t for t in (a.qemu, "cpio", "modprobe", "udevadm") if shutil.which(t) is None]
    if not a.busybox.exists():
        missing.append(str(a.busybox) + " (busybox-static)")
    if missing:
        raise SetupMissing(f"missing {', '.join(missing)}: run tests/vm/setup (as root)")


# --------------------------------------------------------------------------
# Initramfs: busybox, the few modules needed to mount the 9p root, /init.


def _module_closure(kernel: Kernel, names: Iterable[str]) -> list[str]:
    """Module files (relative to the modules dir) for names, dependencies first."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        path, _, rest = line.partition(":")
        deps[path] = rest.split()
        base = re.sub(r"\.ko(\.xz|\.zst|\.gz)?$", "", os.path.basename(path))
        by_name[base.replace("-", "_")] = path
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for dep in reversed(deps.get(path, [])):  # modules.dep lists deepest last
            visit(dep)
        order.append(path)

    for name in names:
        path = by_name.get(name.replace("-", "_"))
        if path is not None:  # not found: built into this kernel
            visit(path)
    return order


def _read_module(path: Path) -> bytes:
    data = path.read_bytes()
    # busybox insmod takes plain ELF only; Debian 6.12 ships .ko.xz.
    if path.suffix == ".xz":
        import lzma

        return lzma.decompress(data)
    return data


def initramfs(kernel: Kernel) -> Path:
    """Build (once, cached by content) the initramfs for a kernel."""
    init = (HERE / "guest" / "initramfs-init").read_bytes()
    arch = ARCHES[kernel.arch]
    modules = _module_closure(kernel, arch.initramfs_modules)
    key = hashlib.sha256(
        init + arch.busybox.read_bytes() + "\n".join(modules).encode() + kernel.package.encode()
    ).hexdigest()[:16]
    out = CACHE / "initramfs" / f"{kernel.release}-{key}.cpio.gz"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="iommud-initramfs-") as tmp:
        root = Path(tmp)
        for d in ("bin", "dev", "proc", "sys", "newroot", "lower", "rw", "modules"):
            (root / d).mkdir()
        shutil.copy2(arch.busybox, root / "bin" / "busybox")
        (root / "init").write_bytes(init)
        (root / "init").chmod(0o755)
        names = []
        for i, rel in enumerate(modules):
            name = f"{i:02d}-{os.path.basename(rel).split('.ko')[0]}.ko"
            (root / "modules" / name).write_bytes(_read_module(kernel.modules / rel))
            names.append(name)
        # Where the guest finds this kernel's modules and config on the host
        # root; the init script bind-mounts / copies them into place.
        if kernel.arch == "amd64":
            (root / "kernel.env").write_text(
                f"KERNEL_RELEASE='{kernel.release}'\n"
                f"KERNEL_MODULES='{kernel.modules}'\n"
                f"KERNEL_CONFIG='{kernel.config}'\n"
            )
        else:
            # The kernel package is not inside the guest's root: it comes as a third 9p
            # share ("kernelroot", see boot()), mounted at /.kernel in the new root.
            (root / "kernel.env").write_text(
                f"KERNEL_RELEASE='{kernel.release}'\n"
                f"KERNEL_MODULES='/.kernel/lib/modules/{kernel.release}'\n"
                f"KERNEL_CONFIG='/.kernel/boot/config-{kernel.release}'\n"
                "KERNEL_SHARE=1\n"
            )
        files = subprocess.run(
            ["find", "."], cwd=root, check=True, capture_output=True, text=True
        ).stdout
        cpio = subprocess.run(
            ["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"],
            cwd=root, input=files.encode(), check=True, capture_output=True,
        ).stdout
    tmp_out = out.with_suffix(f".tmp{os.getpid()}")  # parallel tests may build it at once
    tmp_out.write_bytes(gzip.compress(cpio, compresslevel=1))
    tmp_out.rename(out)
    return out


# --------------------------------------------------------------------------
# Machines


# Device catalogue.  Each entry: QEMU arguments; {n} is a unique index.
# Root ports get explicit chassis/slot numbers so several can coexist.
DEVICES: dict[str, list[str]] = {
    # An NVMe alone on its own root port: its own IOMMU group.
    "nvme-solo": [
        "-device", "pcie-root-port,id=rp_solo,chassis=11,slot=11,bus=pcie.0",
        "-blockdev", "null-co,node-name=nvme_solo,size=1073741824,read-zeroes=on",
        "-device", "nvme,id=nvme_solo,serial=solo,drive=nvme_solo,bus=rp_solo",
    ],
    # Two NVMe behind a PCIe-to-PCI bridge: conventional PCI cannot isolate
    # functions, so bridge + both NVMe form one group (QEMU 7.2).
    "nvme-pair": [
        "-device", "pcie-root-port,id=rp_pair,chassis=12,slot=12,bus=pcie.0",
        "-device", "pcie-pci-bridge,id=ppb_pair,bus=rp_pair",
        "-blockdev", "null-co,node-name=nvme_pa,size=1073741824,read-zeroes=on",
        "-device", "nvme,id=nvme_pa,serial=pair-a,drive=nvme_pa,bus=ppb_pair,addr=1",
        "-blockdev", "null-co,node-name=nvme_pb,size=1073741824,read-zeroes=on",
        "-device", "nvme,id=nvme_pb,serial=pair-b,drive=nvme_pb,bus=ppb_pair,addr=2",
    ],
    # e1000e: its driver supports ethtool ring changes.  restrict=on: the
    # guest reaches no network at all.  romfile= : no iPXE ROM needed.
    "e1000e": [
        "-device", "pcie-root-port,id=rp_nic,chassis=13,slot=13,bus=pcie.0",
        "-netdev", "user,id=net0,restrict=on",
        "-device", "e1000e,id=nic0,netdev=net0,bus=rp_nic,romfile=",
    ],
    # An empty hot-pluggable root port; hot-add with
    # vm.qmp.device_add(...bus="hp0") (see Vm.hotplug_nvme).
    "hotplug-port": [
        "-device", "pcie-root-port,id=hp0,chassis=14,slot=14,bus=pcie.0,hotplug=on",
    ],
    # A hot-pluggable root port at a fixed address, 00:10.0, so that its ACPI
    # path is fixed too (QEMU names a root-bus slot S<devfn>: \_SB.PCI0.S80),
    # which acpi/external-port.asl marks external-facing.  Without that SSDT it
    # is an ordinary port.  See external_port_machine().
    "external-port": [
        "-device", "pcie-root-port,id=rp_ext,chassis=15,slot=15,bus=pcie.0,addr=0x10,hotplug=on",
    ],
    # An e1000e behind it (list "external-port" too), as a Thunderbolt NIC would be.
    "e1000e-external": [
        "-netdev", "user,id=net_ext,restrict=on",
        "-device", "e1000e,id=nic_ext,netdev=net_ext,bus=rp_ext,romfile=",
    ],
    # Two e1000e joined by QEMU hub 1 instead of a user network (the bounce scenario): traffic
    # between them stays inside QEMU.  One on its own root port, one behind "external-port".
    "e1000e-hub": [
        "-device", "pcie-root-port,id=rp_nic,chassis=13,slot=13,bus=pcie.0",
        "-netdev", "hubport,id=hub_a,hubid=1",
        "-device", "e1000e,id=nic0,netdev=hub_a,bus=rp_nic,romfile=",
    ],
    "e1000e-external-hub": [
        "-netdev", "hubport,id=hub_b,hubid=1",
        "-device", "e1000e,id=nic_ext,netdev=hub_b,bus=rp_ext,romfile=",
    ],
}

# The PCI address and ACPI path of the "external-port" root port.
EXTERNAL_PORT = "0000:00:10.0"
EXTERNAL_PORT_ACPI = "\\_SB_.PCI0.S80_"
EXTERNAL_PORT_ASL = HERE / "acpi" / "external-port.asl"

ALL_DEVICES = ["nvme-solo", "nvme-pair", "e1000e", "hotplug-port"]


@dataclasses.dataclass
class Machine:
    """What to boot: IOMMU model, kernel command line extras, devices."""

    iommu: str = "intel"  # intel | amd | none; arm64: smmuv3 | none
    caching_mode: bool = False  # intel only: VT-d Caching Mode (CM) bit
    cmdline: list[str] = dataclasses.field(default_factory=list)
    devices: list[str] = dataclasses.field(default_factory=lambda: list(ALL_DEVICES))
    memory_mb: int = 1024
    # One vCPU boots faster under TCG on a 2-core host than two.
    cpus: int = 1
    extra_qemu: list[str] = dataclasses.field(default_factory=list)
    # Extra ACPI tables (compiled .aml files), loaded with -acpitable.
    acpi_tables: list[Path] = dataclasses.field(default_factory=list)
    arch: str = "amd64"  # amd64: q35; arm64: virt (ARCHES)
    # arm64: virt's interrupt controller. 2: a GICv2 whose MSIs go through a GICv2m frame (QEMU's
    # default); 3: a GICv3 with an ITS, which isolates MSIs (docs/kernel.md §4.2).
    gic: int = 2
    # The harness's own virtio-9p shares with VIRTIO_F_ACCESS_PLATFORM (iommu_platform=on): their
    # DMA goes through the IOMMU, so they do not reach all memory (docs/kernel.md §4.3).
    shares_translated: bool = False

    def machine_arg(self, accel_mode: str) -> list[str]:
        """QEMU's -machine: q35 (the IOMMU is a -device), or virt whose SMMUv3 is a machine property."""
        if self.arch == "arm64":
            if self.iommu not in ("smmuv3", "none"):
                raise ValueError(f"arm64: unknown iommu model {self.iommu!r} (smmuv3 | none)")
            smmu = ",iommu=smmuv3" if self.iommu == "smmuv3" else ""
            if self.gic not in (2, 3):
                raise ValueError(f"arm64: unknown GIC version {self.gic!r} (2 | 3)")
            gic = ",gic-version=3,its=on" if self.gic == 3 else ""
            return ["-machine", f"virt{smmu}{gic},accel={accel_mode}"]
        return ["-machine", f"q35,accel={accel_mode}"]

    def qemu_args(self) -> list[str]:
        # The IOMMU comes first: QEMU wants it created before the PCI devices
        # it translates.  Interrupt remapping is off: it would need a split
        # irqchip under KVM and iommud does not look at it.
        args: list[str] = []
        if self.arch == "arm64":
            pass  # the SMMUv3 is part of -machine (machine_arg)
        elif self.iommu == "intel":
            cm = "on" if self.caching_mode else "off"
            args += ["-device", f"intel-iommu,caching-mode={cm},intremap=off"]
        elif self.iommu == "amd":
            args += ["-device", "amd-iommu,intremap=off"]
        elif self.iommu != "none":
            raise ValueError(f"unknown iommu model {self.iommu!r}")
        for d in self.devices:
            if d not in DEVICES:
                raise ValueError(f"unknown device {d!r}; known: {', '.join(DEVICES)}")
            args += DEVICES[d]
        for table in self.acpi_tables:
            args += ["-acpitable", f"file={table}"]
        return args + self.extra_qemu


def external_port_ssdt() -> Path:
    """acpi/external-port.asl compiled by iasl (acpica-tools), cached by content."""
    source = EXTERNAL_PORT_ASL.read_bytes()
    out = CACHE / "acpi" / f"external-port-{hashlib.sha256(source).hexdigest()[:16]}.aml"
    if out.is_file():
        return out
    iasl = shutil.which("iasl")
    if iasl is None:
        raise SetupMissing("iasl not found: run tests/vm/setup (it installs acpica-tools)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        asl = Path(tmp) / "external-port.asl"
        asl.write_bytes(source)
        r = subprocess.run([iasl, "-p", str(Path(tmp) / "external-port"), str(asl)],
                           capture_output=True, text=True)
        aml = Path(tmp) / "external-port.aml"
        if r.returncode != 0 or not aml.is_file():
            raise RuntimeError(f"iasl failed on {EXTERNAL_PORT_ASL}:\n{r.stdout}{r.stderr}")
        os.replace(aml, out)
    return out


def external_port_machine(*, external_facing: bool = True, nic: bool = True,
                          devices: Iterable[str] = ALL_DEVICES, memory_mb: int = 1024,
                          caching_mode: bool = False, cmdline: Iterable[str] = ()) -> Machine:
    """A VT-d machine with the root port 00:10.0 ("external-port") that the
    firmware marks external-facing, as on a Thunderbolt/USB4 host: an SSDT
    puts the _DSD property ExternalFacingPort = 1 on it, so the kernel makes
    every device below it removable and untrusted (strict DMA, swiotlb
    bounce for sub-page mappings; docs/kernel.md §5).  nic: an e1000e
    behind it from boot (0000:06:00.0 with the default devices); otherwise the port is empty for a QMP hot-add (Vm.hotplug_nic).
    external_facing=False: the same machine without the SSDT, a control.
    memory_mb: the kernel sets up its swiotlb pool on x86 only with memory
    above 4 GiB (or when forced); without one an untrusted device's sub-page
    mappings fail ("DMA bounce buffers are inactive").  4096 MiB and more
    reach above 4 GiB on q35 (the PCI hole); README.md has what each showed."""
    devs = list(devices) + ["external-port"] + (["e1000e-external"] if nic else [])
    return Machine(iommu="intel", caching_mode=caching_mode, cmdline=list(cmdline), devices=devs,
                   memory_mb=memory_mb, acpi_tables=[external_port_ssdt()] if external_facing else [])


# --------------------------------------------------------------------------
# QMP


class Qmp:
    """Minimal QMP client: commands, and events kept until someone waits."""

    def __init__(self, path: Path, timeout: float = 30):
        deadline = time.monotonic() + timeout * TIMEOUT_SCALE
        while True:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._sock.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self._sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._buf = b""
        self.events: list[dict] = []
        self._read(timeout)  # greeting
        self.command("qmp_capabilities")

    def _read(self, timeout: float) -> dict:
        """One message; socket.timeout if none arrives in time.  Own
        buffering: a file object over a socket is unusable after a timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("QMP connection closed")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name: str, timeout: float = 60, **arguments) -> dict:
        msg: dict = {"execute": name}
        if arguments:
            msg["arguments"] = arguments
        self._sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read(timeout * TIMEOUT_SCALE)
            if "event" in reply:
                self.events.append(reply)
                continue
            if "error" in reply:
                raise RuntimeError(f"QMP {name}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return", {})

    def wait_event(self, name: str, timeout: float = 60,
                   match: Callable[[dict], bool] = lambda e: True) -> dict:
        """Wait for (or take an already received) event `name`."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == name and match(ev):
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no QMP event {name} within {timeout}s")
            try:
                self.events.append(self._read(left))
            except socket.timeout:
                pass

    def close(self) -> None:
        self._sock.close()


# --------------------------------------------------------------------------
# Running a guest


@dataclasses.dataclass
class Result:
    exit_status: int | None  # the guest script's; None if it never finished
    output: str  # the guest's console
    out_dir: Path  # files the guest wrote to /vm/out
    accel: str  # "kvm" or "tcg"
    seconds: float
    timed_out: bool
    host_error: str | None = None  # an exception raised by the host-side driver

    def check(self) -> "Result":
        if self.host_error:
            raise GuestFailed(f"host-side driver failed: {self.host_error}\n{self.tail()}")
        if self.timed_out:
            raise GuestFailed(f"guest timed out after {self.seconds:.0f}s\n{self.tail()}")
        if self.exit_status != 0:
            raise GuestFailed(f"guest script exited {self.exit_status}\n{self.oops_head()}{self.tail()}")
        return self

    def tail(self, lines: int = 60) -> str:
        return "--- guest console (tail) ---\n" + "\n".join(self.output.splitlines()[-lines:])

    def oops(self) -> list[str]:
        """The start of the guest kernel's first oops or panic on the console (what the tail cuts
        off: the message, the process, the registers' first lines), or [] when it had none."""
        lines = self.output.splitlines()
        for i, line in enumerate(lines):
            if OOPS.search(line):
                return lines[i:i + 12]
        return []

    def oops_process(self) -> str | None:
        """The process the guest kernel's first oops ran in (its "Comm:"), or None."""
        for line in self.oops():
            m = re.search(r"\bComm: (\S+)", line)
            if m:
                return m.group(1)
        return None

    def oops_head(self) -> str:
        head = self.oops()
        return "--- guest kernel oops (start) ---\n" + "\n".join(head) + "\n" if head else ""


# The first line of a kernel oops or panic (arch/x86/mm/fault.c, kernel/panic.c, lib/bug.c).
OOPS = re.compile(r"\] (BUG: |Oops: |general protection fault|kernel BUG at |Kernel panic - )")


def boot_again_after_foreign_panic(boot_once: Callable[[int], Result], ours: tuple[str, ...],
                                   notes: list[str]) -> Result:
    """Boots with boot_once(1); when the guest kernel panicked in a process that is not one of
    `ours` (the traffic a scenario makes, in the kernel's network stack, say: a fault of the kernel
    or of QEMU's emulated devices, not of what is tested), boots once more and says so in `notes`
    with the oops's first lines (boot_once(2): the second boot, into files of its own). A panic in
    one of ours, or a second panic, is the result."""
    first = boot_once(1)
    process = first.oops_process() if first.exit_status is None and not first.timed_out else None
    if process is None or process in ours:
        return first
    notes.append(f"the first boot's kernel panicked in {process}, not in {', '.join(ours)} "
                 f"(booted again): " + " | ".join(l.split("] ", 1)[-1] for l in first.oops()[:3]))
    return boot_once(2)


@dataclasses.dataclass
class Outcome:
    """What `run` reports of one scenario's boot: what failed (problems) and what was seen (notes)."""
    name: str
    seconds: float
    accel: str
    problems: list[str]
    notes: list[str]
    out_dir: Path


def judged(name: str, result: Result, judge: Callable[[Path, list[str]], list[str]],
           notes: list[str] | None = None) -> Outcome:
    """A boot's outcome: the guest's own verdict (`Result.check`), then `judge` over the files the
    guest left (it returns the problems, and may add notes, after `notes`). A file missing or not
    as expected is a problem of this boot, not an error of the run."""
    problems: list[str] = []
    notes = list(notes or [])
    try:
        result.check()
        problems += judge(result.out_dir, notes)
    except (GuestFailed, FileNotFoundError, KeyError, ValueError) as e:
        problems.append(f"{type(e).__name__}: {e}")
    return Outcome(name, result.seconds, result.accel, problems, notes, result.out_dir)


class Vm:
    """A running guest, handed to a host-side driver function during boot()."""

    def __init__(self, qmp: Qmp, console: "_Console", io_dir: Path):
        self.qmp = qmp
        self.io_dir = io_dir
        self._console = console

    def wait_console(self, pattern: str, timeout: float = 120) -> re.Match:
        """Wait for a regex on the guest console (e.g. a marker the script prints)."""
        return self._console.wait(re.compile(pattern, re.M), timeout * TIMEOUT_SCALE)

    def hotplug_nvme(self, dev_id: str = "hp_nvme", port: str = "hp0",
                     size: int = 1 << 30) -> None:
        """device_add an NVMe (on a null block backend) to an empty root port."""
        self.qmp.command("blockdev-add", driver="null-co", **{"node-name": dev_id + "_blk"},
                         size=size, **{"read-zeroes": True})
        self.qmp.command("device_add", driver="nvme", id=dev_id, bus=port,
                         serial=dev_id, drive=dev_id + "_blk")

    def hotplug_nic(self, dev_id: str = "hp_nic", port: str = "rp_ext") -> None:
        """device_add an e1000e (user networking, restricted) to an empty root port."""
        self.qmp.command("netdev_add", type="user", id=dev_id + "_net", restrict=True)
        self.qmp.command("device_add", driver="e1000e", id=dev_id, bus=port,
                         netdev=dev_id + "_net", romfile="")

    def unplug(self, dev_id: str, timeout: float = 60) -> None:
        """device_del and wait for QMP's DEVICE_DELETED (the guest let go)."""
        self.qmp.command("device_del", id=dev_id)
        self.qmp.wait_event("DEVICE_DELETED", timeout * TIMEOUT_SCALE,
                            match=lambda e: e.get("data", {}).get("device") == dev_id)
        try:
            self.qmp.command("blockdev-del", **{"node-name": dev_id + "_blk"})
        except RuntimeError:
            pass  # not a hotplug_nvme() device


class _Console:
    """Collects QEMU's stdout (the guest serial console) in a thread."""

    def __init__(self, stream, log_path: Path, echo: bool):
        self._stream = stream
        self._buf: list[str] = []
        self._cond = threading.Condition()
        self._log = log_path.open("w")
        self._echo = echo
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode(errors="replace").replace("\r", "")
            self._log.write(line)
            self._log.flush()
            if self._echo:
                print(line, end="", flush=True)
            with self._cond:
                self._buf.append(line)
                self._cond.notify_all()
        with self._cond:
            self._buf.append("")  # EOF marker for waiters
            self._cond.notify_all()

    def text(self) -> str:
        with self._cond:
            return "".join(self._buf)

    def wait(self, pattern: re.Pattern, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                m = pattern.search("".join(self._buf))
                if m:
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"console never showed {pattern.pattern!r}")
                self._cond.wait(left)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        self._log.close()


def accel() -> str:
    """kvm or tcg: IOMMUD_VM_ACCEL if set, else the cached verdict of a probe.

    /dev/kvm existing is not enough: on some hosts (nested, restricted) KVM
    opens but cannot run a stock kernel.  probe_kvm() boots once and records
    the answer per host kernel in the cache.
    """
    forced = os.environ.get("IOMMUD_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    verdict = CACHE / f"kvm-verdict-{os.uname().release}"
    if verdict.exists():
        return verdict.read_text().strip()
    result = probe_kvm()
    verdict.write_text(result + "\n")
    return result


def probe_kvm() -> str:
    try:
        r = boot(find_kernel(SERIES[-1]), Machine(iommu="none", devices=[], cpus=1),
                 script="#!/bin/sh\necho kvm-probe-ok\n", timeout=40, accel_override="kvm")
        return "kvm" if r.exit_status == 0 and "kvm-probe-ok" in r.output else "tcg"
    except Exception:
        return "tcg"


def boot(kernel: Kernel, machine: Machine, script: str, *,
         init: str = "script",
         udev: bool = False,
         timeout: float = 300,
         files_in: dict[str, bytes | str | Path] | None = None,
         out_dir: Path | None = None,
         driver: Callable[[Vm], None] | None = None,
         systemd_units: list[Path] | None = None,
         udev_rules: list[Path] | None = None,
         systemd_wants: list[str] | None = None,
         root_files: dict[str, bytes | str | Path] | None = None,
         echo: bool = False,
         accel_override: str | None = None,
         initrd: Path | None = None) -> Result:
    """Boot kernel on machine, run `script` in the guest, power off, report.

    init="script": a bash wrapper is PID 1 and runs the script at once (fast).
    udev=True (script mode): start systemd-udevd, trigger and settle first;
    otherwise PID 1 only modprobes the drivers of the PCI devices present.
    init="systemd": systemd is PID 1; the script runs as vm-test.service after
    systemd-udevd, journald and `systemd_wants` (units installed from
    `systemd_units`, udev rules from `udev_rules`) are up.

    files_in: name -> content/path, visible in the guest as /vm/in/<name>.
    root_files: absolute guest path -> content/path, installed into the
    guest's root (the overlay) before init starts, as a package would put
    them: /usr/lib/systemd/system/x.service, /usr/sbin/x, /etc/x/y.conf.
    Files keep their mode (a Path's, or 0644 for text/bytes), owned by root.
    The guest writes results to /vm/out/; they end up in out_dir (a fresh
    temp dir if not given), returned as Result.out_dir.
    driver: called with a Vm while the guest runs (QMP, console waits), from
    the host side; an exception in it is reported in Result.host_error.
    The guest never outlives `timeout`: QEMU is killed then.
    initrd: boot this initramfs instead of the harness's (which mounts the
    host root): the guest's own init then decides everything, the script
    and files are not used, exit_status stays None and the console is the
    result (the boot scenario boots an image of Debian's initramfs-tools).
    """
    arch = ARCHES[kernel.arch]
    if machine.arch != kernel.arch:
        raise ValueError(f"a {machine.arch} machine cannot boot a {kernel.arch} kernel")
    check_host(kernel.arch)
    timeout *= TIMEOUT_SCALE
    if init not in ("script", "systemd"):
        raise ValueError("init must be 'script' or 'systemd'")
    # No KVM for another architecture: arm64 guests always run under TCG.
    mode = accel_override or (accel() if kernel.arch == "amd64" else "tcg")
    io_dir = Path(tempfile.mkdtemp(prefix="iommud-vm-"))
    (io_dir / "in").mkdir()
    (io_dir / "out").mkdir()
    (io_dir / "test").write_text(script)
    (io_dir / "test").chmod(0o755)
    for name, content in (files_in or {}).items():
        _put(io_dir / "in" / name, content)
    shutil.copy2(HERE / "guest" / "pid1", io_dir / "pid1")
    shutil.copy2(HERE / "guest" / "run-test", io_dir / "run-test")
    for guest_path, content in (root_files or {}).items():
        if not guest_path.startswith("/") or ".." in guest_path.split("/"):
            raise ValueError(f"root_files: {guest_path!r} is not an absolute path")
        dest = _put(io_dir / "root" / guest_path.lstrip("/"), content)
        if not isinstance(content, Path):
            dest.chmod(0o644)
        for d in dest.relative_to(io_dir / "root").parents:  # new guest dirs: 0755 whatever our umask
            (io_dir / "root" / d).chmod(0o755)
    if udev_rules:
        (io_dir / "udev-rules").mkdir()
        for rule in udev_rules:
            shutil.copy2(rule, io_dir / "udev-rules" / rule.name)
    if init == "systemd":
        _stage_systemd(io_dir, systemd_units or [], systemd_wants or [])
    (io_dir / "boot.env").write_text(
        f"VM_INIT='{'/lib/systemd/systemd' if init == 'systemd' else '/vm/pid1'}'\n"
        f"VM_UDEV={int(udev)}\n"
    )

    if kernel.arch == "amd64":
        cmdline = BASE_CMDLINE + machine.cmdline
    else:
        cmdline = ([f"console={arch.console}"] + [a for a in BASE_CMDLINE if not a.startswith("console=")
                                                  and a != "no_timer_check"] + list(arch.cmdline)
                   + machine.cmdline)
    if init == "systemd":
        # The unit set stays small: our target pulls only what the test needs.
        cmdline = cmdline + ["systemd.unit=vm-test.target", "systemd.show_status=0"]
    qmp_path = io_dir / "qmp.sock"
    cpu = os.environ.get("IOMMUD_VM_CPU") or ("host" if mode == "kvm" else "max")
    if kernel.arch == "arm64":
        # TCG: "max" emulates pointer authentication with QARMA, which costs much; the
        # implementation-defined algorithm is the cheap one.  (KVM: no arm64 host here.)
        cpu = os.environ.get("IOMMUD_VM_CPU") or "max,pauth-impdef=on"
    share = "virtio-9p-pci,disable-legacy=on,iommu_platform=on" if machine.shares_translated else "virtio-9p-pci"
    kernel_share = [] if kernel.arch == "amd64" else [
        "-fsdev", f"local,id=kernelroot,path={kernel.root},security_model=none,readonly=on",
        "-device", f"{share},fsdev=kernelroot,mount_tag=kernelroot",
    ]
    args = [
        arch.qemu, *machine.machine_arg(mode), "-cpu", cpu,
        "-m", str(machine.memory_mb), "-smp", str(machine.cpus),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", "stdio", "-qmp", f"unix:{qmp_path},server=on,wait=off",
        "-kernel", str(kernel.vmlinuz), "-initrd", str(initrd or initramfs(kernel)),
        "-append", " ".join(cmdline),
        *machine.qemu_args(),
        # The host root, read-only; multidevs=remap keeps inode numbers unique
        # across the host's mount points.
        "-fsdev", f"local,id=hostroot,path={arch.root},security_model=none,readonly=on,multidevs=remap",
        "-device", f"{share},fsdev=hostroot,mount_tag=hostroot",
        *kernel_share,
        "-fsdev", f"local,id=vmio,path={io_dir},security_model=none",
        "-device", f"{share},fsdev=vmio,mount_tag=vmio",
    ]
    start = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    console = _Console(proc.stdout, io_dir / "console.log", echo)
    host_error = None
    timed_out = False
    qmp = None
    try:
        if driver is not None:
            try:
                qmp = Qmp(qmp_path)
                driver(Vm(qmp, console, io_dir))
            except Exception as e:  # reported, and the guest still gets its timeout
                host_error = f"{type(e).__name__}: {e}"
        while proc.poll() is None:
            if time.monotonic() - start > timeout:
                timed_out = True
                break
            # QEMU stops (but does not exit) on a KVM emulation failure.
            if "KVM internal error" in console.text():
                host_error = host_error or "KVM internal error (try IOMMUD_VM_ACCEL=tcg)"
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if qmp is not None:
            qmp.close()
        console.join(10)
    seconds = time.monotonic() - start

    status_file = io_dir / "status"
    exit_status = int(status_file.read_text().strip()) if status_file.exists() else None
    result_dir = out_dir or Path(tempfile.mkdtemp(prefix="iommud-vm-out-"))
    result_dir.mkdir(parents=True, exist_ok=True)
    for item in (io_dir / "out").iterdir():
        shutil.move(str(item), result_dir / item.name)
    shutil.copy2(io_dir / "console.log", result_dir / "console.log")
    output = console.text()
    shutil.rmtree(io_dir, ignore_errors=True)
    return Result(exit_status, output, result_dir, mode, seconds, timed_out, host_error)


def _put(dest: Path, content: bytes | str | Path) -> Path:
    """Write a file into the boot's share: a copy of a Path (mode kept), or text/bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, Path):
        shutil.copy2(content, dest)
    else:
        dest.write_bytes(content.encode() if isinstance(content, str) else content)
    return dest


def _stage_systemd(io_dir: Path, units: list[Path], wants: list[str]) -> None:
    """Units the guest's initramfs-init installs into the overlay's /etc/systemd/system."""
    sysd = io_dir / "systemd"
    sysd.mkdir()
    for u in units:
        shutil.copy2(u, sysd / u.name)
    base = ["systemd-journald.service", "systemd-udevd.service",
            "systemd-udev-trigger.service", "vm-test.service"]
    (sysd / "vm-test.target").write_text(
        "[Unit]\nDescription=iommud VM test\n"
        f"Wants={' '.join(base + wants)}\n"
    )
    after = " ".join(["systemd-udevd.service", "systemd-udev-trigger.service", *wants])
    # Coldplug only what iommud looks at: udev's full coldplug of every
    # device costs tens of seconds under TCG.
    dropin = sysd / "systemd-udev-trigger.service.d"
    dropin.mkdir()
    (dropin / "iommud-vm.conf").write_text(
        "[Service]\nExecStart=\n"
        "ExecStart=-udevadm trigger --type=devices --action=add --subsystem-match=pci "
        "--subsystem-match=nvme --subsystem-match=block --subsystem-match=net\n"
    )
    (sysd / "vm-test.service").write_text(
        "[Unit]\nDescription=iommud VM test script\n"
        f"After={after}\nDefaultDependencies=no\n"
        "SuccessAction=poweroff-force\nFailureAction=poweroff-force\n"
        "[Service]\nType=oneshot\nExecStart=/vm/run-test\n"
        "StandardOutput=journal+console\nStandardError=journal+console\n"
    )
