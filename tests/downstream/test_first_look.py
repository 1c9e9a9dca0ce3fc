"""``make first-look``: three steps, each one line, then the twin's numbers in context; a failed
step names its log and exits 1."""

import pytest

from downstream import first_look

SUMMARY = """Seed set to 0
`Trainer.fit` stopped: `max_epochs=4` reached.
── finetune finished ─────────────
  method     random-scalar-pool-mlp  (encoder random, seed 0)
  context    test acc  F1         (MSR test, the same pairs in every row)
  gap        -0.2 points test acc (pretrained − random twin), 1 seed each:
  mix        weights [0.62 0.19 0.19]  γ 0.54
  run page   http://127.0.0.1:5000/#/experiments/2/runs/abc
"""


def test_the_summary_block_is_the_numbers_without_the_links(tmp_path):
    log = tmp_path / "twin.log"
    log.write_text(SUMMARY)
    assert first_look.summary_block(log) == SUMMARY.splitlines()[3:6]


def test_a_failed_step_names_its_log_and_exits_1(tmp_path, capsys):
    log = tmp_path / "step.log"
    with pytest.raises(SystemExit) as exit_info:
        first_look.run_step("1/3 pretrain", "harness.no_such_module", [], log)
    assert exit_info.value.code == 1
    error = capsys.readouterr().err
    assert error.startswith("error: 1/3 pretrain failed: ") and str(log) in error and error.count("\n") == 1


@pytest.mark.slow
def test_first_look_prints_the_gap_in_context(tmp_path, real_mrpc_dir, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(real_mrpc_dir))
    monkeypatch.setattr(first_look, "LOG_FOLDER", tmp_path / "logs")
    monkeypatch.setattr(first_look, "TRANSFER", [*first_look.TRANSFER, f"--data.cache_dir={tmp_path / 'cache'}"])
    assert first_look.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("first look, smoke-sized")
    for fragment in ("1/3 pretrain", "2/3 frozen transfer", "3/3 its random-init twin", "majority class",
                     "TF-IDF + LR", "pretrained counterpart (run ", "  gap        ", "frozen, standardised"):
        assert fragment in out, fragment
    assert len(out.splitlines()) <= 30  # one screen
