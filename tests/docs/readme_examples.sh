#!/usr/bin/env bash
# The README's examples are what iommuctl prints: every fenced block that follows a line
# `<!-- example: workstation -->` starts with `$ COMMAND` lines, each followed by its output; each
# command is run in a directory where `snap/` is docs/examples/workstation.tar unpacked (as the
# README tells the reader to do), with `iommuctl` being the binary under test, run from its build
# tree as the README's first command leaves it. The source tree's path prints as ~/iommud, where the
# README assumes the clone is. Exit 1 naming the command and the difference.
# First, the shipped snapshot must be the one this iommuctl takes of the workstation scenario
# (tests/support/scenarios.cpp, written out by schema_hosts), so that it cannot go stale; to
# renew it: build/bin/schema_hosts DIR && build/bin/iommuctl --root DIR/workstation snapshot \
#   docs/examples/workstation.tar
set -euo pipefail
usage="usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR PATH_TO_SCHEMA_HOSTS"
iommuctl=$(realpath "${1:?$usage}")
src=$(cd "${2:?$usage}" && pwd)
schema_hosts=$(realpath "${3:?$usage}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/snap" "$work/fresh"
tar -xf "$src/docs/examples/workstation.tar" -C "$work/snap"
"$schema_hosts" "$work/hosts" >/dev/null
"$iommuctl" --root "$work/hosts/workstation" snapshot "$work/fresh.tar" >/dev/null
tar -xf "$work/fresh.tar" -C "$work/fresh"
if ! diff -r "$work/snap" "$work/fresh" >"$work/stale.txt"; then
  cat "$work/stale.txt" >&2
  echo "FAIL: docs/examples/workstation.tar is not what iommuctl snapshot takes of the workstation" \
    "scenario today: renew it (see the top of $0) and the README's examples" >&2
  exit 1
fi

python3 - "$iommuctl" "$src" "$work" <<'PY'
import difflib, os, re, shlex, subprocess, sys
iommuctl, src, work = sys.argv[1:]
readme = open(os.path.join(src, "README.md"), encoding="utf-8").read().splitlines()
checked = failed = 0
i = 0
while i < len(readme):
    if readme[i].strip() != "<!-- example: workstation -->":
        i += 1
        continue
    i += 1
    if i >= len(readme) or not readme[i].startswith("```"):
        sys.exit(f"README.md:{i}: an example marker must be followed by a fenced block")
    start = i + 1
    end = start
    while end < len(readme) and not readme[end].startswith("```"):
        end += 1
    block = readme[start:end]
    i = end + 1
    runs = []  # (line number, command, expected output lines)
    for n, line in enumerate(block, start + 1):
        if line.startswith("$ "):
            runs.append((n, line[2:], []))
        elif runs:
            runs[-1][2].append(line)
        else:
            sys.exit(f"README.md:{n}: an example block starts with a `$ ` command")
    for n, command, expected in runs:
        argv = shlex.split(command)
        if argv[0] != "iommuctl":
            sys.exit(f"README.md:{n}: examples run iommuctl, not {argv[0]}")
        # 200 columns: rows are broken only past the terminal's width, and some hold the path of
        # the source tree, whose length depends on where it was cloned; paragraphs wrap at 100
        # at any width over that, as the README shows them.
        proc = subprocess.run([iommuctl] + argv[1:], cwd=work, capture_output=True, text=True,
                              env=dict(os.environ, NO_COLOR="1", COLUMNS="200"))
        actual = (proc.stdout + proc.stderr).replace(src, "~/iommud").splitlines()
        while actual and not actual[-1].strip():
            actual.pop()
        want = list(expected)
        while want and not want[-1].strip():
            want.pop()
        checked += 1
        if actual != want:
            failed += 1
            print(f"README.md:{n}: `{command}` prints something else (- README, + iommuctl):")
            print("\n".join(difflib.unified_diff(want, actual, lineterm="", n=1)))
if checked == 0:
    sys.exit("README.md has no `<!-- example: workstation -->` block: nothing checked")
print(f"{checked - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
