#!/usr/bin/env bash
# One owner for descriptors, and no I/O of app's own (docs/CONVENTIONS.md §1): close(2) is called
# in src/support/unique_fd.hpp alone, and src/app makes none of the calls that belong to an
# adapter (files, processes, signals, the terminal). Each failure is reported with FILE:LINE: the
# line. It first shows, on a planted tree, that each kind of call it forbids is found.
#   owners.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd -P)
# shellcheck source=SCRIPTDIR/../support/failures.sh
source "$here/../support/failures.sh"

owner=src/support/unique_fd.hpp
# What app leaves to adapters: files, processes, signals and the terminal.
# open, read, write and close are also the names of members (a writer's write()): those count
# with :: only; the rest count bare too, as <unistd.h> and <stdio.h> declare them (not x.f(), x->f()).
app_calls='std::[io]?fstream|[^A-Za-z0-9_]::(open|openat|read|write|close)[[:space:]]*\(|([^A-Za-z0-9_:.>]|[^A-Za-z0-9_]::)(unlink|unlinkat|rename|renameat|renameat2|mkdir|mkdirat|rmdir|fsync|fdatasync|symlink|chmod|fchmod|chown|fchown|ftruncate|pipe|pipe2|dup|dup2|dup3|kill|fork|vfork|signalfd|pidfd_open|tcsetattr|tcgetattr|fopen|popen)[[:space:]]*\('

# code FILE...: each line as FILE:LINE:TEXT with its // comment taken away.
code() {
  awk '{ sub(/\/\/.*/, ""); print FILENAME ":" FNR ":" $0 }' "$@"
}

# violations TREE: each call in the wrong place, "WHY: FILE:LINE:TEXT" (paths relative to TREE).
violations() {
  local tree=$1 files unistd
  cd "$tree" || exit 1
  mapfile -t files < <(find src -name '*.[ch]pp' ! -path "$owner" | sort)
  ((${#files[@]})) || return 0
  # ::close anywhere; a bare close(...) where <unistd.h> makes it close(2) (a class's own close() is not).
  code "${files[@]}" | grep -E '^[^:]*:[0-9]+:(.*[^A-Za-z0-9_])?::close[[:space:]]*\(' |
    sed 's#^#close(2) outside UniqueFd: #' || true
  mapfile -t unistd < <(grep -lE '^#include[[:space:]]*<unistd\.h>' "${files[@]}" || true)
  if ((${#unistd[@]})); then
    code "${unistd[@]}" | grep -E '^[^:]*:[0-9]+:(.*[^A-Za-z0-9_.>:])?close[[:space:]]*\([^)]' |
      sed 's#^#close(2) outside UniqueFd: #' || true
  fi
  mapfile -t files < <(find src/app -name '*.[ch]pp' 2>/dev/null | sort)
  ((${#files[@]})) || return 0
  code "${files[@]}" | grep -E "^[^:]*:[0-9]+:(.*)?($app_calls)" | sed 's#^#I/O of app'"'"'s own (an adapter does it): #' || true
}

# A planted tree breaks each rule once: each must be found, and nothing else.
plant=$work/plant
mkdir -p "$plant"/src/{support,adapters/state,app/change,app/report,app/measure,app/daemon}
echo 'inline void f(int fd) { ::close(fd); }' >"$plant/$owner"
printf '#include <unistd.h>\nvoid g(int fd) { close(fd); }\n' >"$plant/src/adapters/state/a.cpp"
echo 'void h(int fd) { if (fd >= 0) ::close(fd); }' >"$plant/src/adapters/state/b.cpp"
echo 'std::ifstream in(path);' >"$plant/src/app/change/c.cpp"
echo 'int r = ::unlink(path.c_str());' >"$plant/src/app/change/d.cpp"
echo '  if (unlink(was.c_str()) != 0) return;' >"$plant/src/app/daemon/h.cpp"
echo 'pid_t child = ::fork();' >"$plant/src/app/daemon/e.cpp"
echo 'int fd = signalfd(-1, &set, 0);' >"$plant/src/app/measure/f.cpp"
echo '(void)tcsetattr(0, TCSANOW, &raw);' >"$plant/src/app/measure/g.cpp"
# Not found: a class's own close(), a call in a comment.
printf 'W& W::close(char b);\nreturn close(%s);\n// ::close(fd) and fork() are for adapters\nstore.rename(a, b);\nw->kill(9);\n' "']'" >"$plant/src/app/report/ok.cpp"
found=$(violations "$plant")
planted "$found" adapters/state/a.cpp adapters/state/b.cpp app/change/c.cpp app/change/d.cpp app/daemon/e.cpp app/daemon/h.cpp \
  app/measure/f.cpp app/measure/g.cpp
if grep -qE "$owner:|app/report/ok.cpp" <<<"$found"; then fail "a call in its place is reported: $found"; fi

found=$(violations "$src")
[[ -z $found ]] || fail "descriptors closed, or I/O done, outside their owners (docs/CONVENTIONS.md §1):"$'\n'"$found"
finish
