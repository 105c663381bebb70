#!/usr/bin/env bash
# The fleet mixin (monitoring/) judged by Prometheus' own tool: the rules load (promtool check
# rules), every alert fires on an unhealthy host and not on a healthy one (promtool test rules),
# the dashboard is valid JSON with unique panel ids whose every query PromQL accepts, and every
# iommud metric the rules, their tests and the dashboard name is one iommud writes.
# promtool (Debian package prometheus) and python3 missing are failures, not skips.
set -euo pipefail
src=$(cd "${1:?usage: $0 SOURCE_DIR}" && pwd)
for tool in promtool python3; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool not found: the mixin cannot be checked without it" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mon=$src/monitoring

promtool check rules "$mon/iommud.rules.yml"
promtool test rules "$mon/tests/iommud.rules.test.yml"

python3 - "$mon" "$src/src/app/fleet/fleet_export.cpp" "$work/dashboard.rules.json" <<'PY'
import json, re, sys
mon, exporter, out = sys.argv[1:]
fail = []
dash = json.load(open(f"{mon}/dashboards/iommud.json"))  # a JSON error fails here, with its line

variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
if variables.get("datasource", {}).get("type") != "datasource":
    fail.append("no ${datasource} variable of type datasource")

# Grafana's variables as the query reaches Prometheus: $host is a regex of the chosen hosts.
substitutes = {"host": ".+", "__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
def substituted(expr):
    def one(m):
        name = m.group(1) or m.group(2)
        if name not in substitutes:
            fail.append(f"unknown variable ${name} in {expr!r}")
        return substitutes.get(name, "")
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)

ids, rules = set(), []
for p in dash["panels"]:
    pid, title = p.get("id"), p.get("title", "?")
    if pid is None or pid in ids:
        fail.append(f"panel {title!r}: id {pid} missing or used twice")
    ids.add(pid)
    if not all(k in p.get("gridPos", {}) for k in "hwxy"):
        fail.append(f"panel {title!r}: no complete gridPos")
    if p.get("datasource", {}).get("uid") != "${datasource}":
        fail.append(f"panel {title!r}: not on ${{datasource}}")
    targets = p.get("targets") or []
    if not targets or not all(t.get("expr") for t in targets):
        fail.append(f"panel {title!r}: a panel without a query")
    for t in targets:
        rules.append({"record": f"dashboard:panel{pid}:{t.get('refId', 'A')}", "expr": substituted(t.get("expr", ""))})
json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(out, "w"), indent=1)  # YAML reads JSON

# Metric names (not recording rules' level:name:op) against the names the exporter writes.
written = set(re.findall(r'"(iommud_\w+)"', open(exporter).read()))
name = re.compile(r"(?<![\w:])(iommud_[a-z_]+)(?![\w:])")
for f in ("iommud.rules.yml", "tests/iommud.rules.test.yml", "dashboards/iommud.json"):
    for used in sorted(set(name.findall(open(f"{mon}/{f}").read())) - written):
        fail.append(f"monitoring/{f}: {used} is not a metric iommud writes")
for f in fail:
    print("FAIL:", f, file=sys.stderr)
print(f"dashboard: {len(ids)} panels, {len(rules)} queries")
sys.exit(1 if fail else 0)
PY
promtool check rules "$work/dashboard.rules.json"
echo "monitoring mixin: rules, rule tests and dashboard OK"
