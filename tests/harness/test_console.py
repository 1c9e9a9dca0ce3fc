"""The library messages a run's console drops, each at its source, and nothing more."""

import logging
import warnings

from pytorch_lightning.utilities._pytree import _tree_flatten
from pytorch_lightning.utilities.rank_zero import rank_zero_info

from harness.cli.console import ParameterSummary, console_callbacks, quiet_libraries
from harness.training.progress_lines import EpochBar, LineProgress, StopReason


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_lightning_tips_are_dropped_and_its_other_messages_kept():
    quiet_libraries()
    handler, logger = Lines(), logging.getLogger("pytorch_lightning.utilities.rank_zero")
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        rank_zero_info("💡 Tip: For seamless cloud logging, try installing something")
        rank_zero_info("GPU available: False, used: False")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert handler.lines == ["GPU available: False, used: False"]


def test_the_leaf_spec_deprecation_of_lightnings_pytree_is_dropped_and_others_kept():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_libraries()
        _tree_flatten(1)  # builds torch's deprecated LeafSpec inside Lightning
        warnings.warn("ours", FutureWarning, stacklevel=1)
    assert [str(warning.message) for warning in seen] == ["ours"]


def test_the_summary_leaves_out_flops_it_did_not_measure(caplog):
    columns = [("Name", ["encoder"]), ("Type", ["Linear"]), ("Params", ["10"]), ("Mode", ["train"]), ("FLOPs", ["0"])]
    with caplog.at_level(logging.INFO, logger="pytorch_lightning.callbacks.model_summary"):
        ParameterSummary.summarize(columns, 10, 10, 0.0, {"train": 1, "eval": 0}, 0)
        ParameterSummary.summarize(columns, 10, 10, 0.0, {"train": 1, "eval": 0}, 2000)
    unmeasured, measured = caplog.messages
    assert "FLOPs" not in unmeasured and "Total Flops" not in unmeasured and "Total params" in unmeasured
    assert "FLOPs" in measured and "2.0 K     Total Flops" in measured


def test_plain_progress_only_off_a_terminal_and_never_against_the_config(monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    callbacks, settings = console_callbacks({})
    assert [type(callback) for callback in callbacks] == [StopReason, ParameterSummary, LineProgress]
    assert settings == {"enable_model_summary": False}
    callbacks, settings = console_callbacks({"enable_progress_bar": False, "enable_model_summary": False})
    assert [type(callback) for callback in callbacks] == [StopReason] and settings == {}
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert LineProgress not in [type(callback) for callback in console_callbacks({})[0]]
    assert EpochBar in [type(callback) for callback in console_callbacks({})[0]]  # epochs from 1 there too
