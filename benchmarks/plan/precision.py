"""One precision for a whole study, decided once on the driver: what each stage and cell names
(``--trainer.precision`` in its config or flags), else this machine's default (bf16-mixed where
bf16 is native, ``harness.cli.precision``), written into its flags. A flag is part of the settings
that hash a stage or cell, so the precision is part of its identity, and a pretrained cell and its
random-init twin, which share their flags, always run under the same one."""

from __future__ import annotations

from benchmarks.plan.trainer_settings import trainer_setting
from harness.cli.precision import default_precision

FLAG = "--trainer.precision="


def with_precision(config: str, args: list[str], precision: str | None = None) -> list[str]:
    """``args`` with ``--trainer.precision=<precision>`` appended (None: this machine's default for
    the stage's accelerator) where neither the ``config`` file nor ``args`` name one; else ``args``
    unchanged."""
    if trainer_setting(config, args, "precision") is not None:
        return list(args)
    if precision is None:
        precision = default_precision(trainer_setting(config, args, "accelerator", "auto"))
    return [*args, f"{FLAG}{precision}"]


def named_precision(args: list[str]) -> str | None:
    """The precision the last ``--trainer.precision=`` of ``args`` names (None without one)."""
    values = [argument.removeprefix(FLAG) for argument in args if argument.startswith(FLAG)]
    return values[-1] if values else None
