"""What a run's console shows of its libraries: their own messages that do not concern the run
are dropped where they are made, one by one, and nothing else is filtered.

- Lightning's tips (``💡 Tip: … try installing litlogger``) advertise a service, and its
  ``Trainer.fit stopped: max_epochs=… reached`` tells half of what :class:`StopReason` tells:
  both dropped from the one logger that prints them.
- Lightning 2.6's ``_pytree`` builds torch's deprecated ``LeafSpec`` for every combined loader:
  its ``FutureWarning`` names Lightning's code, not ours, and has no fix on our side.
- Lightning's model summary ends with ``Total FLOPs: 0`` for a model without an
  ``example_input_array`` (it measures nothing then): :class:`ParameterSummary` leaves the FLOP
  count out unless it was measured.

:func:`console_callbacks` also puts plain progress lines in place of a progress bar when stdout
is not a terminal (:mod:`harness.training.progress_lines`).
"""

from __future__ import annotations

import logging
import sys
import warnings

from pytorch_lightning.callbacks import ModelSummary
from pytorch_lightning.callbacks.progress import ProgressBar
from pytorch_lightning.utilities.model_summary.model_summary import _format_summary_table

from harness.training.progress_lines import EpochBar, LineProgress, StopReason

TIP_LOGGER = "pytorch_lightning.utilities.rank_zero"  # rank_zero_info's logger, which prints the tips
DROPPED_PREFIXES = (
    "💡 Tip:",
    "`Trainer.fit` stopped:",
)  # the second: harness.training.progress_lines.StopReason says why
LEAF_SPEC_MESSAGE = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
LEAF_SPEC_MODULE = r"pytorch_lightning\.utilities\._pytree"


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(DROPPED_PREFIXES)


def quiet_libraries() -> None:
    """Drop the library messages above; calling it again adds nothing twice."""
    tips = logging.getLogger(TIP_LOGGER)
    if not any(isinstance(existing, _DropTips) for existing in tips.filters):
        tips.addFilter(_DropTips())
    warnings.filterwarnings("ignore", message=LEAF_SPEC_MESSAGE, category=FutureWarning, module=LEAF_SPEC_MODULE)


class ParameterSummary(ModelSummary):
    """Lightning's model summary (a plain table, also in a log file), with the FLOP column and
    total only when Lightning measured FLOPs (the model has an ``example_input_array``)."""

    @staticmethod
    def summarize(
        summary_data,
        total_parameters,
        trainable_parameters,
        model_size,
        total_training_modes,
        total_flops,
        **summarize_kwargs,
    ) -> None:
        columns = [column for column in summary_data if column[0] != "FLOPs" or total_flops]
        table = _format_summary_table(
            total_parameters, trainable_parameters, model_size, total_training_modes, total_flops, *columns
        )
        if not total_flops:
            lines = table.splitlines()
            table = "\n".join(lines[:-1] if lines[-1].endswith("Total Flops") else lines)
        logging.getLogger("pytorch_lightning.callbacks.model_summary").info("\n" + table)


def console_callbacks(trainer_config: dict) -> tuple[list, dict]:
    """The callbacks that shape the console, and the trainer settings they replace: the summary
    above (in place of Lightning's), :class:`harness.training.progress_lines.StopReason`, and, when stdout
    is not a terminal, :class:`harness.training.progress_lines.LineProgress` in place of a progress bar
    (on a terminal, :class:`~harness.training.progress_lines.EpochBar`: epochs counted from 1).
    A summary or progress bar the config names itself is kept."""
    given = trainer_config.get("callbacks") or []
    callbacks, settings = [StopReason()], {}
    if trainer_config.get("enable_model_summary") is not False and not any(isinstance(c, ModelSummary) for c in given):
        callbacks.append(ParameterSummary())
        settings["enable_model_summary"] = False  # Lightning's own would print beside it
    if trainer_config.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in given):
        callbacks.append(EpochBar() if sys.stdout.isatty() else LineProgress())
    return callbacks, settings
