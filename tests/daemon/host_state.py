#!/usr/bin/env python3
"""The host's own iommud state, before and after the tests that run iommuctl and iommud as root
(a ctest fixture): `host_state.py record FILE` lists /var/lib/iommud and /run/iommud into FILE,
`host_state.py compare FILE` fails, naming each path, when a test left anything there or changed
it. Each test must keep its lock, journal and records in directories of its own
(IOMMUD_RUNTIME_DIRECTORY and IOMMUD_STATE_DIRECTORY for iommuctl, RUNTIME_DIRECTORY and
STATE_DIRECTORY for iommud: testbed.py sets them)."""

import json
import os
import stat
import sys

DIRECTORIES = ("/var/lib/iommud", "/run/iommud")


def listing(roots: tuple[str, ...]) -> dict[str, str]:
    seen: dict[str, str] = {}
    for root in roots:
        if not os.path.lexists(root):
            seen[root] = "absent"
            continue

        def describe(path: str) -> None:
            st = os.lstat(path)
            kind = stat.filemode(st.st_mode)
            seen[path] = f"{kind} {st.st_uid}:{st.st_gid} size {st.st_size} mtime {st.st_mtime_ns}"

        describe(root)

        def unreadable(e: OSError) -> None:
            seen[e.filename] = f"unreadable ({e.strerror})"

        for here, dirs, files in os.walk(root, onerror=unreadable):
            for name in dirs + files:
                describe(os.path.join(here, name))
    return seen


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("record", "compare"):
        sys.stderr.write("usage: host_state.py record|compare FILE\n")
        return 2
    what, file = sys.argv[1], sys.argv[2]
    now = listing(DIRECTORIES)
    if what == "record":
        with open(file, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print(f"{len(now)} entries of {' and '.join(DIRECTORIES)} recorded in {file}")
        return 0
    with open(file) as f:
        before = json.load(f)
    changed = sorted(set(before) | set(now))
    changed = [p for p in changed if before.get(p) != now.get(p)]
    for path in changed:
        print(f"{path}: {before.get(path, 'absent')} -> {now.get(path, 'absent')}")
    if changed:
        print(f"the tests changed {len(changed)} path(s) of the host's own iommud state: a test ran iommuctl "
              "or iommud without directories of its own (tests/daemon/testbed.py: Host.env())")
        return 1
    print(f"{' and '.join(DIRECTORIES)} as before the tests ({len(now)} entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
