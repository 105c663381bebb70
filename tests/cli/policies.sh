#!/usr/bin/env bash
# iommuctl check | plan | explain as a user runs them: exit codes, what goes to stdout and
# stderr, and the shipped policies against this very host.
set -euo pipefail
iommuctl=${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
src=${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The shipped policies are valid, and say so in one line.
"$iommuctl" check "$src/policies" >"$work/ok.txt" || fail "check of the shipped policies exited $?: $(cat "$work/ok.txt")"
grep -Eq '^[0-9]+ files, [0-9]+ rules: valid$' "$work/ok.txt" || fail "unexpected check output: $(cat "$work/ok.txt")"

# A broken file: exit 1, file:line:col on stdout, nothing else lost.
if "$iommuctl" check "$src/tests/data/policies/bad/syntax.toml" >"$work/bad.txt"; then fail "check of a broken file exited 0"; fi
grep -q "syntax.toml:5:9: error: no value after '='" "$work/bad.txt" || fail "no located error: $(cat "$work/bad.txt")"

# A directory of the admin layer replaces a shipped file of the same name, and an admin mask hides one.
mkdir -p "$work/etc" && chmod 0755 "$work" "$work/etc"
ln -s /dev/null "$work/etc/40-nvme-vtd-iotlb-sync-map.toml"
"$iommuctl" check "$work/etc" "$src/policies" >"$work/layers.txt" || fail "layered check exited $?"
grep -q "40-nvme-vtd-iotlb-sync-map.toml: masked by $work/etc/40-nvme-vtd-iotlb-sync-map.toml" "$work/layers.txt" \
  || fail "the mask is not reported: $(cat "$work/layers.txt")"

# A rule that can never act is a warning: exit 0, and 1 with --strict.
printf '[[rule]]\nname = "never"\ndescription = "identity, not accepted"\ndomain = "identity"\n' >"$work/weak.toml"
"$iommuctl" check "$work/weak.toml" >"$work/weak.txt" || fail "check of a valid file with a warning exited $?"
grep -q "weak.toml:4:10: warning: rule 'never' asks for identity but does not accept" "$work/weak.txt" \
  || fail "no needs-acceptance warning: $(cat "$work/weak.txt")"
if "$iommuctl" check --strict "$work/weak.toml" >/dev/null; then fail "check --strict with a warning exited 0"; fi
"$iommuctl" check --strict "$src/policies" >/dev/null || fail "check --strict of the shipped policies exited $?"

# A drop-in (README's example) is checked among the layers it overrides, named in one line.
mkdir -p "$work/drop/etc/iommud/policies.d"
cat >"$work/drop/etc/iommud/policies.d/90-local.toml" <<'TOML'
[[override]]
rule = "nvme-shared-group-vtd-regression"
mode = "apply"
accept = ["no-isolation"]
TOML
"$iommuctl" --root "$work/drop" check "$work/drop/etc/iommud/policies.d/90-local.toml" >"$work/drop.txt" \
  || fail "check of a drop-in exited $?: $(cat "$work/drop.txt")"
grep -Eq "^also read the layers: $work/drop/etc/iommud/policies.d, .+$" "$work/drop.txt" \
  || fail "check of a drop-in does not say what else it read: $(cat "$work/drop.txt")"
if grep -q "replaced by" "$work/drop.txt"; then fail "the drop-in replaces itself: $(cat "$work/drop.txt")"; fi

# plan and explain on this host with the shipped policies: they run and their JSON parses.
"$iommuctl" plan --policies "$src/policies" >"$work/plan.txt" || fail "plan exited $?"
grep -q '^Plan' "$work/plan.txt" || fail "plan printed no header: $(head -3 "$work/plan.txt")"
"$iommuctl" plan --json --policies "$src/policies" >"$work/plan.json" || fail "plan --json exited $?"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["schema_version"]==1 and "changes" in j' \
  "$work/plan.json" || fail "plan --json is not the documented JSON"
first=$(python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"]; print(d[0]["address"] if d else "")' \
  < <("$iommuctl" status --json))
if [[ -n $first ]]; then
  "$iommuctl" explain "$first" --policies "$src/policies" >"$work/explain.txt" || fail "explain $first exited $?"
  grep -q "^Device $first" "$work/explain.txt" || fail "explain printed no device line"
  "$iommuctl" explain --json "$first" --policies "$src/policies" | python3 -m json.tool >/dev/null \
    || fail "explain --json is not JSON"
fi
if "$iommuctl" explain no-such-device --policies "$src/policies" 2>"$work/err.txt"; then fail "explain of a missing device exited 0"; fi
grep -q "no device no-such-device" "$work/err.txt" || fail "unhelpful error: $(cat "$work/err.txt")"

# --boot: as iommud --early, only rules with when = "boot"; not together with --hotplug.
"$iommuctl" plan --boot --policies "$src/policies" >"$work/boot.txt" || fail "plan --boot exited $?"
grep -q '^Plan (at boot, as iommud --early' "$work/boot.txt" || fail "plan --boot says no boot: $(head -3 "$work/boot.txt")"
"$iommuctl" plan --boot --json --policies "$src/policies" | grep -q '"trigger": "boot"' || fail "plan --boot --json: no boot trigger"
if "$iommuctl" plan --boot --hotplug --policies "$src/policies" >/dev/null 2>&1; then fail "plan --boot --hotplug exited 0"; fi

# A broken policy set: plan refuses, with the located error on stderr.
mkdir "$work/broken" && cp "$src/tests/data/policies/bad/syntax.toml" "$work/broken/"
if "$iommuctl" plan --policies "$work/broken" 2>"$work/err.txt" >/dev/null; then fail "plan with a broken policy exited 0"; fi
grep -q "syntax.toml:5:9" "$work/err.txt" || fail "plan did not say what is broken: $(cat "$work/err.txt")"
echo "ok"

# apply and revert change the running system: under --root they refuse, and say why.
for verb in apply revert; do
  if "$iommuctl" --root "$work" "$verb" 2>"$work/$verb.err"; then fail "$verb under --root exited 0"; fi
  grep -q "changes the running system; --root only reads" "$work/$verb.err" || fail "$verb: $(cat "$work/$verb.err")"
done
