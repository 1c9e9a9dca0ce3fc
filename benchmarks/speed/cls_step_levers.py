"""How far GPT's ``cls`` training step could go if the model's arithmetic were changed: the step as
the study runs it beside the same step without dropout, with the exact GELU instead of GPT's tanh
form, with both orders in one batch, and with all three at once, alternated in one process on the
same batches.

``python -m benchmarks.speed.cls_step_levers [--encoder SOURCE] [--batches 30] [--rounds 3]
[--precision bf16-mixed|32-true] [--json PATH]``

Every lever moves numbers (other dropout masks, another activation, another order of draws), so
none is used by the harness; dropping dropout is not even a legitimate recipe. The rows bound what
such a change could buy a study cell: the ``all three`` row is a floor under any of them. The encoder is
GPT's CPU config with untrained weights (speed does not depend on them) unless ``--encoder`` names
one (``runs:/<id>``, a checkpoint path); batch 16, λ = 0.5, as ``configs/downstream/gpt.yaml``.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import operator
import statistics
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import torch
from torch import nn

from benchmarks.speed.finetune_throughput import config_encoder, default_precision, timed_steps
from benchmarks.speed.rounds import interleaved, load_average, machine, per_round, range_text, spread
from downstream.data.pair_datamodule import PairDataModule
from downstream.model.joint_classifiers import JointClassifier, both_orders
from downstream.model.pair_classifier import PairClassifier
from harness.cli.runtime import leave_new_memory_unfilled, retain_freed_memory
from harness.entry_point import run_main
from pretrain.encoders.loading import load_encoder

BATCH_SIZE = 16  # configs/downstream/gpt.yaml
STUDY_STEPS = 690  # a 100% cell of the study: 3 epochs of 230 batches


@contextmanager
def without_dropout(model: nn.Module):
    """Every dropout of ``model`` (modules, and attention's probability) at 0 inside the block."""
    saved = [(module, "p", module.p) for module in model.modules() if isinstance(module, nn.Dropout)]
    saved += [
        (module, "attention_dropout", module.attention_dropout)
        for module in model.modules()
        if isinstance(getattr(module, "attention_dropout", None), float)
    ]
    for module, name, _ in saved:
        setattr(module, name, 0.0)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


@contextmanager
def exact_gelu(model: nn.Module):
    """Every GELU of ``model`` in its exact (erf) form inside the block."""
    gelus = [module for module in model.modules() if isinstance(module, nn.GELU)]
    saved = [module.approximate for module in gelus]
    for module in gelus:
        module.approximate = "none"
    try:
        yield
    finally:
        for module, approximate in zip(gelus, saved):
            module.approximate = approximate


def one_batch_training(
    head: JointClassifier, language_model, ids_ab, lengths_ab, ids_ba, lengths_ba, language_modelling=True
):
    """``JointClassifier.forward`` with both orders in one batch of 2B in training too."""
    batch = ids_ab.size(0)
    ids, lengths = both_orders(ids_ab, lengths_ab, ids_ba, lengths_ba)  # (2B, T), (2B,)
    hidden = language_model.hidden_states(ids, lengths)  # (2B, T, H)
    states = hidden[torch.arange(len(lengths)), lengths - 1]  # (2B, H)
    lm = language_model.next_token_nll(hidden, ids, lengths) if language_modelling else None
    return head.linear(head.dropout(states[:batch] + states[batch:])), lm


@contextmanager
def both_orders_in_one_batch(classifier: PairClassifier):
    """The joint head runs :func:`one_batch_training` inside the block."""
    head = classifier.head
    head.forward = lambda *args, **kwargs: one_batch_training(head, *args, **kwargs)
    try:
        yield
    finally:
        del head.forward


LEVERS = {
    "as run": (),
    "no dropout": (without_dropout,),
    "exact GELU": (exact_gelu,),
    "one batch of both orders": (both_orders_in_one_batch,),
    "all three": (without_dropout, exact_gelu, both_orders_in_one_batch),
}


def measure(encoder, batches: int, rounds: int, precision: str) -> list[dict]:
    """Seconds a training step under each lever, ``rounds`` alternations on the same batches."""
    torch.manual_seed(0)
    classifier = PairClassifier(encoder, mix="scalar", head="cls", finetune="full", lm_weight=0.5)
    with tempfile.TemporaryDirectory() as cache:
        data = PairDataModule(cache_dir=cache, batch_size=BATCH_SIZE)
        data.attach(encoder, classifier.input_kind)
        data.setup()
        collate = data.collators["train"]
        bucketed = [batch[5].tolist() for _, batch in zip(range(batches + 1), data.train_dataloader())]

        def step_seconds(levers) -> float:
            with ExitStack() as stack:
                for lever in levers:
                    stack.enter_context(lever(classifier))
                return timed_steps(classifier, bucketed, collate, precision) / batches

        load_before = load_average()
        steps = interleaved({name: partial(step_seconds, levers) for name, levers in LEVERS.items()}, rounds)
        load_after = load_average()
    return [
        {
            "lever": name,
            "precision": precision,
            "batch_size": BATCH_SIZE,
            "timed_batches": batches,
            "step_seconds": seconds,
            "median_step_seconds": statistics.median(seconds),
            "over_as_run": statistics.median(per_round(operator.truediv, steps["as run"], seconds)),
            "spread": spread(seconds),
            "over_as_run_spread": spread(per_round(operator.truediv, steps["as run"], seconds)),
            "study_cell_steps_minutes": STUDY_STEPS * statistics.median(seconds) / 60,
            "load_average": load_after[0],
            "load_average_before_after": [load_before, load_after],
            "machine": machine(),
        }
        for name, seconds in steps.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--encoder", help="a GPT encoder (runs:/<id>, a checkpoint); default: GPT's CPU config, untrained"
    )
    parser.add_argument("--batches", type=int, default=30, help="training batches timed per lever and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the levers")
    parser.add_argument("--precision", choices=["bf16-mixed", "32-true"], default=None)
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1:
        parser.error("--batches and --rounds must be at least 1")
    retain_freed_memory()
    leave_new_memory_unfilled()
    torch.set_num_threads(1)  # as a study cell runs
    torch.use_deterministic_algorithms(True)
    encoder = load_encoder(args.encoder) if args.encoder else config_encoder("gpt")
    if not encoder.spec.joint_pair_input:
        message = f"error: --encoder {args.encoder}: a {encoder.family} encoder has no joint pair input (cls)"
        print(message, file=sys.stderr)
        return 2
    rows = measure(encoder, args.batches, args.rounds, args.precision or default_precision())
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(f"\n{'lever':<26}{'s/step':>8}{'× as run':>18}{f'{STUDY_STEPS} steps':>12}  each round")
    for row in rows:
        rounds = " ".join(f"{s:.3f}" for s in row["step_seconds"])
        over = range_text(row["over_as_run_spread"], spec=".2f")
        print(
            f"{row['lever']:<26}{row['median_step_seconds']:8.3f}{over:>18}"
            f"{row['study_cell_steps_minutes']:9.1f} min  {rounds}"
        )
    print(
        f"GPT cls training steps (forward, λ 0.5 LM loss, backward, AdamW), batch {BATCH_SIZE}, "
        f"{rows[0]['precision']}, one thread, median of {args.rounds} rounds; a study cell's fit adds its "
        f"dev validations to the {STUDY_STEPS} steps; load average before/after "
        f"{rows[0]['load_average_before_after'][0][0]:.1f}/{rows[0]['load_average_before_after'][1][0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    run_main(main)
