"""Checks of a command line that need no heavy import: unknown flags (with a did-you-mean), a
missing ``--config`` file or one that gives a key twice, a group flag given a class it does not
take (``--model=LitBERT``: the choices, in one line) and values a stage checks by name. A stage's
entry point runs them before it imports torch, Lightning or MLflow, so a typo answers in about a
second; the full parser checks the rest afterwards. Nothing here may reject what the full parser accepts."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ValueCheck = Callable[[str], "str | None"]


def experiment_problem(value: str) -> str | None:
    """``--experiment_name``: what :mod:`harness.tracking.experiment_names` refuses, said early."""
    import unicodedata

    from harness.tracking.experiment_names import experiment_name_problem

    return experiment_name_problem(unicodedata.normalize("NFKC", value))


EVERY_STAGE_CHECKS: dict[str, ValueCheck] = {"experiment_name": experiment_problem}  # flags of every stage


def suggestion(given: str, choices: Iterable[str], prefix: str = "", cutoff: float = 0.6) -> str:
    """``; did you mean <prefix><choice>?`` for the closest choice, or ``""``."""
    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=cutoff)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def options(argv: list[str]) -> list[tuple[str, str | None]]:
    """``(key, value)`` of every option on the command line: ``--a.b=1`` and ``--a.b 1`` give
    ``("a.b", "1")``, ``-c x`` gives ``("c", "x")``; a value is None when none follows."""
    found = []
    for index, argument in enumerate(argv):
        if not argument.startswith("-") or argument == "-" or argument[1:2].isdigit():
            continue
        key, equals, value = argument.lstrip("-").partition("=")
        if not equals:
            following = argv[index + 1] if index + 1 < len(argv) else None
            value = following if following is not None and not following.startswith("--") else None
        found.append((key, value))
    return found


def unknown_flag(key: str, flags: frozenset[str], leaves: frozenset[str]) -> str | None:
    """The message for ``--key`` when the parser cannot accept it; None when it may. A key below
    a leaf (``trainer.callbacks.patience``) is the leaf value's own and left to the parser."""
    if key in flags:
        return None
    parts = key.split(".")
    if any(".".join(parts[:end]) in leaves for end in range(1, len(parts))):
        return None
    return f"--{key}: unknown flag{suggestion(key, flags, '--')}"


def config_problem(key: str, value: str | None) -> str | None:
    """``--config``/``-c``: the file must exist (a did-you-mean among the YAML files beside it) and
    give no key twice in one mapping, which the full parser refuses too (``harness.unique_keys``);
    found here, it is named before the stage reads its data set."""
    if value is None or value.lstrip().startswith(("{", "[")) or "\n" in value:  # an inline config
        return None
    path = Path(value).expanduser()
    if path.is_file():
        return duplicate_key_problem(path)
    if not path.parent.is_dir():
        return f"--{key}={value}: no such file (nor its folder {path.parent})"
    close = difflib.get_close_matches(path.name, [entry.name for entry in path.parent.glob("*.y*ml")], n=1)
    return f"--{key}={value}: no such file" + (f"; did you mean {path.parent / close[0]}?" if close else "")


def duplicate_key_problem(path: Path) -> str | None:
    """The one line naming the file, line and key when ``path`` gives a key twice in one mapping
    (or the line of an alias, which configs do not use); None otherwise, and for a file that is
    unreadable or not valid YAML (the full parse names that)."""
    import yaml

    from harness.unique_keys import AliasRefused, DuplicateKey, check_unique_keys

    try:
        check_unique_keys(path.read_text(encoding="utf-8"), str(path))
    except (DuplicateKey, AliasRefused) as error:
        return str(error)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        pass  # the full parse names an unreadable or invalid file
    return None


def group_problem(
    key: str,
    value: str | None,
    flags: frozenset[str],
    leaves: frozenset[str],
    classes: dict[str, tuple[str, ...]],
    hints: dict[str, str],
) -> str | None:
    """``--model=<value>``, ``--data=<value>``: a top-level group flag takes a config file, a
    mapping of its flags or, where it is a subclass argument, a class (by name or dot path). A bare
    word that is none of these gets the classes to choose from, or the ``hints`` of a group whose
    class is fixed. Nested groups (``--model.mix=scalar``: a value type's own words) are the parser's."""
    if value is None or "." in key or key in leaves or not any(flag.startswith(f"{key}.") for flag in flags):
        return None
    text = value.strip()
    if (
        not text
        or text[0] in "{["
        or any(mark in text for mark in (":", "\n", ".", "/", "="))
        or text.lower() in ("null", "none", "~")
        or Path(text).expanduser().exists()
    ):
        return None  # a mapping, a path, a dot path or no value: the full parse decides
    if key in classes:
        names = [path.rsplit(".", 1)[-1] for path in classes[key]]
        if text in names:
            return None
        return (
            f"choose one of {', '.join(names)} (or its class path, or a config file)"
            f"{suggestion(text, names, cutoff=0.75)}"
        )  # LitGPTT, not LitBERT, is a typo of LitGPT
    hint = hints.get(key)
    return f"not a config file, and --{key}'s class is fixed here" + (f"; {hint}" if hint else "")


def problems(
    argv: list[str],
    flags: frozenset[str],
    leaves: frozenset[str],
    value_checks: dict[str, ValueCheck] | None = None,
    classes: dict[str, tuple[str, ...]] | None = None,
    hints: dict[str, str] | None = None,
) -> list[str]:
    """One line per problem found on ``argv``, in command-line order. ``classes``: the class paths
    each subclass argument takes (the generated ``CLASSES``); ``hints``: what to say of a group
    flag whose class is fixed (``--data=SST2``)."""
    found = []
    for key, value in options(argv):
        if key in ("h", "help") or key.endswith(".help"):
            continue
        message = unknown_flag(key, flags, leaves)
        if message is None and key in ("c", "config"):
            message = config_problem(key, value)
        if message is None:
            message = group_problem(key, value, flags, leaves, classes or {}, hints or {})
            message = f"--{key}={value}: {message}" if message else None
        check = (value_checks or {}).get(key, EVERY_STAGE_CHECKS.get(key))
        if message is None and check is not None and value is not None:
            message = check(value)
            message = f"--{key}={value}: {message}" if message else None
        if message:
            found.append(message)
    return found


def preflight(
    argv: list[str],
    flags: frozenset[str],
    leaves: frozenset[str],
    value_checks: dict[str, ValueCheck] | None = None,
    classes: dict[str, tuple[str, ...]] | None = None,
    hints: dict[str, str] | None = None,
) -> None:
    """Exit with status 2 and the first problem as one line (``error: …``) if ``argv`` has one."""
    found = problems(argv, flags, leaves, value_checks, classes, hints)
    if found:
        print(f"error: {found[0]}", file=sys.stderr)
        sys.exit(2)
