"""How every ``python -m`` entry point of the project ends: with its ``main``'s exit status, or,
after a :class:`~harness.errors.UserError` that reached it, with one ``error:`` line on stderr
and status 2 — never a traceback (``tests/test_entry_points.py`` holds every entry point to it)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from harness.errors import UserError

USER_ERROR_STATUS = 2


def run_main(main: Callable[..., int | None], *args) -> NoReturn:
    """Exit with ``main(*args)``'s status; a :class:`UserError` is its one line and status 2."""
    try:
        status = main(*args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        status = USER_ERROR_STATUS
    sys.exit(status)
