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
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
failures = []


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    failures.append(message)


END = "\x1eend of output, status "


def on_terminal(argv, env, columns=None):
    """What argv prints on a pseudo-terminal (its stdin and stdout) COLUMNS wide if given.

    argv runs under a shell that prints END and argv's exit status on the same terminal once argv
    has ended, and this side keeps the follower open until it has read that mark: the text is read
    whole without relying on how the terminal hands over what was written just before its last
    holder closed it (the end-of-file read, EIO, is not an end of data everywhere)."""
    leader, follower = os.openpty()
    if columns is not None:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    wrapped = ["sh", "-c", '"$@"; printf "\\036end of output, status %d\\n" $?', "sh"] + argv
    proc = subprocess.Popen(wrapped, stdin=follower, stdout=follower, stderr=subprocess.PIPE, env=env)
    out = bytearray()
    mark = END.encode()
    while mark not in out:
        # Waits for output; only once the shell has ended without its mark does a second of
        # silence end the wait (a killed shell), so that the test fails instead of hanging.
        if not select.select([leader], [], [], 1.0)[0]:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError as e:  # EIO: the terminal hung up (it cannot while this side holds the follower)
            if e.errno != errno.EIO:
                raise
            break
        out += chunk
    os.close(follower)
    os.close(leader)
    err = proc.stderr.read().decode()
    proc.wait()
    # The terminal's line discipline turns each \n into \r\n (onlcr).
    text = out.decode().replace("\r\n", "\n")
    if END not in text:
        fail(f"{' '.join(argv)} on a terminal: its output ended without the shell's end mark: {text[-200:]!r}")
        return text
    text, status = text.split(END, 1)
    if status.strip() != "0":
        fail(f"{' '.join(argv)} on a terminal exited {status.strip()}: {err}")
    return text


def environment(**changes):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM", "COLUMNS", "LINES")}
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


def too_wide(text, columns):
    """The lines wider than COLUMNS that are more than their indentation and one unbreakable word."""
    return [line for line in text.splitlines() if len(line) > columns and " " in line.strip()]


def check_widths(iommuctl, root):
    """Every command's text at 60, 80, 120 and 200 columns: on a terminal that wide (coloured, and
    TERM=dumb), and into a pipe with COLUMNS; into a pipe without COLUMNS, 100."""
    commands = (["status"], ["status", "--brief"], ["plan"], ["explain", "nvme1"], ["explain", "enp8s0"],
                ["status", "nvme1"], ["status", "enp8s0"])
    for args in commands:
        argv = [iommuctl, "--root", root] + args
        name = " ".join(args)
        for columns in (60, 80, 120, 200):
            coloured = ESCAPE.sub("", on_terminal(argv, environment(TERM="xterm-256color"), columns))
            dumb = on_terminal(argv, environment(TERM="dumb"), columns)
            piped = subprocess.run(argv, env=environment(COLUMNS=str(columns)), stdout=subprocess.PIPE,
                                   check=True, text=True).stdout
            for how, text in (("on a coloured terminal", coloured), ("with TERM=dumb", dumb),
                              ("into a pipe with COLUMNS", piped)):
                wide = too_wide(text, columns)
                if wide:
                    fail(f"{name} at {columns} columns {how}: {len(wide)} lines too wide:\n" + "\n".join(wide[:5]))
            if coloured != piped or dumb != piped:
                fail(f"{name} at {columns} columns: the terminal's text (escapes stripped) differs from the pipe's")
        plain = subprocess.run(argv, env=environment(), stdout=subprocess.PIPE, check=True, text=True).stdout
        if too_wide(plain, 100) or not any(len(line) > 80 for line in plain.splitlines()):
            fail(f"{name} into a pipe without COLUMNS is not at 100 columns")


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
        check_widths(iommuctl, root)

    if failures:
        sys.exit(f"{len(failures)} failure(s)")
    print("terminal: status is coloured on a terminal only, and its labels are apart from their values")


if __name__ == "__main__":
    main()
