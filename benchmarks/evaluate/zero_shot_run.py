"""Zero-shot similarity (:mod:`downstream.zero_shot`) as a method of an evaluation: a FINISHED
``stage=baseline``, ``kind=zero-shot`` child run of the task's benchmark parent with the task's
metric names and prediction files, and the same files in the task's results folder. It carries no
cell record, so a results-folder export of the task's cells leaves it out (it has its own folder)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient

from downstream.run.evaluation import unseen_metrics
from downstream.zero_shot.similarity import zero_shot_results
from harness.datasets.registry import run_name_prefix
from harness.datasets.types import PairData
from harness.protocol import protocol_version
from harness.tracking.liveness import process_tags
from harness.tracking.naming import encoder_label, join
from harness.tracking.runs import ensure_experiment, tracking_uri
from harness.tracking.seen_text import encoder_seen_text
from harness.versioning import git_commit

ZERO_SHOT = "zero-shot"
ST_POOLING = "sentence-transformers"


@dataclass(frozen=True)
class ZeroShot:
    """One zero-shot method: a pooling and a layer mix (ignored by sentence-transformers' pooling)."""

    pooling: str = "mean"
    mix: str = "average"

    def method(self, encoder_name: str) -> str:
        """``<encoder>-zero-shot`` (mean over real tokens, average of layers), ``…-zero-shot-top``,
        ``…-zero-shot-st`` (sentence-transformers' pooling); the twin's ``random-zero-shot…``, as
        the suite names its twin's methods."""
        if self.pooling == ST_POOLING:
            return f"{encoder_name}-{ZERO_SHOT}-st"
        suffix = "" if self.mix == "average" else self.mix.replace(":", "")
        return "-".join(part for part in (encoder_name, ZERO_SHOT, suffix) if part)


def log_zero_shot(
    encoder,
    method: str,
    zero_shot: ZeroShot,
    data: PairData,
    experiment: str,
    parent_run_id: str,
    folder: Path,
    cache_dir: str | None,
    seed: int = 0,
    source: str = "",
) -> tuple[str, dict[str, float]]:
    """Score ``encoder`` zero-shot on ``data``'s dev and test, log the child run and write
    ``<folder>/<method>/s<seed>/{dev,test}.csv`` and ``metrics.json`` (a twin runs at each seed).

    Returns:
        the run id and its metrics (``<split>_<metric>``, correlations in [-1, 1]).
    """
    frames, metrics = zero_shot_results(encoder, data, zero_shot.pooling, zero_shot.mix, cache_dir)
    client = MlflowClient(tracking_uri())
    seen = encoder_seen_text(client, encoder.run_id, data.name)  # a twin: what its pretrained twin read
    if seen is not None:
        metrics.update(unseen_metrics(frames, seen, data))
    tags = {
        "stage": "baseline",
        "kind": ZERO_SHOT,
        "method": method,
        "seed": str(seed),
        "mlflow.parentRunId": parent_run_id,
        "dataset": data.name,
        "family": encoder.family,
        "pretrain_run_id": "random" if encoder.is_random else (encoder.run_id or source),
        "encoder": encoder_label(
            encoder.family, encoder.config, encoder.run_id, encoder.is_random, getattr(encoder, "name", None)
        ),
        "pooling": zero_shot.pooling,
        "mix": zero_shot.mix,
        "protocol_version": protocol_version(),
        "git_commit": git_commit() or "",
        **process_tags(),
    }
    run = client.create_run(
        ensure_experiment(experiment), run_name=run_name_prefix(data) + join(method, f"s{seed}"), tags=tags
    )
    run_id = run.info.run_id
    try:
        for name, value in metrics.items():
            client.log_metric(run_id, name, value)
        for split, frame in frames.items():
            client.log_text(run_id, frame.to_csv(index=False), f"predictions/{split}.csv")
        params = {
            "dataset": data.name,
            "dev_pairs": len(data.dev),
            "test_pairs": len(data.test),
            "pooling": zero_shot.pooling,
            "mix": zero_shot.mix,
            "encoder_layers": encoder.num_layers,
            "encoder_dim": encoder.dim,
            "encoder_fingerprint": encoder.fingerprint,
            "model.encoder": source,
        }
        for key, value in params.items():
            client.log_param(run_id, key, value)
        target = folder / method / f"s{seed}"
        target.mkdir(parents=True, exist_ok=True)
        for split, frame in frames.items():
            frame.to_csv(target / f"{split}.csv", index=False)
        record = {"method": method, "run_id": run_id, "seed": seed, **params, "metrics": metrics}
        (target / "metrics.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id, metrics
