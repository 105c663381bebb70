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
