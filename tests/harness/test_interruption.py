"""Ctrl-C and SIGTERM are one interruption: recognised through Lightning's ``sys.exit`` (raised
while it handles the ``KeyboardInterrupt``), SIGTERM raised as one only where nobody else handles
it, and a run Lightning finalizes during one ends KILLED with a tag naming the signal."""

import os
import signal

import pytest
from mlflow.tracking import MlflowClient

from harness.interruption import SIGNALLED, Terminated, interruption, sigterm_as_interrupt
from harness.tracking.liveness import ENDED_TAG
from harness.tracking.runs import fail_open_runs, make_logger


def raised_while_handling(first: BaseException) -> BaseException:
    try:
        try:
            raise first
        except BaseException:  # noqa: BLE001 - what Lightning does with Ctrl-C
            raise SystemExit(1)  # noqa: B904 - implicitly chained, as Lightning raises it
    except SystemExit as error:
        return error


def test_an_interruption_is_named_through_the_exit_lightning_turns_it_into():
    assert interruption(raised_while_handling(KeyboardInterrupt())) == "Ctrl-C"
    assert interruption(raised_while_handling(Terminated())) == "SIGTERM"
    assert interruption(raised_while_handling(ValueError("crash"))) is None
    assert interruption(RuntimeError("crash")) is None and interruption(None) is None


def test_sigterm_raises_terminated_inside_the_block_and_the_handler_is_restored_after():
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            signal.pause()
    assert signal.getsignal(signal.SIGTERM) is previous and SIGNALLED == [signal.SIGTERM]
    SIGNALLED.clear()  # this process goes on: the signal it saw is handled


def test_a_handler_someone_else_installed_is_left_alone():
    def theirs(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, theirs)
    try:
        with sigterm_as_interrupt(only_if_unhandled=True):
            assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("stop, name", [(KeyboardInterrupt(), "Ctrl-C"), (Terminated(), "SIGTERM")])
def test_a_run_finalized_during_an_interruption_ends_killed_and_tagged(tmp_path, monkeypatch, stop, name):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    logger = make_logger("interrupted", "run", {"stage": "pretrain"})
    logger.log_metrics({"train_loss": 1.0}, step=0)
    try:
        raise stop
    except KeyboardInterrupt:
        logger.finalize("failed")  # as Lightning's handler of the interruption calls it
    fail_open_runs()
    run = MlflowClient(uri).get_run(logger.run_id)
    assert run.info.status == "KILLED" and run.data.tags[ENDED_TAG].startswith(f"interrupted ({name})")


def test_a_run_finalized_after_a_crash_stays_failed_without_the_tag(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    logger = make_logger("crashed", "run", {"stage": "pretrain"})
    logger.log_metrics({"train_loss": 1.0}, step=0)
    try:
        raise ValueError("crash")
    except ValueError:
        logger.finalize("failed")
    fail_open_runs()
    run = MlflowClient(uri).get_run(logger.run_id)
    assert run.info.status == "FAILED" and ENDED_TAG not in run.data.tags
