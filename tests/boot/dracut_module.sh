#!/usr/bin/env bash
# The boot-time scripts as CMake configured them: POSIX sh / bash syntax and shellcheck for all
# four, and a real dracut image (Debian's dracut-core, beside initramfs-tools) built with the
# 90iommud module, which must hold iommud with its libraries, iommud.conf, the policy directories
# and the pre-trigger hook. The host's files stay untouched: in a mount namespace of its own, the
# sbindir and /etc get overlays holding the built iommud, a configuration and a policy, and
# dracut reads a copy of its modules with ours added. Needs root (mounts); it FAILS with the
# reason when dracut or shellcheck is missing. (initramfs-tools' side is booted in tests/vm: `run boot`.)
# Usage: dracut_module.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: dracut_module.sh BUILD_DIR}
pkg=$build/packaging
for tool in shellcheck dracut lsinitrd unshare; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (scripts/setup --tests: shellcheck, dracut-core)" >&2; exit 1; }
done
[[ $EUID -eq 0 ]] || { echo "FAIL: needs root (mount namespace, overlays)" >&2; exit 1; }

fail=0
for f in "$pkg/initramfs-tools/hooks/iommud" "$pkg/initramfs-tools/scripts/init-premount/iommud" \
  "$pkg/dracut/90iommud/iommud-early.sh"; do
  if sh -n "$f" && shellcheck -s sh "$f"; then echo "ok: sh -n, shellcheck: ${f#"$pkg"/}"; else fail=1; fi
done
f=$pkg/dracut/90iommud/module-setup.sh
if bash -n "$f" && shellcheck -s bash "$f"; then echo "ok: bash -n, shellcheck: ${f#"$pkg"/}"; else fail=1; fi

sbindir=$(sed -nE 's|^    require_binaries (/.*)/iommud .*|\1|p' "$f")
[[ -n $sbindir ]] || { echo "FAIL: no require_binaries line in $f" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/sbin/upper" "$tmp/sbin/work" "$tmp/etc/upper/iommud/policies.d" "$tmp/etc/work" "$tmp/dracut"
cp "$build/bin/iommud" "$tmp/sbin/upper/iommud"
printf 'log-level = "debug"\n' >"$tmp/etc/upper/iommud/iommud.conf"
cat >"$tmp/etc/upper/iommud/policies.d/50-boot.toml" <<'TOML'
[[rule]]
name = "root-nvme"
description = "identity for the root NVMe, set before it is mounted"
when = "boot"
domain = "identity"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
TOML
ln -s /dev/null "$tmp/etc/upper/iommud/policies.d/40-masked.toml"
cp -a /usr/lib/dracut/. "$tmp/dracut/"
cp -a "$pkg/dracut/90iommud" "$tmp/dracut/modules.d/"
# --no-kernel: the module, not a kernel's drivers, is under test (and no kernel is installed).
# shellcheck disable=SC2016 # expanded by the inner bash, from its arguments
unshare -m bash -euc '
  mount --make-rprivate /
  mount -t overlay overlay -o "lowerdir=$2,upperdir=$1/sbin/upper,workdir=$1/sbin/work" "$2"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc/upper,workdir=$1/etc/work" /etc
  dracutbasedir=$1/dracut dracut --quiet --no-kernel --no-hostonly --modules iommud --kver 0.0 --force \
    --no-compress "$1/image"
' _ "$tmp" "$sbindir"
listing=$(lsinitrd "$tmp/image")
for want in "${sbindir#/}/iommud" etc/iommud/iommud.conf etc/iommud/policies.d/50-boot.toml \
  "etc/iommud/policies.d/40-masked.toml -> /dev/null" usr/lib/dracut/hooks/pre-trigger/90-iommud-early.sh \
  libsystemd.so libudev.so libnl-genl-3.so; do
  if grep -qF -- "$want" <<<"$listing"; then echo "ok: the image holds $want"; else
    echo "FAIL: the dracut image lacks $want" >&2
    fail=1
  fi
done
hook=$(lsinitrd -f usr/lib/dracut/hooks/pre-trigger/90-iommud-early.sh "$tmp/image")
if grep -qF -- "$sbindir/iommud --once --early || :" <<<"$hook"; then echo "ok: the hook runs iommud --once --early"; else
  echo "FAIL: the hook does not run $sbindir/iommud --once --early:" >&2
  echo "$hook" >&2
  fail=1
fi
exit $fail
