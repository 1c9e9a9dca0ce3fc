"""The graded golden cell: a frozen transfer to a graded task through the real finetune CLI in
process, pinned beside MRPC's cells (``tests/golden/cells.py``) in a file of its own,
``tests/golden/goldens-graded.json``, so that MRPC's goldens stay exactly as they are.

The cell: a tiny biLM (``tests.helpers.save_tiny_bilm``, seeded) over the sentences of the toy
graded task (``tests/downstream/toy_graded_task.py``: scores 0–5, the word overlap of a pair), then
``configs/downstream/mrpc.yaml`` as the golden frozen cells run it (scalar mix, ``attn`` head,
standardised features; its early stopping on ``dev_acc`` follows ``dev_pearson`` on this task), on
the CPU in float32 with one thread. It pins ``{dev,test}_{pearson,spearman}`` and every dev and test
item's predicted score.

    python -m tests.golden.graded_cell            # regenerate (after a deliberate numeric change)
    python -m tests.golden.graded_cell --check    # compute and compare only
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas
import pytest
import torch
from mlflow.tracking import MlflowClient

from downstream.run.cli import FinetuneCLI
from harness.cli.tracked_cli import run_cli
from harness.datasets.registry import DATASETS
from harness.entry_point import run_main
from tests.downstream import toy_graded_task
from tests.golden.cells import CONFIGS, FINETUNE, FROZEN
from tests.golden.compare import moved, read_goldens, write_goldens
from tests.helpers import save_tiny_bilm

NAME = "toy-overlap-elmo-frozen"
GRADED_GOLDEN_FILE = Path(__file__).with_name("goldens-graded.json")
SCORE_TOLERANCE = 5e-4  # absolute, per predicted score on 0–5: the probability tolerance (1e-4) over the range
CORRELATION_TOLERANCE = 1e-3  # a rank may swap where two scores sit within the score tolerance
METRICS = ("dev_pearson", "dev_spearman", "test_pearson", "test_spearman")


def compute_graded_golden(workdir: Path, cell_flags: tuple[str, ...] = ()) -> dict:
    """Run the graded cell in ``workdir`` (``cell_flags`` last: a test's deliberate change).
    Returns ``{metric: value, "dev_pred": [...], "test_pred": [...]}``."""
    workdir = Path(workdir)
    pairs = toy_graded_task.load(None).train
    encoder = save_tiny_bilm([s for pair in pairs for s in (pair.sentence1, pair.sentence2)], workdir)
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    config, flags = FROZEN
    arguments = [
        "fit",
        "--config",
        str(CONFIGS / config),
        *FINETUNE,
        *flags,
        f"--data.dataset={toy_graded_task.NAME}",
        f"--model.encoder={encoder}",
        "--data.cache_dir=none",
        "--trainer.precision=32-true",
        f"--trainer.default_root_dir={workdir}",
        *cell_flags,
    ]
    previous_threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setitem(DATASETS, toy_graded_task.NAME, toy_graded_task.TOY_OVERLAP)  # for this cell only
        torch.set_num_threads(1)
        try:
            code = run_cli(FinetuneCLI, arguments)
        finally:
            torch.set_num_threads(previous_threads)
    if code != 0:
        raise RuntimeError(f"golden {NAME}: the CLI exited {code} ({' '.join(arguments)})")
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    results = {metric: run.data.metrics[metric] for metric in METRICS}
    for split in ("dev", "test"):
        path = client.download_artifacts(run.info.run_id, f"predictions/{split}.csv", str(workdir / split))
        results[f"{split}_pred"] = [round(float(score), 6) for score in pandas.read_csv(path)["pred"]]
    return results


def graded_problems(pinned: dict, computed: dict) -> list[str]:
    """One line per way the graded cell's computed numbers left its pinned ones ([] if none)."""
    if set(pinned) != set(computed):
        return [moved(NAME, f"it records {sorted(computed)}, the goldens {sorted(pinned)}")]
    found = []
    for split in ("dev", "test"):
        was, now = pinned[f"{split}_pred"], computed[f"{split}_pred"]
        if len(was) != len(now):
            found.append(moved(NAME, f"{len(now)} {split} predictions, pinned {len(was)}"))
            continue
        deviation = max(abs(a - b) for a, b in zip(was, now))
        if not deviation <= SCORE_TOLERANCE:
            found.append(moved(NAME, f"max |Δ score| {deviation:.2g} > {SCORE_TOLERANCE:g} on {split}"))
    for metric in METRICS:
        if not abs(pinned[metric] - computed[metric]) <= CORRELATION_TOLERANCE:
            found.append(moved(NAME, f"{metric} {pinned[metric]:.4f} → {computed[metric]:.4f}"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.graded_cell", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the pinned golden instead of writing it")
    options = parser.parse_args(argv)
    sys.argv = sys.argv[:1]  # the CLI, run in process, reads its arguments from the list it is given
    with tempfile.TemporaryDirectory() as workdir:
        computed = compute_graded_golden(Path(workdir))
    if options.check:
        found = graded_problems(read_goldens(GRADED_GOLDEN_FILE)["cells"][NAME], computed)
        print("\n".join(found) or f"golden {NAME} holds")
        return 1 if found else 0
    write_goldens({NAME: computed}, GRADED_GOLDEN_FILE, precision="32-true")
    print(f"wrote {GRADED_GOLDEN_FILE}")
    return 0


if __name__ == "__main__":
    run_main(main)
