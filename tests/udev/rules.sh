#!/usr/bin/env bash
# udev/60-iommud.rules through udev's own rule engine: `udevadm test` on synthetic devices
# (umockdev-run gives it a /sys of our making), with only our rules file loaded (tmpfs over the
# rules directories in a mount namespace of its own). Checks that the devices iommud tunes get
# TAG systemd on every event but remove and SYSTEMD_WANTS=iommud.service on add only, others get nothing,
# and udev reports no error in the file. Needs root for the mounts: CI runs it as root.
# Usage: rules.sh RULES_FILE
set -euo pipefail
rules=$(realpath "${1:?usage: rules.sh RULES_FILE}")

if [[ ${IOMMUD_RULES_INNER:-} != 1 ]]; then
  [[ $EUID -eq 0 ]] || { echo "FAIL: needs root: mounts over the udev rules directories in a private mount namespace" >&2; exit 1; }
  for tool in udevadm umockdev-run unshare; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian packages udev, umockdev, util-linux)" >&2; exit 1; }
  done
  IOMMUD_RULES_INNER=1 exec unshare --mount --propagation private "$0" "$@"
fi

# A tmpfs over /run: the test runs' udev database goes nowhere, and nothing is left on the host.
mount -t tmpfs tmpfs /run
mkdir -p /run/udev/rules.d /run/iommud-test/rules.d
cp "$rules" /run/iommud-test/rules.d/
# Only our rules: udev reads /etc, /run, /usr/local/lib and /usr/lib udev/rules.d (and /lib's).
for dir in /etc/udev/rules.d /usr/local/lib/udev/rules.d /usr/lib/udev/rules.d /lib/udev/rules.d; do
  if [[ -d $dir ]]; then mount --bind /run/iommud-test/rules.d "$dir"; fi
done

# Devices as umockdev describes them (umockdev-record's format).
devices=/run/iommud-test/devices.umockdev
cat >"$devices" <<'DEVICES'
P: /devices/pci0000:00/0000:00:1d.0/0000:3d:00.0
E: SUBSYSTEM=pci
E: DRIVER=nvme
E: PCI_CLASS=10802
A: class=0x010802

P: /devices/pci0000:00/0000:00:1c.0/0000:05:00.0
E: SUBSYSTEM=pci
E: DRIVER=igb
E: PCI_CLASS=20000
A: class=0x020000

P: /devices/pci0000:00/0000:00:1c.0/0000:05:00.0/net/enp5s0
E: SUBSYSTEM=net
E: INTERFACE=enp5s0
E: IFINDEX=2

P: /devices/pci0000:00/0000:00:1c.0
E: SUBSYSTEM=pci
E: DRIVER=pcieport
E: PCI_CLASS=60400
A: class=0x060400

P: /devices/pci0000:00/0000:00:14.3
E: SUBSYSTEM=pci
E: DRIVER=iwlwifi
E: PCI_CLASS=28000
A: class=0x028000

P: /devices/pci0000:00/0000:00:14.3/net/wlp0s20f3
E: SUBSYSTEM=net
E: INTERFACE=wlp0s20f3
E: IFINDEX=3

P: /devices/pci0000:00/0000:00:14.0
E: SUBSYSTEM=pci
E: DRIVER=xhci_hcd
E: PCI_CLASS=C0330
A: class=0x0c0330

P: /devices/pci0000:00/0000:00:14.0/usb2/2-1
E: SUBSYSTEM=usb
E: DEVTYPE=usb_device

P: /devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0
E: SUBSYSTEM=usb
E: DEVTYPE=usb_interface
E: DRIVER=r8152

P: /devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/net/enx001122334455
E: SUBSYSTEM=net
E: INTERFACE=enx001122334455
E: IFINDEX=4

P: /devices/pci0000:00/0000:00:0d.2/domain0
E: SUBSYSTEM=thunderbolt
E: DEVTYPE=thunderbolt_domain

P: /devices/pci0000:00/0000:00:0d.2/domain0/0-0/0-1
E: SUBSYSTEM=thunderbolt
E: DEVTYPE=thunderbolt_device
DEVICES

fail=0
expect() {  # wanted|nothing ACTION DEVPATH
  local want=$1 action=$2 dev=/sys$3 out
  rm -rf /run/udev/data  # else a remove event shows what an earlier test run stored
  out=$(umockdev-run --device "$devices" -- udevadm test --action="$action" "$dev" 2>&1) || {
    echo "FAIL: udevadm test --action=$action $dev failed:" >&2
    echo "$out" >&2
    fail=1
    return
  }
  if grep -E "$(basename "$rules")(:[0-9]+)?:? " <<<"$out" | grep -viE 'Reading rules file' >&2; then
    echo "FAIL: udev reports the lines above in $(basename "$rules")" >&2
    fail=1
  fi
  local tagged=0 wants=0
  grep -qxE 'CURRENT_TAGS=.*:systemd:.*' <<<"$out" && tagged=1
  grep -qxE 'SYSTEMD_WANTS=(.* )?iommud\.service( .*)?' <<<"$out" && wants=1
  if [[ $want == tagged && ($tagged != 1 || $wants != 0) ]]; then
    echo "FAIL: $action $3: expected TAG systemd without SYSTEMD_WANTS; udevadm test says:" >&2
    grep -E '^[A-Z_]+=' <<<"$out" >&2
    fail=1
  elif [[ $want == wanted && ($tagged != 1 || $wants != 1) ]]; then
    echo "FAIL: $action $3: expected TAG systemd and SYSTEMD_WANTS=iommud.service; udevadm test says:" >&2
    grep -E '^[A-Z_]+=' <<<"$out" >&2
    fail=1
  elif [[ $want == nothing && ($tagged != 0 || $wants != 0) ]]; then
    echo "FAIL: $action $3: expected nothing of iommud; udevadm test says:" >&2
    grep -E '^[A-Z_]+=' <<<"$out" >&2
    fail=1
  else
    echo "ok: $action $3: $want"
  fi
}

nvme=/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0
nic=/devices/pci0000:00/0000:00:1c.0/0000:05:00.0
expect wanted add "$nvme"
expect wanted add "$nic"
expect wanted add "$nic/net/enp5s0"
for action in bind change; do
  expect tagged "$action" "$nvme"
  expect tagged "$action" "$nic"
  expect tagged "$action" "$nic/net/enp5s0"
done
expect nothing remove "$nvme"
expect nothing remove "$nic/net/enp5s0"
expect wanted add /devices/pci0000:00/0000:00:0d.2/domain0/0-0/0-1
expect nothing add /devices/pci0000:00/0000:00:0d.2/domain0
expect nothing add /devices/pci0000:00/0000:00:1c.0
expect nothing add /devices/pci0000:00/0000:00:14.3
expect nothing add /devices/pci0000:00/0000:00:14.3/net/wlp0s20f3
expect nothing add /devices/pci0000:00/0000:00:14.0
expect nothing add /devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/net/enx001122334455
exit $fail
