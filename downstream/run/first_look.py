"""``make first-look``: the whole pipeline at smoke size in a few minutes, on one screen.

A tiny biLM pretrained on a few hundred MRPC sentences (``configs/pretrain/smoke.yaml``), then a
frozen transfer from its random-init twin to the first 1000 MRPC pairs of each split
(``configs/downstream/smoke.yaml`` with more pairs and epochs, so that the heads learn past the
majority class; features standardised, the default for frozen transfers), then the same transfer
from the pretrained biLM. That last run's summary, the pretrained arm's, puts the gap to its twin
beside the majority class and TF-IDF + LR on the same pairs (``downstream.run.summary_comparisons``). Each step's
console output goes to a log file; the screen gets one line per step, that summary and the links
to the runs and to the two arms side by side in the UI.

The sizes test the pipeline, not transfer: the numbers say that every stage ran and where the
results are, not whether pretraining helps.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

from mlflow.tracking import MlflowClient

from harness.cli.child_cause import child_cause
from harness.entry_point import run_main
from harness.tracking.links import metrics_compare_link, run_link, serve_lines
from harness.tracking.runs import tracking_uri

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_FOLDER = REPO_ROOT / ".cache" / "first-look"
PRETRAIN_CONFIG = "configs/pretrain/smoke.yaml"
FINETUNE_CONFIG = "configs/downstream/smoke.yaml"
QUIET = ["--trainer.enable_progress_bar=false"]
TRANSFER = ["--data.max_pairs=1000", "--trainer.max_epochs=6"]  # on top of the smoke config
SUMMARY_START = "── finetune finished"  # the first line of a finetune run's summary (downstream.run.cli)
SUMMARY_END = "  mix "  # the summary's lines after the numbers: the mix and the links
HEADLINE = (
    "first look, smoke-sized: a tiny biLM (400 MRPC sentences, 10 steps) and its random twin, each\n"
    "frozen under a small head, trained on 1000 MRPC pairs for 6 epochs. The numbers test the pipeline, not\n"
    "transfer: `make pretrain` and `make finetune` are the real runs."
)


def shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (as a newcomer types it)."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def run_step(title: str, module: str, args: list[str], log: Path) -> float:
    """``python -m <module> <args>`` with its output in ``log``; one line on screen. Returns its
    seconds. A failure ends the tour: exit 1 naming the log."""
    print(f"  {title:<28}", end="", flush=True)
    start = time.monotonic()
    with log.open("w") as output:
        code = subprocess.call(
            [sys.executable, "-m", module, *args], stdout=output, stderr=subprocess.STDOUT, cwd=REPO_ROOT
        )
    seconds = time.monotonic() - start
    if code != 0:
        print(f"failed (exit {code})")
        lines = log.read_text(errors="replace").strip().splitlines()
        cause = child_cause(log) or (lines[-1] if lines else "no output")
        print(f"error: {title} failed: {cause} (all of it in {log})", file=sys.stderr)
        raise SystemExit(1)
    print(f"{seconds:4.0f} s   log {shown(log)}")
    return seconds


def tagged_run(token: str, condition: str):
    """The finished run of this tour (tag ``first_look`` = ``token``) that meets ``condition``
    (an MLflow filter on its tags)."""
    client = MlflowClient(tracking_uri())
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(
        experiments, f"tags.first_look = '{token}' and {condition} and attributes.status = 'FINISHED'", max_results=1
    )
    if not runs:
        raise SystemExit(f"error: no finished run with {condition} tagged first_look={token}")
    return runs[0]


def summary_block(log: Path) -> list[str]:
    """The numbers of the last run's summary: from its first line to the mix line (the links follow)."""
    lines = log.read_text(errors="replace").splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith(SUMMARY_START)), None)
    if start is None:
        raise SystemExit(f"error: no finetune summary in {log}")
    end = next((k for k in range(start, len(lines)) if lines[k].startswith(SUMMARY_END)), len(lines))
    return lines[start + 1 : end]


def link_lines(client: MlflowClient, pretrain, transfer, twin) -> list[str]:
    """The tour's runs in the UI: the pretraining, both arms and the two side by side, then whether
    the UI is up there or how to start it (:mod:`harness.tracking.links`)."""
    experiment = transfer.info.experiment_id
    compare = metrics_compare_link(client, experiment, [transfer.info.run_id, twin.info.run_id])
    return [
        f"  {'pretrain':<10} {run_link(pretrain.info.experiment_id, pretrain.info.run_id)}",
        f"  {'transfer':<10} {run_link(experiment, transfer.info.run_id)}",
        f"  {'twin':<10} {run_link(experiment, twin.info.run_id)}",
        f"  {'compare':<10} {compare}",
        *serve_lines(),
    ]


def main() -> int:
    token = uuid.uuid4().hex[:12]
    tags = [f"--tags={json.dumps({'first_look': token})}"]
    LOG_FOLDER.mkdir(parents=True, exist_ok=True)
    print(HEADLINE)
    start = time.monotonic()
    run_step(
        "1/3 pretrain (smoke biLM)",
        "pretrain",
        ["fit", "--config", PRETRAIN_CONFIG, *QUIET, *tags],
        LOG_FOLDER / "pretrain.log",
    )
    pretrain = tagged_run(token, "tags.stage = 'pretrain'")
    pretrained = pretrain.info.run_id
    finetune = ["fit", "--config", FINETUNE_CONFIG, *TRANSFER, *QUIET, *tags]
    run_step(
        "2/3 random-init twin",
        "downstream",
        [*finetune, "--model.encoder=random", f"--model.random_like=runs:/{pretrained}"],
        LOG_FOLDER / "finetune-twin.log",
    )
    transfer_log = LOG_FOLDER / "finetune.log"
    run_step("3/3 pretrained transfer", "downstream", [*finetune, f"--model.encoder=runs:/{pretrained}"], transfer_log)
    twin = tagged_run(token, "tags.stage = 'finetune' and tags.pretrain_run_id = 'random'")
    transfer = tagged_run(token, f"tags.stage = 'finetune' and tags.pretrain_run_id = '{pretrained}'")
    print(f"  {'total':<28}{time.monotonic() - start:4.0f} s\n")
    print("\n".join(summary_block(transfer_log)))
    print()
    print("\n".join(link_lines(MlflowClient(tracking_uri()), pretrain, transfer, twin)))
    return 0


if __name__ == "__main__":
    run_main(main)
