"""The reason a child command (a stage run by a benchmark, a step of the first look) gave for
failing, read back from its log: the last ``error:`` line its entry point printed (a user's
mistake, :func:`harness.cli.tracked_cli.run_cli`), else the last line of the traceback it left (a
crash), so the parent's one line names the cause and not only where to look for it."""

from __future__ import annotations

import re
from pathlib import Path

ERROR_PREFIX = "error: "
TAIL_BYTES = 64 * 1024  # a failing child's reason is near the end of its log
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def child_cause(log_path: Path) -> str:
    """The child's own reason for failing, one line, or ``""`` when its log holds none (or is gone)."""
    try:
        with Path(log_path).open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - TAIL_BYTES))
            lines = log.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    lines = [line.strip() for line in lines if line.strip()]
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX) :].strip()
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        for line in reversed(lines):
            if EXCEPTION_LINE.match(line):
                return line
    return ""


def failure_line(what: str, code: int, log_path: Path) -> str:
    """``<what> failed (exit <code>): <the child's reason>; its output is in <log>``: one line."""
    cause = child_cause(log_path)
    return f"{what} failed (exit {code})" + (f": {cause}" if cause else "") + f"; its output is in {log_path}"
