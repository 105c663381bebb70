#!/usr/bin/env bash
# Adds to a host root (a snapshot of this host, as `iommuctl snapshot` takes it) the devices the
# completion tests need, laid out as the kernel lays them out: an NVMe drive with a namespace, a
# partition and a hidden multipath path, a NIC, a fabrics controller and a virtual netdev (which
# iommuctl does not accept), and a PCI function in domain 0001.
set -euo pipefail
root=${1:?usage: $0 ROOT}
sys=$root/sys
pci=$sys/devices/pci0000:00

# dev ADDRESS UEVENT: a PCI function below the host bridge, with its bus link.
dev() {
  local dir=$pci/$1
  [[ $1 == 0001:* ]] && dir=$sys/devices/pci0001:00/$1
  mkdir -p "$dir" "$sys/bus/pci/devices"
  printf '%b' "$2" >"$dir/uevent"
  echo fixed >"$dir/removable"
  ln -sfn "../../..${dir#"$sys"}" "$sys/bus/pci/devices/$1"
}
# link CLASS NAME TARGET (below /sys)
link() {
  mkdir -p "$sys/class/$1"
  ln -sfn "../../${3#/}" "$sys/class/$1/$2"
}

dev 0000:00:1e.0 'DRIVER=nvme\nPCI_CLASS=10802\nPCI_ID=144D:A808\nPCI_SUBSYS_ID=144D:A801\n'
ctrl=$pci/0000:00:1e.0/nvme/nvme7
mkdir -p "$ctrl/nvme7n1/nvme7n1p1" "$ctrl/nvme7c7n1"
echo "Synthetic NVMe" >"$ctrl/model"
echo 259:0 >"$ctrl/nvme7n1/dev"
echo 259:1 >"$ctrl/nvme7n1/nvme7n1p1/dev"
link nvme nvme7 "devices/pci0000:00/0000:00:1e.0/nvme/nvme7"
link block nvme7n1 "devices/pci0000:00/0000:00:1e.0/nvme/nvme7/nvme7n1"
link block nvme7n1p1 "devices/pci0000:00/0000:00:1e.0/nvme/nvme7/nvme7n1/nvme7n1p1"
link block nvme7c7n1 "devices/pci0000:00/0000:00:1e.0/nvme/nvme7/nvme7c7n1"

dev 0000:00:1f.6 'DRIVER=e1000e\nPCI_CLASS=20000\nPCI_ID=8086:15BB\nPCI_SUBSYS_ID=8086:0000\n'
mkdir -p "$pci/0000:00:1f.6/net/enpsynth0"
echo 0x1003 >"$pci/0000:00:1f.6/net/enpsynth0/flags"
echo 97 >"$pci/0000:00:1f.6/net/enpsynth0/ifindex"
link net enpsynth0 "devices/pci0000:00/0000:00:1f.6/net/enpsynth0"

dev 0001:00:02.0 'PCI_CLASS=48000\nPCI_ID=1B36:0001\nPCI_SUBSYS_ID=1AF4:1100\n'

mkdir -p "$sys/devices/virtual/net/brsynth0" "$sys/devices/virtual/nvme-fabrics/ctl/nvme9"
link net brsynth0 "devices/virtual/net/brsynth0"
link nvme nvme9 "devices/virtual/nvme-fabrics/ctl/nvme9"
