#!/usr/bin/env bash
# The layers of docs/ARCHITECTURE.md hold: each src/ directory includes only what its row of the
# table says it may use. Each failure is reported as FILE:LINE: the include.
#   layers.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd -P)
cd "$src"
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$here/../support/failures.sh"

# forbid DIR REGEX WHY: no file under src/DIR includes what REGEX matches.
forbid() {
  local dir=$1 re=$2 why=$3 hits
  hits=$(grep -rnE "^#include[[:space:]]*[<\"]($re)" "src/$dir" || true)
  [[ -z $hits ]] || fail "src/$dir: $why:"$'\n'"$hits"
}

forbid core 'adapters/|app/|config/|bin/' "the core is pure: it includes the core only"
forbid core 'systemd/|libudev|netlink/|toml|nlohmann/|fmt/|spdlog/' "the core uses the standard library only"
forbid config 'adapters/|app/|bin/' "config uses the core only"
forbid adapters 'app/|config/|bin/' "adapters use the core (and each other) only"
forbid app 'bin/' "app does not know its programs"
forbid app 'systemd/|libudev|netlink/|toml' "app sees no C library of an adapter (the loop is adapters/systemd's EventLoop)"
forbid bin 'systemd/|libudev|netlink/|toml' "the programs see no C library of an adapter"
for lib in 'systemd/' 'libudev' 'netlink/' 'toml'; do
  case $lib in
    systemd/) own='src/adapters/(systemd|dbus)/' ;;
    libudev) own='src/adapters/udev/' ;;
    netlink/) own='src/adapters/ethtool/' ;;
    toml) own='src/config/' ;;
  esac
  hits=$(grep -rnE "^#include[[:space:]]*<$lib" src | grep -vE "^$own" || true)
  [[ -z $hits ]] || fail "<$lib...> outside $own:"$'\n'"$hits"
done
finish
