#!/usr/bin/env bash
# The man pages as the build made them (docs/man): each exists and formats without a single groff
# warning, checked as lintian checks; and every policy example in them (a literal block of
# [[rule]] or [[override]] tables) is valid to `iommuctl check`, beside the shipped policies.
# A rule a page takes from policies/ (expand.cmake) replaces its shipped file, so it is checked as
# that file; a hand-written example is a file of its own, read after the shipped ones.
#   man_pages.sh MAN_BUILD_DIR PATH_TO_IOMMUCTL SOURCE_DIR PAGE...
set -euo pipefail
man_dir=${1:?usage: $0 MAN_BUILD_DIR PATH_TO_IOMMUCTL SOURCE_DIR PAGE...}
iommuctl=${2:?usage: $0 MAN_BUILD_DIR PATH_TO_IOMMUCTL SOURCE_DIR PAGE...}
src=${3:?usage: $0 MAN_BUILD_DIR PATH_TO_IOMMUCTL SOURCE_DIR PAGE...}
shift 3
(($# > 0)) || { echo "FAIL: no pages given" >&2; exit 1; }
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
command -v shellcheck >/dev/null || { echo "FAIL: shellcheck is not installed (scripts/setup --tests)" >&2; exit 1; }
shellcheck -x "$0" || fail "shellcheck $0"
command -v man >/dev/null || { echo "FAIL: man is not installed (Debian package man-db: scripts/setup --tests)" >&2; exit 1; }

# groff's warnings for a page, as lintian's groff-message check asks for them.
warnings() { { LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$1" >/dev/null; } 2>&1; }
# The check itself must see a warning where there is one.
printf '.TH BAD 1\n.SH NAME\nbad \\- page\n.XQ undefined macro\n' >"$work/bad.1"
[[ -n $(warnings "$work/bad.1") ]] || { echo "FAIL: man --warnings reports nothing on a broken page" >&2; exit 1; }

generated=0 written=0
for page in "$@"; do
  roff=$man_dir/$page
  [[ -s $roff ]] || { fail "$page: not built ($roff)"; continue; }
  out=$(warnings "$roff")
  [[ -z $out ]] || fail "$page: groff warnings:"$'\n'"$out"
  grep -q '@POLICY_RULE' "$roff" && fail "$page: a @POLICY_RULE marker was not expanded"

  # The examples, from the expanded scdoc source beside the page: ``` blocks whose first line is
  # a [[rule]] or [[override]] table, each written to a directory of its own.
  scd=$man_dir/$page.scd
  [[ -s $scd ]] || { fail "$page: no expanded source $scd"; continue; }
  n=0 origin='' in_block=0 dir=''
  while IFS= read -r line; do
    if ((in_block)); then
      if [[ $line == '```' ]]; then
        in_block=0
      elif ((in_block == 2)); then
        :
      elif [[ -n $dir ]]; then
        printf '%s\n' "$line" >>"$dir/$file"
      elif [[ $line == '[[rule]]' || $line == '[[override]]' ]]; then
        n=$((n + 1))
        dir=$work/$page-example-$n
        mkdir -p "$dir"
        if [[ -n $origin ]]; then
          file=${origin##*/}
          generated=$((generated + 1))
        else
          file=90-example.toml
          written=$((written + 1))
        fi
        printf '%s\n' "$line" >"$dir/$file"
      else
        in_block=2  # a literal block of something else (commands, messages)
      fi
      continue
    fi
    if [[ $line =~ ^'; generated from '([^ ]+)' rule ' ]]; then
      origin=${BASH_REMATCH[1]}
    elif [[ $line == '```' ]]; then
      in_block=1 dir=''
    else
      origin=''
    fi
  done <"$scd"
  for dir in "$work/$page"-example-*; do
    [[ -d $dir ]] || continue
    if ! "$iommuctl" check "$dir" "$src/policies" >"$work/check.txt" 2>&1; then
      fail "$page: example ${dir##*-example-} is not valid:"$'\n'"$(cat "$dir"/*.toml)"$'\n'"$(cat "$work/check.txt")"
    fi
  done
  echo "$page: formatted without warnings; $n policy examples checked"
done
# The policy page carries at least the rules it takes from policies/ and the drop-ins written for it.
((generated >= 4)) || fail "only $generated examples are taken from policies/ (@POLICY_RULE)"
((written >= 2)) || fail "only $written hand-written policy examples were found"

finish
