"""A command-line parser's complaint about a flag, as the one line a user error is: the flag, the
value given and what would work (``--model.head=nope: choose one of pool-mlp, …``)."""

from __future__ import annotations

import re

PARSER_KEY = re.compile(r'Parser key "([^"]+)":\s*(.*)', re.DOTALL)
LITERAL = re.compile(r"Expected a typing\.Literal\[(.*)\]\. Got value: (.*)")
SIMPLE_TYPE = re.compile(r"Expected a <class '(\w+)'>\. Got value: (.*)")


def flag_error(message: str, argv: list[str]) -> str:
    """jsonargparse's error for a flag as one line: ``--model.head=nope: choose one of …``."""
    found = PARSER_KEY.search(message)
    if not found:
        return " ".join(message.split())
    key, detail = found.group(1), " ".join(found.group(2).split())
    inner = list(PARSER_KEY.finditer(detail))
    if inner:  # a subclass's argument (--model.schedule of a class_path model): the innermost complaint
        key = f"{key}.{inner[-1].group(1)}"
        detail = " ".join(inner[-1].group(2).split()).split(" - ")[0].strip()
    value = flag_value(key, argv)
    literal = LITERAL.fullmatch(detail)
    if literal:
        choices = [choice.strip().strip("'\"") for choice in literal.group(1).split(",")]
        value, detail = value if value is not None else literal.group(2), f"choose one of {', '.join(choices)}"
    simple = SIMPLE_TYPE.fullmatch(detail)
    if simple:
        value, detail = value if value is not None else simple.group(2), f"expected {simple.group(1)}"
    detail = re.sub(r"^Not of type \w+: ", "", detail)
    name = key.rsplit(".", 1)[-1]
    if detail.startswith(f"{name}=") and ": " in detail:  # a value type's own message names the value
        shown, detail = detail.split(": ", 1)
        value = value if value is not None else shown[len(name) + 1 :]
    return f"--{key}={value}: {detail}" if value is not None else f"--{key}: {detail}"


def flag_value(key: str, argv: list) -> str | None:
    """The value the command line gave ``--key`` (its last occurrence), None if it gave none."""
    value = None
    for index, argument in enumerate(argv):
        if not isinstance(argument, str):
            continue
        if argument.startswith(f"--{key}="):
            value = argument.split("=", 1)[1]
        elif argument == f"--{key}" and index + 1 < len(argv):
            value = argv[index + 1]
    return value
