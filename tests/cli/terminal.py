#!/usr/bin/env python3
"""iommuctl status on a pseudo-terminal, as a person's shell runs it, on the captured host of the
README (docs/examples/workstation.tar).

- With colour (TERM=xterm-256color, no NO_COLOR): every `Label  value` line of the verdict and of
  the header (the lines before the groups that start in column 0) has at least one space between its
  label and its value once the escape codes are stripped, the values start in one column, and the
  stripped text is the text printed to a pipe.
- No colour with TERM=dumb, without TERM, with NO_COLOR set, or with --color=never; colour with
  NO_COLOR set to the empty string (it counts as unset).

Usage: terminal.py PATH_TO_IOMMUCTL SOURCE_DIR
"""
import errno
import os
import re
import subprocess
import sys
import tempfile

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
failures = []


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    failures.append(message)


def on_terminal(argv, env):
    """What argv prints on a pseudo-terminal (its stdin and stdout), read until it closes it."""
    leader, follower = os.openpty()
    proc = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    out = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError as e:  # EIO: every holder of the follower side closed it
            if e.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    err = proc.stderr.read().decode()
    if proc.wait() != 0:
        fail(f"{' '.join(argv)} on a terminal exited {proc.returncode}: {err}")
    # The terminal's line discipline turns each \n into \r\n (onlcr).
    return out.decode().replace("\r\n", "\n")


def environment(**changes):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


def header_lines(text):
    """The `Label value` lines: those in column 0 of the verdict and of the host's header (the
    paragraphs before the lists of groups, devices and findings)."""
    lines = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith(("Groups", "Devices", "Findings")):
            break
        lines += [line for line in paragraph.splitlines() if line and not line[0].isspace()]
    return lines


def main():
    iommuctl = os.path.realpath(sys.argv[1])
    src = sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        root = os.path.join(work, "snap")
        os.mkdir(root)
        subprocess.run(["tar", "-xf", os.path.join(src, "docs/examples/workstation.tar"), "-C", root], check=True)
        status = [iommuctl, "--root", root, "status"]

        colour_env = environment(TERM="xterm-256color")
        coloured = on_terminal(status, colour_env)
        piped = subprocess.run(status, env=colour_env, stdout=subprocess.PIPE, check=True, text=True).stdout
        if "\x1b[" not in coloured:
            fail("status on a terminal with TERM=xterm-256color is not coloured")
        if "\x1b" in piped:
            fail("status into a pipe is coloured")
        stripped = ESCAPE.sub("", coloured)

        labels = [line.split(" ", 1)[0] for line in header_lines(piped)]
        if len(labels) < 6 or labels[0] != "Verdict":
            fail(f"the piped status has {len(labels)} header lines: {labels}")
        lines = header_lines(stripped)
        columns = set()
        for label, line in zip(labels, lines):
            if not line.startswith(label + " "):
                fail(f"on a terminal the label {label!r} is not apart from its value: {line!r}")
            columns.add(len(line) - len(line[len(label):].lstrip(" ")))
        if len(lines) != len(labels) or len(columns) != 1:
            fail(f"on a terminal the values of the header do not start in one column ({sorted(columns)}):\n"
                 + "\n".join(lines))
        if stripped != piped:
            fail("status on a terminal, its escape codes stripped, differs from status into a pipe")

        for name, env, args in (
            ("TERM=dumb", environment(TERM="dumb"), []),
            ("no TERM", environment(), []),
            ("NO_COLOR=1", environment(TERM="xterm-256color", NO_COLOR="1"), []),
            ("--color=never", environment(TERM="xterm-256color"), ["--color=never"]),
        ):
            if "\x1b" in on_terminal(status + args, env):
                fail(f"status on a terminal with {name} is coloured")
        if "\x1b[" not in on_terminal(status, environment(TERM="xterm-256color", NO_COLOR="")):
            fail("status on a terminal with NO_COLOR set to the empty string is not coloured")

    if failures:
        sys.exit(f"{len(failures)} failure(s)")
    print("terminal: status is coloured on a terminal only, and its labels are apart from their values")


if __name__ == "__main__":
    main()
