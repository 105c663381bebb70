# shellcheck shell=bash
# Sourced by the tests that compare iommuctl's --help with its man page and completions; needs
# $iommuctl. help_commands: the subcommands `iommuctl --help` lists. help_options [SUB]: the long
# options of `iommuctl [SUB] --help`, with --root for a subcommand whose help's last line says it
# takes the main command's ("Also --root DIR").
help_commands() { "$iommuctl" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'; }
help_options() {
  "$iommuctl" "$@" --help | awk '/^Subcommands:/ { exit } /^ +-/ { n = split($1, o, ","); for (i = 1; i <= n; i++) if (o[i] ~ /^--/) print o[i] }
    /^Also --root / { print "--root" }'
}
