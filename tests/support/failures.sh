# shellcheck shell=bash
# Sourced by the shell tests that report every failure of a run, not only the first: $work, a
# temporary directory removed on exit; fail MESSAGE counts a failure; finish exits 1 if any.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
finish() {
  if ((failures)); then
    echo "$failures failure(s)" >&2
    exit 1
  fi
}
# planted FOUND FILE...: fails for each planted src/FILE that FOUND, a check's report on a planted
# tree (lines "...src/FILE:LINE:..."), does not name.
planted() {
  local found=$1 file
  shift
  for file in "$@"; do
    grep -q "src/$file:[0-9]*:" <<<"$found" || fail "the planted src/$file is not found:"$'\n'"$found"
  done
}
