"""How runs are named and labelled in the MLflow UI.

The runs table shows about 14 characters of a run name, so a name starts with what tells runs
apart (the encoder kind, the mix, the mode) and ends with the seed: ``random·gradual·concat-pool·s0``,
``elmo·scalar·pool-mlp·s0``, ``elmo·2x256·full·mrpc·s0``. The ``encoder`` tag names the encoder a
downstream run used (family, size, short pretrain run id), so runs of different encoders never
share a group when the table is grouped by ``method`` and ``encoder``.
"""

from __future__ import annotations

import re

SEPARATOR = "·"
SHORT_ID = 8  # characters of a run id in labels
METRIC_KEY = re.compile(r"[^\w./\- :]")  # what MLflow refuses in a metric name


def _first(config: dict, keys: tuple[str, ...]):
    return next((config[key] for key in keys if key in config), "?")


def size_label(config: dict) -> str:
    """``<layers>x<width>`` of a model config: ``2x256`` (width: hidden size, else embedding size);
    a published model's config (``hf_config``) in its own key names."""
    config = config.get("hf_config", config)
    layers = _first(config, ("num_layers", "num_hidden_layers", "n_layer"))
    return f"{layers}x{_first(config, ('hidden_size', 'embedding_size', 'n_embd', 'd_model', 'dim'))}"


def encoder_label(family: str, config: dict, run_id: str | None, random: bool = False, name: str | None = None) -> str:
    """The ``encoder`` tag: ``elmo-2x256-3f9a2c1d``; the random twin of that encoder
    ``random-elmo-2x256-3f9a2c1d`` (the run whose architecture it copies); ``-file`` for an
    encoder loaded from a checkpoint file; a published model's name (``hf-6x384-all-minilm-l6-v2``)."""
    label = f"{family}-{size_label(config)}-{name or (run_id[:SHORT_ID] if run_id else 'file')}"
    return f"random-{label}" if random else label


def twin_label(label: str) -> str:
    """The ``encoder`` tag of the other half of a pretrained/random pair."""
    return label.removeprefix("random-") if label.startswith("random-") else f"random-{label}"


def join(*parts) -> str:
    return SEPARATOR.join(str(part) for part in parts if part not in (None, ""))


def finetune_run_name(kind: str, mode: str, mix: str | None, head: str, fraction: float, seed) -> str:
    """``elmo·scalar·pool-mlp·s0``, ``random·gradual·concat-pool@0.1·s3``: the encoder kind (its
    family, ``random`` or a benchmark's encoder name), the mode unless frozen, the mix, the head,
    ``@<fraction>`` below the whole training set, the seed."""
    head_part = f"{head}@{fraction:g}" if fraction < 1 else head
    return join(kind, None if mode == "frozen" else mode, mix, head_part, f"s{seed}")


def cell_run_name(method: str, seed) -> str:
    """A benchmark cell's run name: ``elmo-reuters-gradual-attn@0.1·s0``, its method (unique in the
    benchmark, led by the encoder's name there) and seed."""
    return join(method, f"s{seed}")


def pretrain_run_name(
    family: str, config: dict, variant: str | None, corpus: str, task_stage: bool, seed, smoke: bool = False
) -> str:
    """``elmo·2x256·full·mrpc·s0``; ``ulmfit·3x1150·mrpc+extra·task·s0`` for a target-task LM;
    ``elmo·2x32·full·mrpc·smoke·s0`` for a toy run that only tests the pipeline."""
    return join(
        family,
        size_label(config),
        variant,
        corpus,
        "task" if task_stage else None,
        "smoke" if smoke else None,
        f"s{seed}",
    )


def benchmark_run_name(name: str) -> str:
    return join(name, "benchmark")


def metric_key(text: str) -> str:
    """``text`` as an MLflow metric key: characters MLflow refuses become ``_``."""
    return METRIC_KEY.sub("_", text)
