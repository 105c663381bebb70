#!/usr/bin/env bash
# The package's build directory is built with the package's flags whatever configured it first:
# a directory configured by plain `cmake` (the README's first command) and then by
# `scripts/build-deb --configure` (scripts/check) holds dpkg-buildflags' CXXFLAGS and LDFLAGS, and
# `--prebuilt` refuses a directory that does not.
#   configure_again.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd -P)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$here/../support/failures.sh"
command -v dpkg-buildflags >/dev/null || { echo "FAIL: dpkg-buildflags not found: scripts/setup --tests installs dpkg-dev" >&2; exit 1; }

dir=$work/build
cmake -S "$src" -B "$dir" -G Ninja -DIOMMUD_TESTS=OFF >/dev/null
"$src/scripts/build-deb" --configure "$dir" -DIOMMUD_TESTS=OFF >/dev/null 2>"$work/err" || fail "--configure failed: $(cat "$work/err")"
grep -q "configuring it again from scratch" "$work/err" || fail "a directory configured by plain cmake was not configured again: $(cat "$work/err")"
want=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CXXFLAGS)
flags=$(sed -n 's/^CMAKE_CXX_FLAGS:STRING=//p' "$dir/CMakeCache.txt")
for flag in -g -O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2; do
  [[ " $flags " == *" $flag "* ]] || fail "CMAKE_CXX_FLAGS lacks $flag: '$flags' (dpkg-buildflags: '$want')"
done
ldflags=$(sed -n 's/^CMAKE_EXE_LINKER_FLAGS:STRING=//p' "$dir/CMakeCache.txt")
[[ $ldflags == *"-z,relro"* && $ldflags == *"-z,now"* ]] || fail "CMAKE_EXE_LINKER_FLAGS lacks -z,relro -z,now: '$ldflags'"

# Configured again as the package: kept as it is.
"$src/scripts/build-deb" --configure "$dir" -DIOMMUD_TESTS=OFF >/dev/null 2>"$work/err" || fail "the second --configure failed: $(cat "$work/err")"
if grep -q "again from scratch" "$work/err"; then fail "a directory already configured as the package was configured again"; fi

# --prebuilt refuses a directory configured otherwise, before building anything.
other=$work/other
cmake -S "$src" -B "$other" -G Ninja -DIOMMUD_TESTS=OFF >/dev/null
if "$src/scripts/build-deb" --prebuilt "$other" "$work/out" >/dev/null 2>"$work/err"; then
  fail "--prebuilt took a directory configured by plain cmake"
fi
grep -q "with the package's flags" "$work/err" || fail "--prebuilt's refusal does not say why: $(cat "$work/err")"
finish
