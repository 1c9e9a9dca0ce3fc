"""The flag names a stage's command line accepts and the classes its subclass arguments take
(``--model=LitGPT``), derived from its LightningCLI parser, for the check that answers a mistyped
flag before the heavy imports (:mod:`harness.cli.preflight`).

The parser needs the stage's classes (torch, Lightning), so the names are derived once and kept
beside the CLI as a generated module (``pretrain/cli_flags.py``, ``downstream/run/cli_flags.py``);
a test derives them again and fails, naming the command below, when the two differ.

Regenerate: ``python -m harness.cli.flag_names pretrain.cli:PretrainCLI > pretrain/cli_flags.py``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import typing

from harness.entry_point import run_main


class _Built(Exception):
    """Raised with the parser once the CLI has built it, before it parses anything."""


def parser_of(cli_class: type):
    """The full parser of ``cli_class`` (all subcommands), without parsing or instantiating anything."""

    class Builder(cli_class):
        def parse_arguments(self, parser, args):
            raise _Built(parser)

    try:
        Builder(args=[])
    except _Built as built:
        return built.args[0]
    raise RuntimeError(f"{cli_class.__name__} did not build a parser")


def parsers(parser) -> list:
    """``parser`` and its subcommands' parsers, depth first."""
    found = [parser]
    action = getattr(parser, "_subcommands_action", None)
    for subparser in action.choices.values() if action else []:
        found.extend(parsers(subparser))
    return found


def subclass_arguments(action, package: str) -> set[str]:
    """``<dest>.<name>`` and ``<dest>.init_args.<name>`` for every constructor argument of the
    subclasses (defined in ``package``) of a base class of ``package`` that an argument such as
    ``--model`` takes."""
    hint = getattr(action, "_typehint", None)
    if action.dest.endswith("help"):
        return set()
    pending = [
        cls
        for cls in (hint, *typing.get_args(hint))
        if isinstance(cls, type) and cls.__module__.startswith(f"{package}.")
    ]  # the stage's own base class: --model
    names = {f"{action.dest}.class_path", f"{action.dest}.init_args"} if pending else set()
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if not cls.__module__.startswith(f"{package}."):
            continue
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if parameter.name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                names |= {f"{action.dest}.{parameter.name}", f"{action.dest}.init_args.{parameter.name}"}
    return names


def subclass_choices(action, package: str) -> list[str]:
    """The dot paths of the concrete classes (defined in ``package``) that a subclass argument
    such as ``--model`` takes; none for an argument of one fixed class."""
    hint = getattr(action, "_typehint", None)
    bases = [
        cls
        for cls in (hint, *typing.get_args(hint))
        if isinstance(cls, type) and cls.__module__.startswith(f"{package}.")
    ]
    pending, found = list(bases), set()
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith(f"{package}.") and cls not in bases and not inspect.isabstract(cls):
            found.add(f"{cls.__module__}.{cls.__qualname__}")
    return sorted(found)


def class_choices(cli_class: type) -> dict[str, list[str]]:
    """``{"model": [<dot path>, ...]}``: the classes each subclass argument of ``cli_class`` takes."""
    package = cli_class.__module__.split(".")[0]
    return {
        action.dest: choices
        for parser in parsers(parser_of(cli_class))
        for action in parser._actions
        if not action.dest.endswith("help") and (choices := subclass_choices(action, package))
    }


def flag_names(cli_class: type) -> tuple[list[str], list[str]]:
    """Returns ``(names, leaves)``: every option the command line accepts (without the dashes),
    and those that take a value of their own (so ``--<leaf>.<anything>`` may be the value's own
    nested key, e.g. ``--trainer.callbacks.patience``); group options (``--trainer``) are not leaves."""
    from jsonargparse._actions import ActionConfigFile, _ActionConfigLoad

    package = cli_class.__module__.split(".")[0]
    names, leaves = set(), set()
    for parser in parsers(parser_of(cli_class)):
        for action in parser._actions:
            options = {option.lstrip("-") for option in action.option_strings if " " not in option}  # not links
            names |= options
            arguments = subclass_arguments(action, package)
            names |= arguments
            if arguments:  # --model's keys are known: each argument is a leaf, --model itself not
                leaves |= arguments - {f"{action.dest}.init_args"}
            elif not isinstance(action, (_ActionConfigLoad, ActionConfigFile)) and action.dest:
                leaves |= options - {"h", "help"}
    return sorted(names), sorted(leaves)


def module_text(cli_class: type) -> str:
    """The generated module that records ``cli_class``'s flag names and the classes its subclass
    arguments take."""
    names, leaves = flag_names(cli_class)
    spec = f"{cli_class.__module__}:{cli_class.__qualname__}"
    folder = cli_class.__module__.rpartition(".")[0].replace(".", "/")  # the generated module lies beside the CLI

    def listed(values, indent=4):
        return "".join(f"{' ' * indent}{value!r},\n" for value in values)

    classes = "".join(
        f"    {key!r}: (\n{listed(values, 8)}    ),\n" for key, values in sorted(class_choices(cli_class).items())
    )
    classes = f"{{\n{classes}}}" if classes else "{}"
    return (
        f'"""The flags of ``{spec}``, for the check before the heavy imports (harness.cli.preflight).\n\n'
        f"Generated: python -m harness.cli.flag_names {spec} > {folder}/cli_flags.py\n"
        f'"""\n\nFLAGS = frozenset({{\n{listed(names)}}})\n\nLEAVES = frozenset({{\n{listed(leaves)}}})\n'
        f"\nCLASSES = {classes}\n"
    )


def main(argv: list[str]) -> int:
    module, _, name = argv[0].partition(":")
    sys.stdout.write(module_text(getattr(importlib.import_module(module), name)))
    return 0


if __name__ == "__main__":
    run_main(main, sys.argv[1:])
