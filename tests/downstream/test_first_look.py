"""``make first-look``: three steps, each one line, then the pretrained arm's numbers in context
and links to its runs at the UI's address; a failed step names its log and exits 1."""

import re
import socket

import pytest
from mlflow.tracking import MlflowClient

from downstream.run import first_look
from harness.tracking import ui_address
from tests.test_readme import README, summary_sample

SUMMARY = """Seed set to 0
`Trainer.fit` stopped: `max_epochs=4` reached.
── finetune finished ─────────────
  method     elmo-scalar-pool-mlp  (encoder runs:/abc, seed 0)
  context    test acc  F1         (MSR test: 1000 of its 1725 pairs, the same pairs in every row)
  gap        -0.002    test acc (pretrained − random twin), 1 seed each:
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


def test_the_links_open_the_tour_runs_at_the_address_of_the_ui(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    monkeypatch.setattr(ui_address, "RECORDS", tmp_path / "records")
    client = MlflowClient(uri)
    pretrain = client.create_run(client.create_experiment("lm-transfer-bench"))
    experiment = client.create_experiment("mrpc")
    transfer, twin = client.create_run(experiment), client.create_run(experiment)
    with socket.socket() as listener:  # the UI a user started with make ui PORT=<port>
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        ui_address.record_address(uri, ui_address.link_address("127.0.0.1", port))
        lines = first_look.link_lines(client, pretrain, transfer, twin)
    assert [line.split()[0] for line in lines] == ["pretrain", "transfer", "twin", "compare", "(the"]
    for line, run in zip(lines, (pretrain, transfer, twin)):
        assert line.split()[1] == (
            f"http://127.0.0.1:{port}/#/experiments/{run.info.experiment_id}/runs/"
            f"{run.info.run_id}?workflowType=machine_learning"
        )
    assert lines[3].split()[1].startswith(f"http://127.0.0.1:{port}/#/experiments/{experiment}/runs?")
    assert lines[4].strip() == f"(the UI at http://127.0.0.1:{port} serves them)"
    stopped = first_look.link_lines(client, pretrain, transfer, twin)[-1]
    assert f"no UI answers at http://127.0.0.1:{port} now: start it with `make ui PORT={port}`" in stopped


@pytest.mark.slow
def test_first_look_prints_the_gap_in_context(tmp_path, real_mrpc_dir, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MRPC_DIR", str(real_mrpc_dir))
    monkeypatch.setattr(first_look, "LOG_FOLDER", tmp_path / "logs")
    monkeypatch.setattr(first_look, "TRANSFER", [*first_look.TRANSFER, f"--data.cache_dir={tmp_path / 'cache'}"])
    assert first_look.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("first look, smoke-sized")
    for fragment in (
        "1/3 pretrain",
        "2/3 random-init twin",
        "3/3 pretrained transfer",
        "TF-IDF + LR",
        "  gap        ",
        "frozen, standardised",
        "    test acc (pretrained − random twin)",
    ):
        assert fragment in out, fragment
    assert "this run" in out and "pretrained counterpart" not in out  # the summary is the pretrained arm's
    twin = re.search(r"random twin \(run (\w+)\)", out).group(1)
    transfer = re.search(r"^  transfer   \S+/runs/(\w+)\?", out, re.MULTILINE).group(1)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(twin).data.tags["pretrain_run_id"] == "random"
    assert client.get_run(transfer).data.tags["pretrain_run_id"] not in ("random", "")
    assert re.search(r"^  twin       \S+/runs/" + twin, out, re.MULTILINE) and "\n  compare    http" in out
    majority = next(line for line in out.splitlines() if "majority class" in line)
    assert "these 1000 of 1725 test pairs" in majority  # not the 0.665 of the whole test set
    assert not re.search(r"\bpoints\b", out)  # fractions throughout, as the metrics are
    assert len(out.splitlines()) <= 30  # one screen

    def labels(lines):
        return [line[2:13].strip() for line in lines if line[2:13].strip()]

    real = (tmp_path / "logs" / "finetune.log").read_text().splitlines()
    real = real[next(k for k, line in enumerate(real) if line.startswith(first_look.SUMMARY_START)) :]
    assert labels(summary_sample(README.read_text(encoding="utf-8"))[1:]) == labels(real[1:])  # the README's shape
