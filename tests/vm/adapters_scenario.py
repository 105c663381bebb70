"""The adapters scenario: iommud's writers and readers against the real programs, in one boot.

Each part puts what iommud did or read next to what the kernel or the real tool says
(issue 23, point 3); the guest records both, the host compares them:

1. runtime module parameters: `iommuctl apply` writes nvme.io_queue_depth through
   /sys/module; a value the parameter's parser takes (512) must read back, one it refuses
   (4096, above NVME_PCI_MAX_QUEUE_SIZE 4095) must fail in iommud with the errno the kernel
   gives a direct write (EINVAL), the value unchanged; `revert` puts the old value back;
2. modprobe.d (`at = "load"`): the file iommud writes is what `modprobe -c` reports for nvme,
   a reload of nvme (`modprobe -r`, `modprobe`) takes the value, and with an initramfs that
   holds nvme (its listing by Debian's `lsinitramfs` is the judge) the note names the image and
   `update-initramfs -u -k <release>`; `revert` removes the file and `modprobe -c` no longer
   has the line;
3. ethtool coalescing on the e1000e: rx-usecs 100 set and read back by `ethtool -c`; 5 (the
   driver refuses 5-9, EINVAL) fails in iommud as in `ethtool -C`, the value unchanged; 7000
   (the driver keeps its ITR, 1000000/7000 = 142, in steps of 4: it reads back 7142) must not
   be reported done, and must leave the NIC as it was; tx-usecs (the driver supports rx-usecs
   only) must not be reported done; `revert` restores the driver's default;
4. `.link` files: for each of a set of layouts (precedence of /etc over /usr/lib, masking by a
   link to /dev/null, a drop-in, first match in name order), the file
   `udevadm test-builtin net_setup_link` applies (its ID_NET_LINK_FILE; it also sets the ring)
   must be the one iommud names as setting the RX ring, with the same value, or none when that
   file sets no ring;
5. NetworkManager keyfiles: the profiles iommud names for the NIC's RX ring must be exactly those a
   running NetworkManager (Debian's 1.42, on its own system bus) lists as available for it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import scenarios
import vmlib

NVME = "0000:01:00.0"  # nvme-solo
NIC = "0000:04:00.0"  # the e1000e

PARAM_RULE = """[[rule]]
name = "vm-nvme-{tag}"
description = "io_queue_depth {value} for the NVMe drives (tests/vm adapters)"
when = "always"
[rule.match]
address = "{nvme}"
[[rule.param]]
module = "nvme"
name = "io_queue_depth"
value = {value}
at = "{at}"
takes-effect = "probe"
"""

NIC_RULE = """[[rule]]
name = "vm-e1000e-{tag}"
description = "{what} on the e1000e (tests/vm adapters)"
when = "always"
[rule.match]
address = "{nic}"
[rule.{table}]
{key} = {value}
"""

POLICIES = {
    "param-ok": PARAM_RULE.format(tag="depth-ok", value=512, at="runtime", nvme=NVME),
    "param-bad": PARAM_RULE.format(tag="depth-bad", value=4096, at="runtime", nvme=NVME),
    "param-load": PARAM_RULE.format(tag="depth-load", value=256, at="load", nvme=NVME),
    "coal-ok": NIC_RULE.format(tag="usecs-ok", what="rx-usecs 100", table="coalesce", key="rx-usecs",
                               value=100, nic=NIC),
    "coal-bad": NIC_RULE.format(tag="usecs-bad", what="rx-usecs 5", table="coalesce", key="rx-usecs",
                                value=5, nic=NIC),
    "coal-round": NIC_RULE.format(tag="usecs-round", what="rx-usecs 7000", table="coalesce", key="rx-usecs",
                                  value=7000, nic=NIC),
    "coal-tx": NIC_RULE.format(tag="tx-usecs", what="tx-usecs 10", table="coalesce", key="tx-usecs",
                               value=10, nic=NIC),
    "ring": NIC_RULE.format(tag="rx-ring", what="an RX ring of 2048", table="rings", key="rx", value=2048, nic=NIC),
}

# .link layouts: (name, shell that sets it up after the previous one was cleaned away).
# E, U: /etc/systemd/network and /usr/lib/systemd/network. Every file keeps the kernel's name.
LINK_CASES = [
    ("usr-lib", 'mk "$U/50-vm-a.link" "Driver=e1000e" 1024'),
    ("etc-shadows", 'mk "$U/50-vm-a.link" "Driver=e1000e" 1024; mk "$E/50-vm-a.link" "Driver=e1000e" 768'),
    ("etc-shadows-no-match", 'mk "$U/50-vm-a.link" "Driver=e1000e" 1024; mk "$E/50-vm-a.link" "Driver=virtio_net" 768'),
    ("masked", 'mk "$U/50-vm-a.link" "Driver=e1000e" 1024; ln -s /dev/null "$E/50-vm-a.link"'),
    ("drop-in", 'mk "$U/50-vm-a.link" "Driver=e1000e" 1024; mkdir -p "$E/50-vm-a.link.d"; '
                'printf "[Link]\\nRxBufferSize=640\\n" > "$E/50-vm-a.link.d/rx.conf"'),
    ("first-match", 'mk "$E/40-vm-mac.link" "MACAddress=02:00:00:00:00:01" 512; '
                    'mk "$U/45-vm-path.link" "Path=pci-@NIC@" 896; mk "$E/46-vm-driver.link" "Driver=e1000e" 384'),
    ("no-ring", 'mk "$E/45-vm-norx.link" "Driver=e1000e" ""; mk "$U/50-vm-a.link" "Driver=e1000e" 1024'),
]

GUEST = r"""#!/bin/bash
set -u
ctl=/vm/in/iommuctl nvme=@NVME@ nic=@NIC@
R=$(uname -r) P=/sys/module/nvme/parameters/io_queue_depth
rm -rf /var/lib/iommud /run/iommud  # the host's own records show through the shared root
ifc=(/sys/bus/pci/devices/$nic/net/*); ifc=${ifc[0]##*/}
for d in /vm/in/pol-*; do  # iommuctl refuses policies others could write
    mkdir -m 0755 -p "/tmp/${d##*/}" && cp "$d"/*.toml "/tmp/${d##*/}/" && chmod 0644 "/tmp/${d##*/}"/*.toml
done
apply() { "$ctl" apply --policies "/tmp/pol-$1" > "apply-$1.out" 2>&1; echo $? > "apply-$1.rc"; }
revert() { "$ctl" revert > "revert-$1.out" 2>&1; echo $? > "revert-$1.rc"; }
value() { local v; read -r v < "$P"; echo "$v" > "$1"; }
# The kernel's own answer to a direct write of a parameter: "errno NAME".
pw() { python3 -c 'import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY); os.write(fd, sys.argv[2].encode()); os.close(fd); print(0, "OK")
except OSError as e:
    print(e.errno, errno.errorcode.get(e.errno, "?"))' "$1" "$2"; }

# 1. Runtime module parameter.
value param-before.txt
apply param-ok; value param-ok.txt
apply param-bad; value param-bad.txt
pw "$P" 4096 > param-direct-4096.txt; value param-direct-after.txt
revert param; value param-reverted.txt

# 2. modprobe.d, with an initramfs that holds nvme (a cpio of the real module, listed by lsinitramfs).
mkdir -p "/tmp/ird/usr/lib/modules/$R/kernel/drivers/nvme/host"
cp /lib/modules/"$R"/kernel/drivers/nvme/host/nvme.ko* "/tmp/ird/usr/lib/modules/$R/kernel/drivers/nvme/host/"
(cd /tmp/ird && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "/boot/initrd.img-$R"
echo "/boot/initrd.img-$R" > initrd-path.txt
lsinitramfs "/boot/initrd.img-$R" > lsinitramfs.txt 2>&1
"$ctl" plan --policies /tmp/pol-param-load --json > plan-param-load.json 2> plan-param-load.err
apply param-load
cp /etc/modprobe.d/iommud-nvme.conf modprobe-file.txt 2>/dev/null || echo "(absent)" > modprobe-file.txt
modprobe -c 2>&1 | grep "^options nvme " > modprobe-c.txt  # 43000 lines: 9p writes them for minutes
value load-before-reload.txt
{ modprobe -r nvme && modprobe nvme; } > reload.out 2>&1; echo $? > reload.rc
value load-after-reload.txt
revert load
[[ -e /etc/modprobe.d/iommud-nvme.conf ]] && echo present > modprobe-file-reverted.txt || echo absent > modprobe-file-reverted.txt
modprobe -c 2>&1 | grep "^options nvme " > modprobe-c-reverted.txt
rm -f "/boot/initrd.img-$R"

# 3. Coalescing on the e1000e.
coal() { ethtool -c "$ifc" > "coalesce-$1.txt" 2>&1; }
coal before
apply coal-ok; coal ok
apply coal-bad; coal bad
ethtool -C "$ifc" rx-usecs 5 > ethtool-C-5.out 2>&1; echo $? > ethtool-C-5.rc
apply coal-round; coal round
ethtool -C "$ifc" rx-usecs 7000; coal direct-7000; ethtool -C "$ifc" rx-usecs 100
apply coal-tx; coal tx
ethtool -C "$ifc" tx-usecs 10 > ethtool-C-tx.out 2>&1; echo $? > ethtool-C-tx.rc
revert coal; coal reverted

# 4. .link files against udevadm test-builtin net_setup_link.
E=/etc/systemd/network U=/usr/lib/systemd/network
mkdir -p "$E"
mk() {  # mk FILE MATCH RXRING ("" for none)
    printf '[Match]\n%s\n[Link]\nNamePolicy=keep kernel\n' "$2" > "$1"
    [[ -n $3 ]] && printf 'RxBufferSize=%s\n' "$3" >> "$1"
    return 0
}
# Each layout starts from the driver's RX ring of 256: the ring after udev is what udev applied.
clean() { rm -rf "$E"/*vm-* "$U"/*vm-*; ethtool -G "$ifc" rx 256; }
@LINK_CASES@
clean

# 5. NetworkManager keyfiles against a running NetworkManager (its own D-Bus system bus).
NE=/etc/NetworkManager/system-connections NR=/run/NetworkManager/system-connections
NU=/usr/lib/NetworkManager/system-connections
mkdir -p /run/dbus "$NE" "$NR" "$NU" /var/lib/NetworkManager
rm -f "$NE"/* "$NR"/* "$NU"/*
read -r mac < "/sys/class/net/$ifc/address"
kf() {  # kf FILE ID UUID MATCH-LINES RXRING: a profile activated by nobody (autoconnect=false)
    printf '[connection]\nid=%s\nuuid=%s\ntype=ethernet\nautoconnect=false\n%s\n[ethtool]\nring-rx=%s\n' \
        "$2" "$3" "$4" "$5" > "$1"
    chmod 0600 "$1"
}
@NM_PROFILES@
ls -l "$NE" "$NR" "$NU" > nm.files 2>&1
printf '[main]\nplugins=keyfile\n' > /tmp/nm.conf
dbus-daemon --system --fork
NetworkManager --config /tmp/nm.conf --no-daemon > nm.log 2>&1 &
nm-online -s -q -t 60; echo $? > nm-online.rc
nmcli -t -f UUID,FILENAME connection show > nm-connections.txt 2>&1
nmcli -g CONNECTIONS.AVAILABLE-CONNECTIONS device show "$ifc" > nm-available.txt 2>&1
# NetworkManager brought the NIC up: apply spares a NIC in use unless asked as at hotplug.
"$ctl" apply --hotplug --device "$nic" --policies /tmp/pol-ring > nm.apply 2>&1; echo $? > nm.apply-rc
revert nm
exit 0
"""

# NetworkManager profiles, all with autoconnect=false (nothing gets activated; iommud then says
# "may also set"): (file, uuid, match lines, RX ring). $NE, $NR, $NU: /etc, /run, /usr/lib.
NM_PROFILES = [
    ("$NE/name.nmconnection", "11111111-1111-4111-8111-111111111111", "interface-name=$ifc", 1024),
    ("$NE/other-name.nmconnection", "22222222-2222-4222-8222-222222222222", "interface-name=eth9", 768),
    # /usr/lib matches by driver, the /run copy of the same UUID names another interface: /run wins.
    ("$NU/shadowed.nmconnection", "33333333-3333-4333-8333-333333333333", "[match]\ndriver=e1000e", 640),
    ("$NR/shadowed.nmconnection", "33333333-3333-4333-8333-333333333333", "interface-name=eth9", 512),
    ("$NE/mac.nmconnection", "44444444-4444-4444-8444-444444444444", "[ethernet]\nmac-address=$mac", 896),
    # Open to others (0644 after kf): NetworkManager skips it.
    ("$NE/open.nmconnection", "55555555-5555-4555-8555-555555555555", "[match]\ndriver=e1000e", 384),
    # A /usr/lib profile hidden by a tombstone in /etc.
    ("$NU/gone.nmconnection", "66666666-6666-4666-8666-666666666666", "[match]\ndriver=e1000e", 320),
    ("$NU/kept.nmconnection", "77777777-7777-4777-8777-777777777777", "[match]\ndriver=e*", 352),
]


def _nm_profiles() -> str:
    out = []
    for path, uuid, match, ring in NM_PROFILES:
        out.append(f'kf "{path}" "{Path(path).stem}" {uuid} "$(printf "{match}")" {ring}')
    out.append('chmod 0644 "$NE/open.nmconnection"')
    out.append('ln -s /dev/null "$NE/66666666-6666-4666-8666-666666666666.nmmeta"')
    return "\n".join(out)


def _link_cases() -> str:
    out = []
    for name, setup in LINK_CASES:
        out.append(f"clean; {setup.replace('@NIC@', NIC)}\n"
                   f'ls -l "$E" "$U" > link-{name}.files 2>&1\n'
                   f'udevadm test-builtin net_setup_link "/sys/class/net/$ifc" > link-{name}.udev 2>&1\n'
                   f'ethtool -g "$ifc" > link-{name}.rings 2>&1\n'
                   f"apply ring; mv apply-ring.out link-{name}.apply; mv apply-ring.rc link-{name}.apply-rc\n"
                   f"revert ring-{name}")
    return "\n".join(out)


def _ethtool_value(text: str, key: str, section: str = "current") -> int | None:
    """One number of `ethtool -c`/`-g` (the current settings' part for rings)."""
    if "Current hardware settings:" in text:
        text = text.split("Current hardware settings:")[1] if section == "current" else text
    m = re.search(rf"^{re.escape(key)}:\s+(\d+)\s*$", text, re.M)
    return int(m.group(1)) if m else None


def _lines(out: Path, name: str) -> list[str]:
    return (out / f"apply-{name}.out").read_text().splitlines()


def _rc(out: Path, name: str) -> int:
    return int((out / name).read_text().strip())


def _param_problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []
    read = {n: (out / f"param-{n}.txt").read_text().strip() for n in ("before", "ok", "bad", "reverted")}
    notes.append(f"nvme.io_queue_depth: {read['before']} -> apply 512: {read['ok']} -> apply 4096: {read['bad']}"
                 f" -> revert: {read['reverted']}")
    ok = _lines(out, "param-ok")
    if read["ok"] != "512" or _rc(out, "apply-param-ok.rc") != 0 or not any(
            l.startswith("done:") and "nvme.io_queue_depth" in l and "-> 512" in l for l in ok):
        probs.append(f"io_queue_depth 512: the kernel reads {read['ok']}, iommuctl said {ok}")
    direct = (out / "param-direct-4096.txt").read_text().split()
    notes.append(f"the kernel's answer to a direct write of 4096: {' '.join(direct)}")
    bad = _lines(out, "param-bad")
    # iommud must fail where the kernel refuses, with the kernel's errno, and not claim the value.
    refused = direct[0] != "0"
    said_failed = any(l.startswith("failed:") for l in bad)
    if refused != said_failed or _rc(out, "apply-param-bad.rc") != (1 if refused else 0):
        probs.append(f"io_queue_depth 4096: the kernel answers {direct}, iommuctl said {bad}")
    if refused and not any("Invalid argument" in l for l in bad if l.startswith("failed:")) and direct[1] == "EINVAL":
        probs.append(f"io_queue_depth 4096: iommuctl does not quote the kernel's EINVAL: {bad}")
    if refused and read["bad"] != "512":
        probs.append(f"io_queue_depth after the refused 4096 reads {read['bad']}, not 512")
    if read["reverted"] != read["before"]:
        probs.append(f"revert left io_queue_depth at {read['reverted']}, it was {read['before']}")
    return probs


def _modprobe_problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []
    image = (out / "initrd-path.txt").read_text().strip()
    release = image.removeprefix("/boot/initrd.img-")
    listing = (out / "lsinitramfs.txt").read_text()
    holds = bool(re.search(r"/kernel/drivers/nvme/host/nvme\.ko", listing))
    if not holds:
        probs.append(f"lsinitramfs does not list nvme in the test image: {listing[:500]}")
    plan = json.loads((out / "plan-param-load.json").read_text())
    changes = [c for c in plan.get("changes", []) if c.get("kind") == "modprobe-conf"]
    if len(changes) != 1:
        return probs + [f"plan with at = load: modprobe-conf changes {changes}, want one"]
    note = changes[0].get("note") or ""
    notes.append(f"plan note: {note}")
    want_cmd = f"update-initramfs -u -k {release}"
    if holds != (image in note and want_cmd in note):
        probs.append(f"lsinitramfs says the image {'holds' if holds else 'lacks'} nvme; the note says: {note}")
    file_text = (out / "modprobe-file.txt").read_text()
    ours = sorted(l.split() for l in file_text.splitlines() if l.startswith("options "))
    theirs = sorted(l.split() for l in (out / "modprobe-c.txt").read_text().splitlines()
                    if l.startswith("options nvme "))
    notes.append(f"modprobe -c: {[' '.join(t) for t in theirs]}")
    if not ours or ours != theirs:
        probs.append(f"modprobe.d: iommud wrote {ours}, modprobe -c reports {theirs} for nvme")
    before, after = ((out / f"load-{n}.txt").read_text().strip() for n in ("before-reload", "after-reload"))
    if _rc(out, "reload.rc") != 0 or after != "256":
        probs.append(f"reload of nvme (rc {(out / 'reload.rc').read_text().strip()}): io_queue_depth "
                     f"{before} -> {after}, want 256: {(out / 'reload.out').read_text()[-300:]}")
    notes.append(f"reload of nvme: io_queue_depth {before} -> {after}")
    if (out / "modprobe-file-reverted.txt").read_text().strip() != "absent" or any(
            l.startswith("options nvme ") for l in (out / "modprobe-c-reverted.txt").read_text().splitlines()):
        probs.append("revert: /etc/modprobe.d/iommud-nvme.conf or its options line is still there")
    return probs


def _coalesce_problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []
    usecs = {n: _ethtool_value((out / f"coalesce-{n}.txt").read_text(), "rx-usecs")
             for n in ("before", "ok", "bad", "round", "tx", "reverted")}
    notes.append(f"e1000e rx-usecs by ethtool -c: {usecs}")
    if usecs["ok"] != 100 or not any(l.startswith("done:") and "rx-usecs" in l for l in _lines(out, "coal-ok")):
        probs.append(f"rx-usecs 100: ethtool reads {usecs['ok']}, iommuctl said {_lines(out, 'coal-ok')}")
    # The driver refuses 5: ethtool -C fails, and so must iommud, the value unchanged.
    refused = _rc(out, "ethtool-C-5.rc") != 0
    bad = _lines(out, "coal-bad")
    notes.append(f"ethtool -C rx-usecs 5: rc {int(refused)} {(out / 'ethtool-C-5.out').read_text().strip()!r}; "
                 f"iommuctl: {bad}")
    if refused != any(l.startswith("failed:") for l in bad) or (refused and usecs["bad"] != 100):
        probs.append(f"rx-usecs 5: ethtool -C {'refuses' if refused else 'takes'} it, iommuctl said {bad}, "
                     f"ethtool -c then reads {usecs['bad']}")
    # 7000 is accepted and read back as 7142: never "done" with 7000, and the NIC left as it was.
    rnd = _lines(out, "coal-round")
    notes.append(f"rx-usecs 7000: iommuctl: {rnd}; ethtool -c then reads {usecs['round']}")
    if any(l.startswith("done:") for l in rnd) and usecs["round"] != 7000:
        probs.append(f"rx-usecs 7000: iommuctl says done, ethtool reads {usecs['round']}")
    direct = _ethtool_value((out / "coalesce-direct-7000.txt").read_text(), "rx-usecs")
    notes.append(f"ethtool -C rx-usecs 7000 then ethtool -c: {direct}")
    if direct != 7000 and not any(l.startswith("failed:") and f"reads back {direct}" in l for l in rnd):
        probs.append(f"rx-usecs 7000: the driver keeps {direct} (ethtool), iommuctl said {rnd}")
    if usecs["round"] != 100:
        probs.append(f"rx-usecs 7000: iommuctl left the NIC at {usecs['round']} (ethtool), not at its 100")
    tx = _lines(out, "coal-tx")
    notes.append(f"tx-usecs 10: ethtool -C rc {_rc(out, 'ethtool-C-tx.rc')}; iommuctl: {tx}")
    if _rc(out, "ethtool-C-tx.rc") != 0 and any(l.startswith("done:") for l in tx):
        probs.append(f"tx-usecs: ethtool -C refuses it, iommuctl said {tx}")
    if usecs["reverted"] != usecs["before"]:
        probs.append(f"revert left rx-usecs at {usecs['reverted']}, it was {usecs['before']}")
    return probs


_LINK_FILE = re.compile(r"^ID_NET_LINK_FILE=(\S+)$", re.M)
_UDEV_OWNER = re.compile(r"systemd-udevd (?:may )?also sets? it \(rx=(\d+) in (\S+):\d+\)")


def _link_problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []
    for name, _ in LINK_CASES:
        udev = (out / f"link-{name}.udev").read_text()
        m = _LINK_FILE.search(udev)
        applied = m.group(1) if m else None
        ring = _ethtool_value((out / f"link-{name}.rings").read_text(), "RX")
        apply_out = (out / f"link-{name}.apply").read_text()
        owners = _UDEV_OWNER.findall(apply_out)
        # What the file udev applied sets for the ring: the value udev just put on the NIC, when it
        # is not the driver's default of 256.
        sets_ring = ring is not None and ring != 256
        want = [(str(ring), applied)] if sets_ring and applied else []
        # udev names the .link file; iommud the file that holds the line, which may be a drop-in of it.
        got = [(v, applied if applied and Path(f).parent.name == Path(applied).name + ".d" else f) for v, f in owners]
        notes.append(f".link {name}: udev applies {applied} (RX ring {ring}); iommud: {got or 'no owner'}")
        if got != want:
            probs.append(f".link {name}: udevadm test-builtin applies {applied} and the ring is {ring}; iommud "
                         f"names {got or 'no owner'}: {apply_out.strip()[-400:]}")
        if "done:" not in apply_out:
            probs.append(f".link {name}: the ring change itself was not done: {apply_out.strip()[-300:]}")
    return probs


_NM_OWNER = re.compile(r"NetworkManager (?:may )?also sets? it \(rx=(\d+) in (\S+):\d+\)")


def _nm_problems(out: Path, notes: list[str]) -> list[str]:
    """The profiles iommud names as setting the RX ring must be exactly those NetworkManager
    lists as available for the NIC (its own matching, shadowing, permission and tombstone rules)."""
    if _rc(out, "nm-online.rc") != 0:
        return [f"NetworkManager did not finish starting: {(out / 'nm.log').read_text()[-800:]}"]
    files = {}
    for line in (out / "nm-connections.txt").read_text().splitlines():
        uuid, _, path = line.partition(":")
        files[uuid] = path
    available = [x.strip() for x in (out / "nm-available.txt").read_text().split("|") if x.strip()]
    # `-g` prints "UUID | id | UUID | id"; the UUIDs are the keys.
    theirs = sorted(files.get(x, x) for x in available if x in files)
    apply_out = (out / "nm.apply").read_text()
    ours = sorted(f for _, f in _NM_OWNER.findall(apply_out))
    notes.append(f"NetworkManager: loaded {sorted(files.values())}; available for the NIC {theirs}; iommud: {ours}")
    probs = []
    if ours != theirs:
        probs.append(f"NetworkManager lists {theirs} as available for the NIC, iommud names {ours}: "
                     f"{apply_out.strip()[-600:]}")
    if not theirs:
        probs.append("NetworkManager lists no profile for the NIC: the layout tests nothing")
    return probs


def problems(out: Path, notes: list[str]) -> list[str]:
    probs: list[str] = []
    for part in (_param_problems, _modprobe_problems, _coalesce_problems, _link_problems, _nm_problems):
        try:
            probs += part(out, notes)
        except (FileNotFoundError, ValueError, IndexError, json.JSONDecodeError) as e:
            probs.append(f"{part.__name__}: {type(e).__name__}: {e}")
    return probs


def run_adapters(series: str, iommuctl: Path, out_dir: Path | None = None, echo: bool = False) -> scenarios.Outcome:
    kernel = vmlib.find_kernel(series)
    files, _ = scenarios._prepare_iommuctl(iommuctl)
    for name, text in POLICIES.items():
        files[f"pol-{name}/50-vm.toml"] = text
    script = (GUEST.replace("@NVME@", NVME).replace("@NIC@", NIC).replace("@LINK_CASES@", _link_cases())
              .replace("@NM_PROFILES@", _nm_profiles()))
    machine = vmlib.Machine(iommu="intel", caching_mode=False)
    r = vmlib.boot(kernel, machine, script, files_in=files, udev=True, timeout=300, out_dir=out_dir, echo=echo)
    probs: list[str] = []
    notes: list[str] = []
    try:
        r.check()
        probs += problems(r.out_dir, notes)
    except vmlib.GuestFailed as e:
        probs.append(f"{type(e).__name__}: {e}")
    return scenarios.Outcome(f"adapters on {series}", r.seconds, r.accel, probs, notes, r.out_dir)
