"""A benchmark whose child fails says why in its one line: the child's own ``error:`` line (or the
last line of its traceback) and its log, and the parent run ends FAILED with that cause as a tag."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.engine.parent_run import abandon_parent
from benchmarks.tasks import cells
from harness.cli.child_cause import child_cause
from harness.errors import UserError
from harness.tracking.liveness import ENDED_TAG

REPO = Path(__file__).resolve().parents[2]
TRACEBACK = """epoch 1/3  step 10  train_loss 5.1
Traceback (most recent call last):
  File "x.py", line 3, in <module>
    raise RuntimeError("the loss went to nan at step 12")
RuntimeError: the loss went to nan at step 12
"""


@pytest.mark.parametrize(
    "text, cause",
    [
        ("loading …\nerror: --data.corpus=my.txt: no such file\n", "--data.corpus=my.txt: no such file"),
        (TRACEBACK, "RuntimeError: the loss went to nan at step 12"),
        ("epoch 1/3  step 10  train_loss 5.1\n", ""),
    ],
    ids=["error-line", "traceback", "no-reason"],
)
def test_the_cause_is_the_childs_own_last_line_of_error(tmp_path, text, cause):
    log = tmp_path / "child.log"
    log.write_text(text)
    assert child_cause(log) == cause
    assert child_cause(tmp_path / "gone.log") == ""


def test_a_failed_pretraining_names_the_childs_error_and_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(cells, "finished_run", lambda *args: None)
    log = tmp_path / "logs" / "pretrain-elmo-1.log"
    args = ["--trainer.max_epoch=1"]  # a typo: the stage's own one-line error lands in its log
    with pytest.raises(UserError) as raised:
        cells.pretrain(str(REPO / "configs/pretrain/smoke.yaml"), args, "hash", "bench", log)
    (own,) = [line for line in log.read_text().splitlines() if line.startswith("error: ")]
    assert "--trainer.max_epoch" in own
    assert str(raised.value) == f"pretraining failed (exit 2): {own.removeprefix('error: ')}; its output is in {log}"


class Store:
    """What ``abandon_parent`` asks of an MLflow client, recorded."""

    def __init__(self):
        self.tags, self.status = {}, None

    def set_tag(self, run_id, key, value):
        self.tags[key] = value

    def set_terminated(self, run_id, status):
        self.status = status


def test_the_parent_ends_failed_with_the_cause_as_a_tag():
    store = Store()
    cause = "pretraining failed (exit 2): --data.corpus=my.txt: no such file; its output is in x.log"
    abandon_parent(store, "parent", UserError(cause))
    assert store.status == "FAILED" and store.tags[ENDED_TAG] == f"failed: {cause}"
    crashed = Store()
    abandon_parent(crashed, "parent", RuntimeError("lost the store\nsecond line"))
    assert crashed.status == "FAILED" and crashed.tags[ENDED_TAG] == "failed: RuntimeError: lost the store"
    stopped = Store()
    abandon_parent(stopped, "parent", KeyboardInterrupt())
    assert stopped.status == "KILLED" and not stopped.tags[ENDED_TAG].startswith("failed")
