#!/usr/bin/env bash
# iommuctl's man page (docs/man/iommuctl.1.scd) and its --help name the same subcommands and, for
# each, the same long options: in the subcommand's section, in its SYNOPSIS line, and the global
# options in GLOBAL OPTIONS. With tests/completion/completion.sh (the completions against --help),
# the help, the man page and both completions agree.
#   options_agree.sh PATH_TO_IOMMUCTL SOURCE_DIR
set -euo pipefail
iommuctl=${1:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
src=${2:?usage: $0 PATH_TO_IOMMUCTL SOURCE_DIR}
page=$src/docs/man/iommuctl.1.scd
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
command -v shellcheck >/dev/null || { echo "FAIL: shellcheck is not installed (scripts/setup --tests)" >&2; exit 1; }
shellcheck -x "$0" || fail "shellcheck $0"
[[ -s $page ]] || { echo "FAIL: no man page source at $page" >&2; exit 1; }

# shellcheck source=SCRIPTDIR/../support/help.sh
source "$(dirname "$0")/../support/help.sh"
# What --help lists that the page defines: all but --help (every command has it, the page names it
# once) and a subcommand's --root (the page defines it once, under GLOBAL OPTIONS).
page_options() { help_options "$@" | grep -vx -e --help ${1:+-e --root} | sort -u || true; }
# The text of a section of the page: from the heading up to the next heading of its level or above.
section() {  # section '## status'
  awk -v head="$1" '
    $0 == head { on = 1; next }
    on && /^#/ { split(head, h, " "); split($0, s, " "); if (length(s[1]) <= length(h[1])) exit }
    on { print }' "$page"
}
# The long options a text names in scdoc's bold (*--json*), but --help.
bold_options() { grep -o '\*--[a-z][a-z-]*\*' | tr -d '*' | grep -vx -- --help | sort -u || true; }
# The options a section defines: the terms of its definition lists (a line that an indented line
# follows: *-V*, *--version*, or _DEVICE_, *--device* _DEVICE_), not its prose.
defined_options() { awk '/^\t/ && prev != "" && prev !~ /^\t/ { print prev } { prev = $0 }' | bold_options; }
# compare WHAT HELP PAGE: both lists of words, one a line.
compare() {
  local what=$1 help=$2 man=$3 missing extra
  missing=$(comm -23 <(printf '%s\n' "$help" | sed '/^$/d') <(printf '%s\n' "$man" | sed '/^$/d'))
  extra=$(comm -13 <(printf '%s\n' "$help" | sed '/^$/d') <(printf '%s\n' "$man" | sed '/^$/d'))
  [[ -z $missing ]] || fail "$what: in --help, not in the man page: ${missing//$'\n'/ }"
  [[ -z $extra ]] || fail "$what: in the man page, not in --help: ${extra//$'\n'/ }"
}

mapfile -t commands < <(help_commands)
((${#commands[@]} >= 7)) || { echo "FAIL: iommuctl --help lists ${#commands[@]} subcommands: ${commands[*]}" >&2; exit 1; }
# The page's COMMANDS: one '## NAME' each, and help (a word iommuctl takes, not a CLI11 subcommand).
page_commands=$(section '# COMMANDS' | sed -n 's/^## \([a-z-]*\)$/\1/p' | grep -vx help | sort -u)
compare "subcommands" "$(printf '%s\n' "${commands[@]}" | sort -u)" "$page_commands"

compare "global options (GLOBAL OPTIONS)" "$(page_options)" "$(section '# GLOBAL OPTIONS' | defined_options)"
synopsis=$(section '# SYNOPSIS')
for c in "${commands[@]}"; do
  want=$(page_options "$c")
  compare "$c (its section)" "$want" "$(section "## $c" | defined_options)"
  # Its SYNOPSIS lines, less the global options that come before the subcommand there.
  line=$(grep -E "^\*iommuctl\*( \[\*--root\* _DIR_\])? \*$c\*" <<<"$synopsis" || true)
  [[ -n $line ]] || { fail "$c: no SYNOPSIS line"; continue; }
  compare "$c (SYNOPSIS)" "$want" "$(while IFS= read -r l; do echo "${l#'*iommuctl* [*--root* _DIR_]'}"; done <<<"$line" | bold_options)"
done

finish
echo "options_agree: the man page names the ${#commands[@]} subcommands and every option that --help lists, and no other"
