"""One precision for a whole study, decided once on the driver: what each stage and cell names
(``--trainer.precision`` in its config or flags), else this machine's default (bf16-mixed where
bf16 is native, ``harness.cli.precision``), written into its flags. A flag is part of the settings
that hash a stage or cell, so the precision is part of its identity, and a pretrained cell and its
random-init twin, which share their flags, always run under the same one. A matrix's ``precision:``
names it for every machine, so a study's chunks, run on other machines, cannot mix precisions."""

from __future__ import annotations

from benchmarks.plan.trainer_settings import trainer_setting
from harness.cli.precision import BF16_PRECISIONS, bf16_supported, default_precision, device_type
from harness.errors import UserError

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


def check_study_precision(precision: str | None, where: str, accelerator="auto") -> None:
    """Stop with one line naming the matrix's ``precision:`` when it asks for bf16 on hardware that
    has none natively (emulated bf16 is slower than float32, and float32 would mix precisions with
    the study's other chunks); anything else passes."""
    if precision not in BF16_PRECISIONS:
        return
    device = device_type(accelerator)
    if not bf16_supported(device):
        raise UserError(
            f"{where}: `precision: {precision}`, but this {device} has no native bf16, so its stages and cells "
            "cannot run at the precision the study names; run it on a machine with native bf16 "
            "(x86 AVX512-BF16 or AMX, Arm BF16; CUDA from Ampere)"
        )
