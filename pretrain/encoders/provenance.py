"""Where an encoder came from, in the words a stage prints before it trains: the pretrain run
behind it, its family and size, the text it read, when it finished and its held-out perplexity —
and whether it is a smoke run (tag ``smoke=true``: a toy that tests the pipeline, such as
``make first-look``'s), which no result should rest on unnoticed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from mlflow.tracking import MlflowClient

from harness.tracking.naming import size_label
from harness.tracking.runs import tracking_uri
from pretrain.families import FIRST_FORMAT_FAMILY

SMOKE_TAG = "smoke"
SIZE_PARAMS = ("num_layers", "hidden_size", "embedding_size")


def is_smoke(run) -> bool:
    """A run tagged ``smoke=true`` (``--smoke``, set by ``configs/pretrain/smoke.yaml``)."""
    return run.data.tags.get(SMOKE_TAG, "").lower() == "true"


@dataclass(frozen=True)
class EncoderOrigin:
    """A pretrain run as the encoder it made. ``finished``: its end time (epoch ms), None while it runs."""

    run_id: str
    family: str
    size: str
    corpus: str
    finished: int | None
    val_ppl: float | None
    smoke: bool

    def describe(self) -> str:
        """``elmo 2x32, run 3f2a1b2c…, corpus mrpc, finished 2026-12-05 09:41 UTC, val_ppl 512.3 — smoke run``."""
        when = (
            datetime.fromtimestamp(self.finished / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            if self.finished
            else "not finished"
        )
        ppl = f"{self.val_ppl:.1f}" if self.val_ppl is not None else "?"
        smoke = " — a smoke run (tests the pipeline; `make pretrain` makes a real encoder)" if self.smoke else ""
        return (
            f"{self.family} {self.size}, run {self.run_id}, corpus {self.corpus}, finished {when}, val_ppl {ppl}{smoke}"
        )


def origin_of(run_id: str | None, client: MlflowClient | None = None) -> EncoderOrigin | None:
    """The pretrain run ``run_id`` of this store as an :class:`EncoderOrigin`; None for no id or a
    run this store does not hold (an encoder from a file or another store)."""
    if not run_id:
        return None
    client = client or MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - a run of another store: nothing to say about it here
        return None
    params, metrics = run.data.params, run.data.metrics
    config = {key: params[f"model.{key}"] for key in SIZE_PARAMS if f"model.{key}" in params}
    return EncoderOrigin(
        run_id=run_id,
        family=run.data.tags.get("family", FIRST_FORMAT_FAMILY),
        size=size_label(config),
        corpus=params.get("data.corpus", "mrpc"),
        finished=run.info.end_time if run.info.status == "FINISHED" else None,
        val_ppl=metrics.get("best_val_ppl", metrics.get("val_ppl")),
        smoke=is_smoke(run),
    )


def encoder_summary(encoder, origin: EncoderOrigin | None) -> str:
    """What a stage prints about the encoder it resolved (an :class:`~pretrain.encoders.protocol.Encoder`
    and the origin of its run, None for a file or a published model)."""
    what = origin.describe() if origin else f"{encoder.source} ({encoder.family} {size_label(encoder.config)})"
    return f"random twin (untrained, seed {encoder.random_seed}) of {what}" if encoder.is_random else what
