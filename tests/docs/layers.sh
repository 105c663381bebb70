#!/usr/bin/env bash
# The layers of docs/ARCHITECTURE.md hold: each src/ directory includes only what its row of the
# table says it may use, and each C library of an adapter is included by its adapter alone. Each
# failure is reported with FILE:LINE: the include. It first shows, on a planted tree, that each
# kind of include it forbids is found, and an adapter's own library is not.
#   layers.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd -P)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$here/../support/failures.sh"

# dir|regex|why: no file under src/DIR includes what REGEX matches.
rules=(
  "core|adapters/|app/|config/|bin/|support/|the core is pure: it includes the core only"
  "core|systemd/|libudev|netlink/|toml|nlohmann/|fmt/|spdlog/|the core uses the standard library only"
  "support|adapters/|app/|config/|bin/|support (the descriptor owner, the whole-file read) uses the core only"
  "config|adapters/|app/|bin/|config uses the core and support only"
  "adapters|app/|config/|bin/|adapters use the core and support (and each other) only"
  "app|bin/|app does not know its programs"
  "app|systemd/|libudev|netlink/|toml|app sees no C library of an adapter (the loop is adapters/systemd's EventLoop)"
  "bin|systemd/|libudev|netlink/|toml|the programs see no C library of an adapter"
  # app's rooms (docs/ARCHITECTURE.md): host <- report, change <- fleet, measure <- worker <- daemon.
  "app/host|app/(report|change|fleet|measure|worker|daemon)/|the host model uses no other room"
  "app/report|app/(change|fleet|measure|worker|daemon)/|report renders the host: it uses the host only"
  "app/change|app/(report|fleet|measure|worker|daemon)/|change uses the host only"
  "app/fleet|app/(report|measure|worker|daemon)/|fleet uses the host and change only"
  "app/measure|app/(fleet|worker|daemon)/|measure uses the host, change and report only"
  "app/worker|app/daemon/|the worker does not know the daemon's loop"
  "bin/iommuctl|app/(worker|daemon)/|iommuctl links no part of the daemon"
)
# library|the one directory (an extended regex) whose files may include it
owners=(
  "systemd/|src/adapters/(systemd|dbus)/"
  "libudev|src/adapters/udev/"
  "netlink/|src/adapters/ethtool/"
  "toml|src/config/"
)

# violations TREE: each broken rule, a line "RULE: FILE:LINE:#include ..." (paths relative to TREE).
violations() {
  local tree=$1 rule dir rest re why owner lib own
  for rule in "${rules[@]}"; do
    dir=${rule%%|*}
    rest=${rule#*|}
    why=${rest##*|}
    re=${rest%|*}
    (cd "$tree" || exit 1; grep -rnE "^#include[[:space:]]*[<\"]($re)" "src/$dir" 2>/dev/null || true) | sed "s#^#$why: #"
  done
  for owner in "${owners[@]}"; do
    lib=${owner%%|*}
    own=${owner#*|}
    (cd "$tree" || exit 1; grep -rnE "^#include[[:space:]]*<$lib" src 2>/dev/null || true) | grep -vE "^$own" |
      sed "s#^#<$lib...> outside $own: #" || true
  done
}

# A planted tree breaks each rule once: each must be found, and nothing else.
plant=$work/plant
mkdir -p "$plant"/src/{core,support,config,adapters/udev,adapters/sysfs,app/report,app/worker,bin/iommuctl}
echo '#include "adapters/sysfs/root.hpp"' >"$plant/src/core/a.cpp"
echo '#include <nlohmann/json.hpp>' >"$plant/src/core/b.cpp"
echo '#include "app/x.hpp"' >"$plant/src/config/c.cpp"
echo '#include "adapters/sysfs/root.hpp"' >"$plant/src/support/k.cpp"
echo '#include "config/x.hpp"' >"$plant/src/adapters/sysfs/d.cpp"
echo '#include "bin/x.hpp"' >"$plant/src/app/e.cpp"
echo '#include <systemd/sd-event.h>' >"$plant/src/app/f.cpp"
echo '#include <toml.hpp>' >"$plant/src/bin/g.cpp"
echo '#include "app/change/apply.hpp"' >"$plant/src/app/report/h.cpp"
echo '#include "app/daemon/daemon.hpp"' >"$plant/src/app/worker/i.cpp"
echo '#include "app/worker/batch.hpp"' >"$plant/src/bin/iommuctl/j.cpp"
echo '#include <libudev.h>' >"$plant/src/adapters/udev/ok.cpp"  # its owner: no finding
found=$(violations "$plant")
planted "$found" core/a.cpp core/b.cpp support/k.cpp config/c.cpp adapters/sysfs/d.cpp app/e.cpp app/f.cpp bin/g.cpp \
  app/report/h.cpp app/worker/i.cpp bin/iommuctl/j.cpp
if grep -q "adapters/udev/ok.cpp" <<<"$found"; then fail "libudev in its own adapter is reported: $found"; fi

found=$(violations "$src")
[[ -z $found ]] || fail "includes across the layers of docs/ARCHITECTURE.md:"$'\n'"$found"
finish
