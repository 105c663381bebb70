#!/usr/bin/env bash
# iommuctl's answers to the mistakes people make on its command line (issue 29): a misspelt
# command or option gets the nearest spelling, `help` and `-V` work, a usage error exits 2 and a
# runtime error 1 (docs/man/iommuctl.1.scd, EXIT STATUS), a repeated option and a missing value
# are said in words, and a failed write to stdout fails the command. --version names the commit
# in a git checkout. On the captured host of the README (docs/examples/workstation.tar).
set -euo pipefail
iommuctl=$(realpath "${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}")
src=$(cd "${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}" && pwd)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
mkdir "$work/snap"
tar -xf "$src/docs/examples/workstation.tar" -C "$work/snap"
cd "$work"

# expect STATUS 'TEXT ON STDERR' ARGS...: iommuctl ARGS exits STATUS and says TEXT (a fixed string).
expect() {
  local want=$1 text=$2 rc=0
  shift 2
  "$iommuctl" "$@" >out.txt 2>err.txt || rc=$?
  ((rc == want)) || fail "iommuctl $*: exit status $rc, expected $want: $(cat err.txt)"
  grep -qF -- "$text" err.txt || fail "iommuctl $*: does not say '$text': $(cat err.txt)"
}

expect 2 "iommuctl: unknown command stauts; did you mean status?" stauts
expect 2 "iommuctl: unknown command snap; did you mean snapshot?" --root snap snap
expect 2 "iommuctl: unknown command install; the commands are status, plan, explain" install
# No command: the verdict (status --brief), as bare systemctl gives its overview.
rc=0
"$iommuctl" --root snap >bare.txt 2>err.txt || rc=$?
((rc == 0)) || fail "bare iommuctl --root snap: exit status $rc: $(cat err.txt)"
"$iommuctl" --root snap status --brief >brief.txt
cmp -s bare.txt brief.txt || fail "bare iommuctl is not status --brief: $(diff bare.txt brief.txt)"
[[ $(head -c 8 bare.txt) == "Verdict " ]] || fail "bare iommuctl does not open with the verdict: $(head -2 bare.txt)"
expect 2 "See \`iommuctl --help\`." stauts
expect 2 "iommuctl status: unknown option --jsn; did you mean --json?" --root snap status --jsn
expect 2 "iommuctl status: unknown option --jsno; did you mean --json?" --root snap --jsno status
expect 2 "iommuctl plan: unknown option --polices; did you mean --policies?" --root snap plan --polices x
expect 2 "iommuctl status: no option --hotplug (plan, explain, apply have it)" --root snap status --hotplug
expect 2 "See \`iommuctl status --help\`." --root snap status --hotplug
expect 2 "iommuctl status: --root is given twice; it takes one value" --root snap status --root snap
expect 2 "iommuctl status: --format needs a value" --root snap status --format
expect 2 "iommuctl status: --format needs a value" --root snap status --format --json
expect 2 "iommuctl status: --format: pizza not in" --root snap status --format pizza
expect 2 "iommuctl explain: DEVICE is required" --root snap explain
expect 2 "iommuctl: unknown command stauts; did you mean status?" help stauts
expect 2 "--measure counts on the running kernel; it cannot work under --root" --root snap status --measure 1
# Runtime errors: 1.
expect 1 "iommuctl: no device nvme9 on this host" --root snap explain nvme9
mkdir empty
expect 1 "iommuctl: cannot read the host" --root empty status

# help and -V, as people try them first.
"$iommuctl" help >help.txt 2>err.txt || fail "iommuctl help exited $?: $(cat err.txt)"
"$iommuctl" --help >dashhelp.txt || fail "iommuctl --help exited $?"
cmp -s help.txt dashhelp.txt || fail "iommuctl help differs from iommuctl --help"
grep -q '^Subcommands:' help.txt || fail "iommuctl help lists no subcommands: $(cat help.txt)"
"$iommuctl" help status >help.txt || fail "iommuctl help status exited $?"
"$iommuctl" status --help >dashhelp.txt || fail "iommuctl status --help exited $?"
cmp -s help.txt dashhelp.txt || fail "iommuctl help status differs from iommuctl status --help"
"$iommuctl" -V >v.txt || fail "iommuctl -V exited $?"
"$iommuctl" --version >version.txt || fail "iommuctl --version exited $?"
cmp -s v.txt version.txt || fail "iommuctl -V differs from --version"

# The version, as bug reports quote it: the package's, and in a git checkout of the sources the
# commit they were configured at (this one or an earlier one: the tree may have moved since). As
# another user than the checkout's owner (the package's %check as nobody), git asks for
# safe.directory before it reads the tree; the test only reads it.
version=$(cat version.txt)
git() { command git -c safe.directory='*' "$@"; }
if [[ $(git -C "$src" rev-parse --show-toplevel 2>/dev/null) == "$src" ]]; then
  [[ $version =~ ^iommuctl\ [0-9]+\.[0-9]+\.[0-9]+\ \(git\ ([0-9a-f]{12})\)$ ]] \
    || fail "--version in a git checkout printed '$version'"
  git -C "$src" merge-base --is-ancestor "${BASH_REMATCH[1]:-none}" HEAD 2>/dev/null \
    || fail "--version names ${BASH_REMATCH[1]:-no commit}, not HEAD or one of its ancestors"
else
  [[ $version =~ ^iommuctl\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version outside git printed '$version'"
fi

# A write error on stdout fails the command, and says why.
[[ -w /dev/full ]] || { echo "FAIL: no writable /dev/full" >&2; exit 1; }
full() {  # full ARGS...: iommuctl ARGS into a full disk exits 1 and says so
  local rc=0
  "$iommuctl" "$@" >/dev/full 2>err.txt || rc=$?
  ((rc == 1)) || fail "iommuctl $* >/dev/full: exit status $rc, expected 1: $(cat err.txt)"
  grep -qF "iommuctl: cannot write the output: No space left on device" err.txt \
    || fail "iommuctl $* >/dev/full does not say why it failed: $(cat err.txt)"
}
full --root snap status
full --root snap status --json
full --help

finish
echo "usage: each mistake said in words, with the nearest spelling; usage errors exit 2, runtime errors 1"
