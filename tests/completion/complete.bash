#!/bin/bash --norc
# Prints, one per line, what bash's programmable completion offers for LINE (completing at its
# end) with the completion script SCRIPT and Debian's bash-completion library:
#   bash --norc complete.bash SCRIPT LINE
# COMP_WORDS is split as readline splits it with the default COMP_WORDBREAKS: at blanks, and each
# run of '=' or ':' a word of its own.
script=${1:?usage: complete.bash SCRIPT LINE}
line=${2?usage: complete.bash SCRIPT LINE}
library=/usr/share/bash-completion/bash_completion
[[ -r $library ]] || { echo "complete.bash: $library is missing (Debian package bash-completion)" >&2; exit 2; }
# shellcheck source=/dev/null
source "$library"
# shellcheck source=/dev/null
source "$script"

COMP_WORDS=()
for token in $line; do
  while [[ $token =~ ^([^=:]*)([=:]+)(.*)$ ]]; do
    [[ -n ${BASH_REMATCH[1]} ]] && COMP_WORDS+=("${BASH_REMATCH[1]}")
    COMP_WORDS+=("${BASH_REMATCH[2]}")
    token=${BASH_REMATCH[3]}
  done
  [[ -n $token ]] && COMP_WORDS+=("$token")
done
[[ $line == *' ' || ${#COMP_WORDS[@]} -eq 0 ]] && COMP_WORDS+=('')
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE=$line
COMP_POINT=${#line}
COMP_TYPE=9
COMP_KEY=9
COMPREPLY=()
spec=$(complete -p iommuctl) || { echo "complete.bash: $script registers no completion for iommuctl" >&2; exit 2; }
function=$(sed -E 's/.*-F ([^ ]+) .*/\1/' <<<"$spec")
"$function" iommuctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
((${#COMPREPLY[@]})) && printf '%s\n' "${COMPREPLY[@]}"
exit 0
