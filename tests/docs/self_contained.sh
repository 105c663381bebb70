#!/usr/bin/env bash
# The repository stands on its own: no file refers to notes outside it (the design notes and the
# kernel reference it grew from, or an absolute path of the machine it was written on); every
# citation of docs/kernel.md names a section that exists; every relative link of a Markdown file
# leads to a file of the repository. Each failure is reported as FILE:LINE.
#   self_contained.sh SOURCE_DIR
# The files checked are the tracked ones (git ls-files); in a tree without git (a package build
# from an export of the tracked files) every file but build directories.
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
src=$(cd "$src" && pwd -P)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$(dirname "$0")/../support/failures.sh"
command -v shellcheck >/dev/null || { echo "FAIL: shellcheck is not installed (scripts/setup --tests)" >&2; exit 1; }
shellcheck -x "$0" || fail "shellcheck $0"

# What refers outside the repository. Written so that this file does not match itself.
outside=(
  '\.\./shared'                                   # the notes directory beside the repository
  'shared/[D]ESIGN'
  'shared/[r]eference'
  '(^|[^[:alnum:]_./-])[D]ESIGN\.md'              # no such file here: the conventions are docs/CONVENTIONS.md
  "(^|[[:space:]\"'\`(=:,<>])/work(/|[[:space:]\"'\`)>,:;]|$)"  # an absolute path of the development machine
)

# outside_refs FILE...: FILE:LINE: TEXT for each reference outside the repository.
outside_refs() {
  local args=()
  for re in "${outside[@]}"; do args+=(-e "$re"); done
  grep -HnIE "${args[@]}" -- "$@" || true
}

kernel_md=$src/docs/kernel.md
# Whether docs/kernel.md has section N (a "## N." heading) or N.M (a "### N.M" heading).
has_section() {
  if [[ $1 == *.* ]]; then
    grep -qE "^### ${1//./\\.}( |$)" "$kernel_md"
  else
    grep -qE "^## $1\\. " "$kernel_md"
  fi
}
# bad_citations FILE...: FILE:LINE: the citation, for each "kernel.md §N" naming no section. In
# docs/kernel.md itself, every "§N" is a citation of its own sections.
bad_citations() {
  local hit file line text n
  while IFS= read -r hit; do
    file=${hit%%:*} hit=${hit#*:} line=${hit%%:*} text=${hit#*:}
    while IFS= read -r n; do
      has_section "$n" || echo "$file:$line: $text: docs/kernel.md has no section $n"
    done < <(grep -oE '[0-9]+(\.[0-9]+)?' <<<"${text#*kernel.md}")
  done < <(grep -HnoIE 'kernel\.md ?(§ ?)?[0-9]+(\.[0-9]+)?(,? ?(and )?§ ?[0-9]+(\.[0-9]+)?)*' -- "$@" || true)
  while IFS= read -r hit; do
    line=${hit%%:*} text=${hit#*:}
    n=${text#§}
    has_section "$n" || echo "docs/kernel.md:$line: $text: no such section"
  done < <(grep -noE '§[0-9]+(\.[0-9]+)?' "$kernel_md" || true)
}

# broken_links FILE...: FILE:LINE: the link, for each relative Markdown link to a missing file.
broken_links() {
  local hit file line target
  while IFS= read -r hit; do
    file=${hit%%:*} hit=${hit#*:} line=${hit%%:*} target=${hit#*:}
    target=${target#\](} target=${target%)} target=${target%%#*}
    [[ -z $target || $target == *://* || $target == mailto:* ]] && continue
    [[ -e $(dirname "$file")/$target ]] || echo "$file:$line: link to $target: no such file"
  done < <(grep -HnoE '\]\([^)[:space:]]+\)' -- "$@" || true)
}

# The checks must see what they are for: a planted reference, citation and link are reported.
mkdir -p "$work/planted/docs"
cp "$kernel_md" "$work/planted/docs/kernel.md"
s='§'  # not written here as a citation, which this very check would read
printf 'see ../%s/DESIGN.md\nkernel.md %s2.2 and %s42\n[x](nowhere.md) [k](docs/kernel.md)\n' shared "$s" "$s" \
  >"$work/planted/README.md"
[[ -n $(outside_refs "$work/planted/README.md") ]] || fail "a planted reference outside the repository is not found"
out=$(kernel_md=$work/planted/docs/kernel.md bad_citations "$work/planted/README.md")
[[ $out == *"no section 42" && $(wc -l <<<"$out") == 1 ]] ||
  fail "a citation of a missing section of kernel.md is not found, or a good one is reported: $out"
[[ $(broken_links "$work/planted/README.md") == *"link to nowhere.md: no such file" ]] ||
  fail "a broken link is not found (or a good one is reported)"
(($(broken_links "$work/planted/README.md" | wc -l) == 1)) || fail "a good link is reported as broken"

cd "$src"
[[ -s docs/kernel.md ]] || { echo "FAIL: docs/kernel.md is missing" >&2; exit 1; }
files=()
# Only a work tree whose top is SOURCE_DIR: a source tree unpacked below another repository's
# work tree (an rpmbuild --topdir inside a checkout) is not one.
if [[ $(git rev-parse --show-toplevel 2>/dev/null) == "$src" ]]; then
  while IFS= read -r -d '' f; do [[ -f $f ]] && files+=("$f"); done < <(git ls-files -z)
  how="tracked files"
else
  # A package build: the tree is an export of the tracked files, plus build directories: those
  # CMake configured, and the top's build*/ (.gitignore's), such as build-deb/ with its .buildinfo,
  # which names the directory it was built in. (%check runs as nobody, for whom git refuses a
  # checkout root owns: this branch is taken in a checkout too.)
  while IFS= read -r -d '' f; do files+=("${f#./}"); done < <(
    find . \( -name .git -o -path './build*' -o -exec test -e '{}/CMakeCache.txt' \; \) -prune -o -type f -print0)
  how="files (no git: build directories left out)"
fi
((${#files[@]} > 50)) || { echo "FAIL: only ${#files[@]} files found in $src" >&2; exit 1; }
md=()
for f in "${files[@]}"; do [[ $f == *.md ]] && md+=("$f"); done

out=$(outside_refs "${files[@]}")
[[ -z $out ]] || fail "references to files outside the repository:"$'\n'"$out"
out=$(bad_citations "${files[@]}")
[[ -z $out ]] || fail "citations of docs/kernel.md sections that do not exist:"$'\n'"$out"
out=$(broken_links "${md[@]}")
[[ -z $out ]] || fail "Markdown links to files that do not exist:"$'\n'"$out"

echo "${#files[@]} $how checked for references outside the repository, ${#md[@]} Markdown files for links"
finish
