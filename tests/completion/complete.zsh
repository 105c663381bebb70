#!/usr/bin/env zsh
# Prints, one per line, what zsh's completion system (compinit) offers for LINE, completing at
# its end, with the completion functions of FPATH_DIR (which holds _iommuctl):
#   zsh -f complete.zsh FPATH_DIR LINE
# compinit reads every completion function on $fpath (about a second); with $IOMMUD_ZCOMPDUMP set
# it keeps what it found in that file for the next call.
# An interactive zsh in a pseudo-terminal (zsh/zpty) gets LINE and a TAB bound to complete-word;
# compadd is wrapped so that every match completion adds (after zsh's own matching against the
# word) is printed instead of inserted, between two markers. The same technique as zsh's own
# test suite (Test/comptest) and zsh-capture-completion.
emulate -L zsh
zmodload zsh/zpty || { print -u2 "complete.zsh: no zsh/zpty module"; exit 2 }
fpath_dir=${1:?usage: complete.zsh FPATH_DIR LINE}
line=${2?usage: complete.zsh FPATH_DIR LINE}
[[ -r $fpath_dir/_iommuctl ]] || { print -u2 "complete.zsh: no $fpath_dir/_iommuctl"; exit 2 }

compinit_args=-D
[[ -n ${IOMMUD_ZCOMPDUMP:-} ]] && compinit_args="-d ${(q)IOMMUD_ZCOMPDUMP}"
setup=$(mktemp) || exit 2
trap 'rm -f $setup; zpty -d capture 2>/dev/null' EXIT
cat >$setup <<SETUP
PROMPT='' RPROMPT='' PS2=''
unsetopt zle_bracketed_paste 2>/dev/null
fpath=(${(q)fpath_dir:A} \$fpath)
autoload -Uz compinit && compinit -u $compinit_args
bindkey '^I' complete-word
zstyle ':completion:*' insert-tab false
zstyle ':completion:*' list-grouped false
_capture_begin() { print -r -- '<<COMPLETIONS>>' }
# The shell stays alive after the end marker: a pty whose other side closes right after a write
# can lose that write (the master's read fails with EIO), which lost the marker in CI once.
# zpty -d in the trap hangs it up.
_capture_end() { print -r -- '<<END>>' }
compprefuncs=(_capture_begin)
comppostfuncs=(_capture_end)
compadd() {
  # Calls that only collect into arrays (-O, -A, -D) are the helpers' own business.
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
    builtin compadd "\$@"
    return
  fi
  local -a __hits
  builtin compadd -A __hits "\$@"
  (( \$#__hits )) && print -rl -- "MATCH:"\${^__hits}
  builtin compadd "\$@"
}
print -r -- '<<READY>>'
SETUP

zpty capture zsh -f -i || { print -u2 "complete.zsh: cannot start zsh in a pty"; exit 2 }
zpty -w capture "source ${(q)setup}"
out=''
zpty -r -m capture out '*<<READY>>*' || { print -u2 "complete.zsh: the shell did not start: $out"; exit 2 }
zpty -w -n capture "$line"$'\t'
out=''
zpty -r -m capture out '*<<END>>*' || { print -u2 "complete.zsh: no completion ran: $out"; exit 2 }
# Between the markers: one MATCH: line per match, with the pty's carriage returns. A match added
# twice (_files tries its patterns in turn) is printed once.
typeset -U matches
for l in ${(f)${${out#*<<COMPLETIONS>>}%%<<END>>*}}; do
  l=${l%$'\r'}
  [[ $l == MATCH:* ]] && matches+=(${l#MATCH:})
done
(( $#matches )) && print -rl -- $matches
exit 0
