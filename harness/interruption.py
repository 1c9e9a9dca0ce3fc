"""Ctrl-C and SIGTERM as one interruption. SIGTERM (``kill``, a scheduler's stop) is raised as
:class:`Terminated`, a ``KeyboardInterrupt``, so a command ends both the way it ends Ctrl-C: its
runs KILLED with a tag naming the signal, and one line saying how to go on."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_CODES = {"Ctrl-C": 130, "SIGTERM": 143}  # 128 + the signal's number, as a shell reports it


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was, as Ctrl-C raises ``KeyboardInterrupt``."""


SIGNALLED: list[int] = []  # SIGTERM seen: a library may re-raise the interruption as a plain KeyboardInterrupt


def on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the cleanup short
    SIGNALLED.append(signum)
    raise Terminated()


@contextmanager
def sigterm_as_interrupt(only_if_unhandled: bool = False) -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` inside the block (main thread only: signals reach no
    other). ``only_if_unhandled``: leave a handler someone else installed (a suite, Ray) alone."""
    if threading.current_thread() is not threading.main_thread() or (
        only_if_unhandled and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    SIGNALLED.clear()
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interruption(error: BaseException | None) -> str | None:
    """``"SIGTERM"`` or ``"Ctrl-C"`` when ``error`` is an interruption or was raised while one was
    handled (Lightning turns Ctrl-C into ``sys.exit(1)`` in its ``except KeyboardInterrupt``);
    None otherwise."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return "SIGTERM" if isinstance(error, Terminated) or SIGNALLED else "Ctrl-C"
        seen.add(id(error))
        error = error.__context__
    return None
