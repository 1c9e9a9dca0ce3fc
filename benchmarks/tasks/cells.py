"""The cells of a benchmark — a pretrain run, a finetune run, a baseline run — each run through
the real CLIs in the calling process (a task of the study's engine) and found again by a hash of
its settings (``tags.cell_hash``), so a re-run skips what already finished."""

from __future__ import annotations

import contextlib
import contextvars
import gc
import json
import logging
import sys
import traceback
from pathlib import Path

import numpy as np
from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import Cell
from benchmarks.tasks.baselines import fit_baseline
from benchmarks.tasks.linear_probe import probe_probabilities
from benchmarks.tasks.reuse import finished_run
from downstream.data.pair_datamodule import DEFAULT_CACHE_DIR, task_params
from downstream.run import encoder_reuse
from downstream.run.cli import FinetuneCLI
from downstream.run.evaluation import predictions_frame, split_metrics, unseen_metrics
from harness.cli.child_cause import failure_line
from harness.cli.runtime import intra_op_threads, release_freed_memory
from harness.cli.tracked_cli import run_cli
from harness.datasets.registry import run_name_prefix, task_tags
from harness.datasets.types import PairData
from harness.errors import UserError
from harness.protocol import protocol_version
from harness.tracking.liveness import process_tags
from harness.tracking.naming import encoder_label, join
from harness.tracking.run_clock import cell_clock
from harness.tracking.runs import ensure_experiment, tracking_uri
from harness.tracking.seen_text import encoder_seen_text
from harness.training.worker_reuse import reuse_between_cells
from harness.versioning import git_commit
from pretrain.cli import PretrainCLI
from pretrain.encoders.references import EncoderReference

# Finetune cells run single-threaded: their operations are small, and on a loaded 2-core machine a
# 2-thread cell takes several times the wall time of a 1-thread one (docs/speed.md).
FINETUNE_THREADS = 1


def result_tags(cell_hash: str, record: dict | None = None) -> dict[str, str]:
    """The tags that make a run's result portable (``benchmarks.results_files.folder``): its cell hash,
    the protocol version and commit that computed it, and the suite's record of the cell."""
    return {
        "cell_hash": cell_hash,
        "protocol_version": protocol_version(),
        "git_commit": git_commit() or "",
        **({"result_record": json.dumps(record, sort_keys=True, default=str)} if record else {}),
    }


def cell_record(cell: Cell) -> dict:
    """What a results file keeps of the cell beside its run: its settings and the suite's context."""
    return {"cell": cell.fields(), **cell.record}


_frozen = False


def freeze_long_lived_objects() -> None:
    """After the first cell of a process: what is alive then (modules, classes, the libraries'
    caches) is moved out of the collector's sight (``gc.freeze``), so that the collection after
    each cell scans what the cell made, not the whole interpreter (~1 s a cell before)."""
    global _frozen
    if not _frozen:
        gc.freeze()
        _frozen = True


def run_quietly(cli_class, args: list[str], log_path: Path) -> int:
    """Run a CLI in this process with its console output in ``log_path``. A crash (its run is
    already marked FAILED by ``run_cli``) leaves its traceback in the log and returns 1; Ctrl-C
    (its run marked KILLED by ``run_cli``) still stops the suite."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lightning_logs = [
        logging.getLogger(name) for name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric")
    ]
    levels = [logger.level for logger in lightning_logs]
    command_line = sys.argv
    # line-buffered: a stage's progress lines reach its log as they are printed, not at its end
    with log_path.open("w", buffering=1) as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        for logger in lightning_logs:
            logger.setLevel(logging.WARNING)
        sys.argv = [command_line[0]]  # the CLI parses `args`, not the suite's own flags
        try:
            # In a context of its own: jsonargparse keeps its parser (and through it the CLI, the
            # trainer, the data and the mapped features) in context variables until the next
            # parse, so the previous cell's features stayed resident beside the next one's.
            return contextvars.copy_context().run(run_cli, cli_class, args, True)  # Ctrl-C stops the suite
        except Exception:  # noqa: BLE001 - the caller names the cell and its log in one line
            traceback.print_exc()
            return 1
        finally:
            sys.argv = command_line
            gc.collect()  # drop the finished cell's model and feature maps before the next one
            freeze_long_lived_objects()
            release_freed_memory()  # and hand their memory back: the next cell starts from a small heap
            for logger, level in zip(lightning_logs, levels):
                logger.setLevel(level)


def pretrain(
    config: str, args: list[str], cell_hash: str, benchmark: str, log_path: Path, tags: dict[str, str] | None = None
) -> str:
    """Pretrain through ``python -m pretrain`` (in process); returns the run id. ``tags``: more run
    tags (the task attempt's, :mod:`benchmarks.tasks.attempts`). Its log gets plain progress lines (a
    stage runs for up to an hour), the console's way when stdout is not a terminal."""
    tags = json.dumps({**result_tags(cell_hash), "benchmark": benchmark, **(tags or {})})
    code = run_quietly(PretrainCLI, ["fit", "--config", config, *args, f"--tags={tags}"], log_path)
    run_id = finished_run("pretrain", cell_hash)
    if code != 0 or run_id is None:
        raise UserError(failure_line("pretraining", code, log_path))
    return run_id


def finetune(
    cell: Cell,
    config: str,
    experiment: str,
    parent_run_id: str,
    cell_hash: str,
    log_path: Path,
    benchmark: str = "",
    tags: dict[str, str] | None = None,
) -> str:
    """Run one finetune cell through ``python -m downstream`` (in process); returns the run id."""
    tags = {
        **result_tags(cell_hash, cell_record(cell)),
        "kind": cell.kind,
        "suite_encoder": cell.encoder,
        "benchmark": benchmark,
        **({"grid_of": cell.grid_of, "learning_rate": f"{cell.learning_rate:g}"} if cell.grid_of else {}),
        **({"recipe_from": cell.recipe_from, "learning_rate": f"{cell.learning_rate:g}"} if cell.recipe_from else {}),
        **(tags or {}),
    }
    source = cell.encoder_run if ":" in cell.encoder_run else f"runs:/{cell.encoder_run}"  # a run id has no ':'
    if cell.kind == "random":
        encoder = ["--model.encoder=random", f"--model.random_like={source}"]
    else:
        encoder = [f"--model.encoder={source}"]
    args = [
        "fit",
        "--config",
        config,
        *cell.args,
        *encoder,
        f"--model.mix={cell.mix}",
        f"--model.head={cell.head}",
        f"--seed_everything={cell.seed}",
        f"--data.train_fraction={cell.train_fraction}",
        f"--method={cell.method}",
        f"--parent_run_id={parent_run_id}",
        f"--experiment_name={experiment}",
        f"--tags={json.dumps(tags)}",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
    ]
    # time_total_s from the cell's start; encoders, cache checksums and dataset digests kept between cells
    with intra_op_threads(FINETUNE_THREADS), cell_clock(), reuse_between_cells():
        code = run_quietly(FinetuneCLI, args, log_path)
    run_id = finished_run(experiment, cell_hash, parent_run_id)
    if code != 0 or run_id is None:
        raise UserError(failure_line(f"cell {cell.method} seed {cell.seed}", code, log_path))
    return run_id


def baseline(
    cell: Cell,
    data: PairData,
    experiment: str,
    parent_run_id: str,
    cell_hash: str,
    benchmark: str = "",
    tags: dict[str, str] | None = None,
) -> str:
    """Fit a baseline on the data set's train split (or the cell's fraction of it, the subset of its
    seed), log a ``stage=baseline`` child run with the finetune metric names and prediction files;
    returns the run id."""
    probabilities = fit_baseline(cell.method, data, cell.train_fraction, cell.seed)
    tags = {"kind": "baseline", "pretrain_run_id": "none", "encoder": "none", **(tags or {})}
    return log_check_run(cell, data, probabilities, experiment, parent_run_id, cell_hash, benchmark, tags)


def linear_probe(
    cell: Cell,
    data: PairData,
    experiment: str,
    parent_run_id: str,
    cell_hash: str,
    benchmark: str = "",
    tags: dict[str, str] | None = None,
    cache_dir: str | None = DEFAULT_CACHE_DIR,
) -> str:
    """Fit the linear probe (``benchmarks.tasks.linear_probe``) on the frozen features of the cell's
    encoder, or of its random-init twin at the cell's seed (``probe_of``), and log it as a
    ``stage=baseline``, ``kind=probe`` child run with the finetune metric names, and as a finetune
    run does, the test pairs holding a sentence the encoder's pretraining read and the scores
    without them (a twin: what its pretrained twin read); returns the run id."""
    source = (
        cell.encoder_run if ":" in cell.encoder_run or Path(cell.encoder_run).is_file() else f"runs:/{cell.encoder_run}"
    )  # a run id, a published source or a checkpoint path
    twin = cell.probe_of == "random"
    reference = EncoderReference.parse("random", source).seeded(cell.seed) if twin else EncoderReference.parse(source)
    with reuse_between_cells():
        encoder = encoder_reuse.loaded(reference)
        probabilities = probe_probabilities(encoder, data, cache_dir, cell.seed, cell.train_fraction)
    tags = {
        "kind": "probe",
        "probe_of": cell.probe_of,
        "suite_encoder": cell.encoder,
        "family": encoder.family,
        "pretrain_run_id": "random" if twin else (encoder.run_id or source),
        "encoder": encoder_label(
            encoder.family, encoder.config, encoder.run_id, encoder.is_random, getattr(encoder, "name", None)
        ),
        **(tags or {}),
    }
    params = {
        "encoder_layers": encoder.num_layers,
        "encoder_dim": encoder.dim,
        "encoder_fingerprint": encoder.fingerprint,
        "model.encoder": str(reference),
    }
    seen = encoder_seen_text(MlflowClient(tracking_uri()), encoder.run_id, data.name)
    return log_check_run(cell, data, probabilities, experiment, parent_run_id, cell_hash, benchmark, tags, params, seen)


def log_check_run(
    cell: Cell,
    data: PairData,
    probabilities: dict,
    experiment: str,
    parent_run_id: str,
    cell_hash: str,
    benchmark: str,
    tags: dict[str, str],
    params: dict | None = None,
    seen: np.ndarray | None = None,
) -> str:
    """A finished ``stage=baseline`` child run of a system fitted here on train: the finetune metric
    names and prediction files of its dev and test ``probabilities`` ((N, C) each), and where the
    sentences its encoder read are known (``seen``), the metrics without the pairs holding one
    (:func:`unseen_metrics`); returns its id."""
    evaluation = {"dev": data.dev, "test": data.test}
    frames = {split: predictions_frame(data, evaluation[split], scores) for split, scores in probabilities.items()}
    client = MlflowClient(tracking_uri())
    tags = {
        "stage": "baseline",
        "method": cell.method,
        "seed": str(cell.seed),
        "mlflow.parentRunId": parent_run_id,
        **result_tags(cell_hash, cell_record(cell)),
        "dataset": data.name,
        **task_tags(data),
        "benchmark": benchmark,
        **tags,
        **process_tags(),
    }
    run_name = run_name_prefix(data) + join(cell.method, f"s{cell.seed}")
    run = client.create_run(ensure_experiment(experiment), run_name=run_name, tags=tags)
    run_id = run.info.run_id
    try:
        for split, frame in frames.items():
            for name, value in split_metrics(frame, split, data).items():
                client.log_metric(run_id, name, value)
            client.log_text(run_id, frame.to_csv(index=False), f"predictions/{split}.csv")
        for name, value in (unseen_metrics(frames, seen, data) if seen is not None else {}).items():
            client.log_metric(run_id, name, value)
        for key, value in {
            "train_pairs": len(data.train),
            "dev_pairs": len(data.dev),
            "test_pairs": len(data.test),
            "dataset": data.name,
            **task_params(data),  # as its finetune runs log them
            **(params or {}),
        }.items():
            client.log_param(run_id, key, value)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id
