#!/usr/bin/env bash
# The journal catalog as journalctl reads it: compiled into a private root with --update-catalog,
# listed back with --list-catalog, and the same IDs as src/app/change/message_ids.hpp, each once.
# Usage: catalog.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: catalog.sh SOURCE_DIR}
catalog=$src/catalog/iommud.catalog
header=$src/src/app/change/message_ids.hpp
command -v journalctl >/dev/null || { echo "FAIL: journalctl not found (Debian package systemd)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/lib/systemd/catalog"
cp "$catalog" "$root/usr/lib/systemd/catalog/"

# journalctl reports a malformed entry on stderr and goes on, so its silence is part of the check.
if ! journalctl --root="$root" --update-catalog 2>"$root/update.err" || [[ -s $root/update.err ]]; then
  echo "FAIL: journalctl --update-catalog:" >&2
  cat "$root/update.err" >&2
  exit 1
fi
listed=$(journalctl --root="$root" --list-catalog | awk '{print $1}' | sort)

in_header=$(grep -oE 'inline constexpr std::string_view k[A-Za-z]+ = "[0-9a-f]{32}"' "$header" |
            grep -oE '[0-9a-f]{32}' | sort)
in_catalog=$(grep -E '^-- ' "$catalog" | awk '{print $2}' | sort)

fail=0
check_same() {  # NAME1 LIST1 NAME2 LIST2
  if [[ $2 != "$4" ]]; then
    echo "FAIL: $1 and $3 differ (< only in $1, > only in $3):" >&2
    diff <(echo "$2") <(echo "$4") | grep '^[<>]' >&2 || true
    fail=1
  fi
}
[[ $(echo "$in_header" | wc -l) -eq 14 ]] || { echo "FAIL: message_ids.hpp holds $(echo "$in_header" | wc -l) IDs, not 14" >&2; fail=1; }
dups=$(echo "$in_catalog" | uniq -d)
[[ -z $dups ]] || { echo "FAIL: IDs twice in the catalog: $dups" >&2; fail=1; }
dups=$(echo "$in_header" | uniq -d)
[[ -z $dups ]] || { echo "FAIL: IDs twice in message_ids.hpp: $dups" >&2; fail=1; }
check_same message_ids.hpp "$in_header" iommud.catalog "$in_catalog"
check_same message_ids.hpp "$in_header" "journalctl --list-catalog" "$listed"

# Every entry has the headers journalctl -x shows, and substitutes only iommud's fields.
awk -v file="$catalog" '
  /^-- / { if (id) check(); id = $2; n = 0; delete seen; inhead = 1; next }
  inhead && /^$/ { inhead = 0; next }
  inhead { split($0, kv, ": "); seen[kv[1]] = 1 }
  function check() {
    for (h in want) if (!(h in seen)) { printf "FAIL: %s: entry %s has no %s: header\n", file, id, h > "/dev/stderr"; bad = 1 }
  }
  BEGIN { want["Subject"]; want["Defined-By"]; want["Support"]; want["Documentation"] }
  END { if (id) check(); exit bad }
' "$catalog" || fail=1
unknown=$(grep -oE '@[A-Z0-9_]+@' "$catalog" | sort -u |
          grep -vxE '@IOMMUD_(DEVICE|NAME|GROUP|RULE|POLICY|KIND|OBJECT|KEY|FROM|TO|RISK|IDENTITY|EXPOSURE)@' || true)
[[ -z $unknown ]] || { echo "FAIL: substitutions of fields iommud does not write: $unknown" >&2; fail=1; }

((fail == 0)) && echo "catalog: $(echo "$listed" | wc -l) entries, the same IDs as message_ids.hpp"
exit $fail
