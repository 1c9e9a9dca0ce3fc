"""The golden cells: per family a tiny pretraining run, a frozen cell and a fine-tuned cell (and
the two cells of a tiny ``hf:`` BERT made here), each through the real CLI in process
(``run_cli(PretrainCLI | FinetuneCLI, ...)``) with the configs' own defaults scaled down by a few
flags, on the synthetic MSR-format data set (the same on every machine, never ``$MRPC_DIR``),
against a temporary sqlite store. :func:`compute_goldens` returns what each cell decided: a
pretraining run's ``best_val_ppl``, a cell's dev/test accuracy and F1 and its dev/test predicted
probabilities, in the form ``tests/golden/goldens.json`` pins.

Determinism: every run is seeded by its config (``seed_everything: 0``), trained on the CPU with
``--trainer.deterministic=true``, one torch thread unless told otherwise, in the precision it is
given: float32 (``32-true``, named explicitly, never the machine's default) for the goldens every
CPU reproduces, ``bf16-mixed`` for the bf16 goldens, which need a CPU with native bf16.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from downstream.run.cli import FinetuneCLI
from harness.cli.tracked_cli import run_cli
from pretrain.cli import PretrainCLI

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
PAIRS = 96  # per split: the dev and test items whose probabilities are pinned

# Every run: the CPU, deterministic kernels, nothing printed or timed that does not decide a number.
COMMON = [
    "--trainer.accelerator=cpu",
    "--trainer.devices=1",
    "--trainer.deterministic=true",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
]
PRETRAIN = [
    *COMMON,
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=2",
    "--trainer.val_check_interval=1.0",
    "--trainer.max_time=null",
    "--data.max_sentences=200",
    "--data.corpus=mrpc",
    "--samples_every_n_steps=0",
    "--checkpoint_every_minutes=null",
]
FINETUNE = [*COMMON, "--trainer.max_epochs=2", f"--data.max_pairs={PAIRS}"]
# The frozen transfer as the study runs it (configs/benchmarks/families.yaml): mrpc.yaml's scalar mix
# and attn head, standardised features; a narrower head keeps it seconds long.
FROZEN = ("downstream/mrpc.yaml", ["--model.standardize=true", "--model.hidden_size=16"])

# name → (config, flags): the family's pretraining (ULMFiT: both LM stages).
PRETRAINS = {
    "elmo": ("pretrain/smoke.yaml", ["--model.hidden_size=16"]),
    "ulmfit": (
        "pretrain/ulmfit.yaml",
        ["--model.embedding_size=16", "--model.hidden_size=24", "--data.min_frequency=1", "--data.batch_size=32"],
    ),
    "ulmfit-task": ("pretrain/ulmfit-task.yaml", ["--model.init_from={ulmfit}"]),
    "gpt": ("pretrain/gpt-tiny.yaml", ["--model.hidden_size=32", "--data.max_vocab_size=400"]),
}
# family → (encoder flag, {transfer: (config, flags)}): the frozen cell and the family's fine-tuning.
CELLS = {
    "elmo": (
        "{elmo}",
        {"frozen": FROZEN, "gradual": ("downstream/mrpc.yaml", ["--model.finetune=gradual", "--model.hidden_size=16"])},
    ),
    "ulmfit": ("{ulmfit-task}", {"frozen": FROZEN, "gradual": ("downstream/ulmfit.yaml", [])}),
    "gpt": ("{gpt}", {"frozen": FROZEN, "full": ("downstream/gpt.yaml", [])}),
    "hf": ("{hf}", {"frozen": FROZEN, "full": ("downstream/hf.yaml", [])}),
}


def golden_names() -> list[str]:
    """Every golden cell's name, in the order they are computed."""
    return [f"{name}-pretrain" for name in PRETRAINS] + [
        f"{family}-{transfer}" for family, (_, transfers) in CELLS.items() for transfer in transfers
    ]


def _tagged_run(client: MlflowClient, name: str):
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    (run,) = client.search_runs(experiments, f"tags.golden = '{name}'")
    assert run.info.status == "FINISHED", f"golden {name}: run {run.info.run_id} is {run.info.status}"
    return run


def _probabilities(client: MlflowClient, run_id: str, split: str, folder: Path) -> list[float]:
    import pandas

    path = client.download_artifacts(run_id, f"predictions/{split}.csv", str(folder))
    return [round(float(p), 7) for p in pandas.read_csv(path)["prob"]]


def _run(
    cli: type, name: str, config: str, flags: list[str], references: dict[str, str], root: Path, precision: str
) -> None:
    arguments = [
        "fit",
        "--config",
        str(CONFIGS / config),
        *(flag.format(**references) for flag in flags),
        f"--trainer.precision={precision}",
        f"--trainer.default_root_dir={root}",
        f"--tags={json.dumps({'golden': name})}",
    ]
    code = run_cli(cli, arguments)
    if code != 0:
        raise RuntimeError(f"golden {name}: the CLI exited {code} ({' '.join(arguments)})")


def compute_goldens(
    workdir: Path,
    threads: int = 1,
    only: Callable[[str], bool] = lambda name: True,
    precision: str = "32-true",
    cell_flags: tuple[str, ...] = (),
) -> dict:
    """Run every golden cell (those ``only`` accepts, with the pretraining runs they need) in
    ``workdir`` with ``threads`` torch threads under ``precision``, the cells (not the pretraining)
    with ``cell_flags`` last (a test's deliberate change). Returns ``{name: {metric: value, ...,
    "dev_prob": [...], "test_prob": [...]}}``."""
    from tests.conftest import write_synthetic_mrpc
    from tests.hf_fixtures import make_tiny_bert, train_sentences

    workdir = Path(workdir)
    mrpc_dir = write_synthetic_mrpc(workdir / "mrpc")
    data = [f"--data.mrpc_dir={mrpc_dir}"]
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    previous_threads = torch.get_num_threads()
    results: dict[str, dict] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)  # artifacts and anything else relative land here
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr("pretrain.encoders.loading.ENCODER_CACHE", workdir / "encoders")
        torch.set_num_threads(threads)
        try:
            client = MlflowClient(uri)
            bert = make_tiny_bert(workdir / "tiny-bert", train_sentences(mrpc_dir), whole_words=True)
            references = {"hf": f"hf:{bert}"}
            wanted = {
                family
                for family, (_, transfers) in CELLS.items()
                if any(only(f"{family}-{transfer}") for transfer in transfers)
            }
            for name, (config, flags) in PRETRAINS.items():
                family = name.split("-")[0]
                if not (only(f"{name}-pretrain") or family in wanted):
                    continue
                _run(
                    PretrainCLI, f"{name}-pretrain", config, [*PRETRAIN, *data, *flags], references, workdir, precision
                )
                run = _tagged_run(client, f"{name}-pretrain")
                references[name] = f"runs:/{run.info.run_id}"
                if only(f"{name}-pretrain"):
                    results[f"{name}-pretrain"] = {"best_val_ppl": run.data.metrics["best_val_ppl"]}
            for family, (encoder, transfers) in CELLS.items():
                for transfer, (config, flags) in transfers.items():
                    name = f"{family}-{transfer}"
                    if not only(name):
                        continue
                    cell = [
                        *FINETUNE,
                        *data,
                        f"--model.encoder={encoder}",
                        *flags,
                        f"--data.cache_dir={workdir / 'features'}",
                        *cell_flags,
                    ]
                    _run(FinetuneCLI, name, config, cell, references, workdir, precision)
                    run = _tagged_run(client, name)
                    results[name] = {key: run.data.metrics[key] for key in ("dev_acc", "dev_f1", "test_acc", "test_f1")}
                    for split in ("dev", "test"):
                        results[name][f"{split}_prob"] = _probabilities(
                            client, run.info.run_id, split, workdir / "predictions" / name
                        )
        finally:
            torch.set_num_threads(previous_threads)
    return results
