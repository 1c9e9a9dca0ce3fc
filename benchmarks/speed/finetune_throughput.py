"""Fine-tuning throughput of every family and mode, in pairs/s and as a fraction of the machine's
matmul peak, against a naive float32 baseline measured in the same process on the same GLUE-train pairs.

``python -m benchmarks.speed.finetune_throughput [--families elmo ulmfit gpt] [--batches 30]
[--precision bf16-mixed|32-true] [--json PATH] [--encoder FAMILY=SOURCE ...] [--profile]``

Encoders are each registered family's CPU config (``Family.pretrain_config``) with untrained
weights and a tokenizer built on GLUE train — speed does not depend on the weights — unless
``--encoder elmo=runs:/<id>`` names a trained one. Per family (scalar mix + pool-mlp, batch 32):

- ``frozen``: the harness's path — cached per-layer features (the on-disk feature store), length-
  bucketed batches — beside ``recomputed`` (the same batches, the encoder run every step) and the
  ``naive`` baseline (the encoder run every step on random batches padded to the data set's
  longest sentence: no cache, no bucketing).
- ``full``: the encoder trained under the head (discriminative AdamW groups): bucketed token
  batches vs the naive padded, unbucketed ones.
- ``frozen`` ``attn`` and ``decomp``: the ESIM-style head and decomposable attention on the same
  cached features and batches as the frozen pool-mlp row; ``over_pool_mlp`` is the epoch over
  pool-mlp's, both at the run's precision.
- ``cls`` (families with a joint pair input: GPT): its own classifier on both orders of the joint
  sequence, with λ = 0.5 LM loss; beside it the evaluation pass (no dropout, both orders in one
  batch) against one model pass per order (the former implementation), on the same batches.

Each harness row runs at ``--precision`` (default: ``bf16-mixed`` where the CPU computes bf16
natively, as the CLIs do; else ``32-true``) under Lightning's autocast, and again in float32
(``fp32_*``: the path before bf16); the naive rows always run in float32, so ``over_naive`` counts
the precision's gain too. ``peak_fraction`` is a row's useful model FLOP/s
(``benchmarks.speed.model_flops``) over the matmul peak of the precision it ran in, measured in
this process before and after the row (``benchmarks.speed.pretrain_throughput``'s product of up to 2048²).

Every variant times the same number of training steps (forward, backward, AdamW); one batch is a
warm-up. ``--profile`` prints torch.profiler's top operators of each harness step at the precision.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import os
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import torch
from pytorch_lightning.plugins.precision import MixedPrecision
from torch.utils.data import BatchSampler, RandomSampler

from benchmarks.speed.model_flops import finetune_step_flops
from benchmarks.speed.pretrain_throughput import matmul_peak_gflops
from downstream.data.pair_datamodule import PairDataModule
from downstream.model.joint_classifiers import JointClassifier
from downstream.model.pair_classifier import PairClassifier
from harness.cli.precision import cpu_bf16_supported
from harness.cli.runtime import retain_freed_memory
from harness.entry_point import run_main
from harness.unique_keys import load_yaml
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.encoders.loading import load_encoder
from pretrain.encoders.protocol import Encoder
from pretrain.families import family_of, family_of_config, pretrained_families

BATCH_SIZE = 32
CROSS_HEADS = ("attn", "decomp")  # timed on the frozen pool-mlp row's cached features and batches
LEARNING_RATE, WEIGHT_DECAY, LR_DECAY = 1e-3, 0.0, 2.6  # LitPairClassifier's defaults
FLOAT32 = "32-true"
PEAK_DTYPES = {FLOAT32: torch.float32, "bf16-mixed": torch.bfloat16}


def default_precision() -> str:
    """bf16-mixed where this CPU computes bf16 natively, else float32."""
    return "bf16-mixed" if cpu_bf16_supported() else FLOAT32


def config_encoder(family: str) -> Encoder:
    """An untrained encoder at the family's CPU config, its tokenizer built on GLUE train only."""
    config = load_yaml(family_of(family).pretrain_config)
    spec, arguments = family_of_config(config, family)
    data = {key: value for key, value in (config.get("data") or {}).items() if key != "extra_corpus"}
    tokenizer = CorpusDataModule(**data).tokenizer
    model_config = spec.config_from(arguments, len(tokenizer))
    torch.manual_seed(0)
    return Encoder(
        spec.build(model_config),
        tokenizer,
        family,
        model_config.to_dict(),
        fingerprint=f"finetune-speed-{family}-untrained",
        source="random",
        random_seed=0,
    )


def timed_steps(classifier: PairClassifier, batches, inputs, precision: str = FLOAT32, profile: bool = False) -> float:
    """Seconds for training steps of ``classifier`` over ``batches`` (pair-index lists) at ``precision``;
    ``inputs`` makes a step's four input tensors and labels. The first batch is a warm-up. Each step
    is the training step of ``LitPairClassifier``: forward, loss, backward and its (fused) AdamW
    groups, without the fine-tuning schedule (it needs a Trainer)."""
    optimizer = torch.optim.AdamW(
        classifier.optimizer_groups(LEARNING_RATE, LR_DECAY), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, fused=True
    )
    autocast = MixedPrecision(precision, "cpu") if precision != FLOAT32 else None
    classifier.train()
    if classifier.finetune == "frozen":
        classifier.encoder.freeze()
    start = None
    with profiled() if profile else nullcontext():
        for index, pair_indices in enumerate(batches):
            if index == 1:
                start = time.perf_counter()
            batch = inputs(pair_indices)
            with autocast.forward_context() if autocast else nullcontext():
                loss = classifier.loss(classifier(classifier.inputs(*batch[:4])), batch[4])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return time.perf_counter() - start


@torch.no_grad()
def timed_evaluation(classifier: PairClassifier, batches, inputs, precision: str = FLOAT32) -> float:
    """Seconds for forward passes in eval mode (a dev or test pass) over ``batches``; the first is a warm-up."""
    autocast = MixedPrecision(precision, "cpu") if precision != FLOAT32 else None
    classifier.eval()
    start = None
    for index, pair_indices in enumerate(batches):
        if index == 1:
            start = time.perf_counter()
        with autocast.forward_context() if autocast else nullcontext():
            classifier(classifier.inputs(*inputs(pair_indices)[:4]), language_modelling=False)  # as a dev pass
    classifier.train()
    return time.perf_counter() - start


def pad_to(tensor: torch.Tensor, steps: int) -> torch.Tensor:
    """(B, T) ids → (B, steps), trailing zeros."""
    return torch.nn.functional.pad(tensor, (0, steps - tensor.shape[1]))


def batch_flops(classifier: PairClassifier, batches, collate) -> float:
    """Useful FLOPs of the training steps over ``batches`` but the warm-up, on their unpadded inputs."""
    return sum(finetune_step_flops(classifier, classifier.inputs(*collate(indices)[:4])) for indices in batches[1:])


def matmul_peaks() -> dict[str, float]:
    """This process's matmul peak of each precision now, in GFLOP/s."""
    return {precision: matmul_peak_gflops(dtype, seconds=1.0) for precision, dtype in PEAK_DTYPES.items()}


def rates(pairs: int, seconds: float, flops: float, peak_gflops: float) -> tuple[float, float]:
    """(pairs/s, fraction of the peak) of ``pairs`` and ``flops`` done in ``seconds``."""
    return pairs / seconds, flops / seconds / (peak_gflops * 1e9)


def measure_family(family: str, encoder: Encoder, batches: int, profile: bool, precision: str) -> list[dict]:
    """Every mode of one family; returns one row per mode."""
    rows = []
    modes = [("frozen", "pool-mlp"), *(("frozen", head) for head in CROSS_HEADS), ("full", "pool-mlp")]
    modes += [("full", "cls")] if encoder.spec.joint_pair_input else []
    cache_folder = tempfile.TemporaryDirectory()  # one feature cache: the frozen heads read the same features
    for finetune, head in modes:
        torch.manual_seed(0)
        model = PairClassifier(
            encoder, mix="scalar", head=head, finetune=finetune, lm_weight=0.5 if head == "cls" else 0.0
        )
        kind = model.input_kind
        data = PairDataModule(cache_dir=cache_folder.name, batch_size=BATCH_SIZE)
        data.attach(encoder, kind)
        start = time.perf_counter()
        data.setup()
        setup_seconds = time.perf_counter() - start
        collate, train = data.collators["train"], data.pairs["train"]
        bucketed = [batch[5].tolist() for _, batch in zip(range(batches + 1), data.train_dataloader())]
        sampler = BatchSampler(
            RandomSampler(range(len(train)), generator=torch.Generator().manual_seed(0)), BATCH_SIZE, drop_last=False
        )
        unbucketed = [indices for _, indices in zip(range(batches + 1), sampler)]
        pairs = sum(len(batch) for batch in bucketed[1:])
        naive_pairs = sum(len(batch) for batch in unbucketed[1:])
        flops, naive_flops = batch_flops(model, bucketed, collate), batch_flops(model, unbucketed, collate)
        peaks_before = matmul_peaks()
        row = {
            "family": family,
            "mode": finetune if head != "cls" else "cls",
            "head": head,
            "precision": precision,
            "batch_size": BATCH_SIZE,
            "timed_batches": batches,
            "setup_seconds": setup_seconds,
            "model_gflop_per_pair": flops / pairs / 1e9,
        }
        seconds = {}  # variant → seconds over its batches
        naive = None  # the naive variant's (batches, inputs)
        if kind == "features":

            def cached(indices):
                return collate(indices)[:5]

            seconds["harness"] = timed_steps(model, bucketed, cached, precision, profile)
            seconds["fp32"] = timed_steps(model, bucketed, cached)
        else:
            seconds["harness"] = timed_steps(model, bucketed, collate, precision, profile)
            seconds["fp32"] = timed_steps(model, bucketed, collate)
        if head in CROSS_HEADS:  # the same cached features and batches as the pool-mlp row above
            pool_mlp = next(r for r in rows if r["mode"] == "frozen" and r["head"] == "pool-mlp")
        elif kind == "features":
            longest = max(len(encoder.encode_ids(s)) for p in train for s in (p.sentence1, p.sentence2))

            def recomputed(indices, steps=None):
                """The encoder run on the batch's sentences (padded to ``steps`` ids if given)."""
                out = []
                for sentences in ([train[i].sentence1 for i in indices], [train[i].sentence2 for i in indices]):
                    ids, lengths = encoder.encode(sentences)
                    with torch.no_grad():
                        out += list(encoder.features(pad_to(ids, steps or ids.shape[1]), lengths))
                return (*out, torch.tensor([train[i].label for i in indices]))

            seconds["recomputed"] = timed_steps(model, bucketed, recomputed, precision)
            naive = unbucketed, lambda indices: recomputed(indices, longest)
            row["cache_sentences"] = len(data.sentences())
        else:
            sequences = (
                collate.forward + collate.backward
                if kind == "joint"
                else [collate.encoded[i] for i in collate.first + collate.second]
            )
            longest = max(len(ids) for ids in sequences)

            def padded(indices):
                ids_a, lengths_a, ids_b, lengths_b, labels, _ = collate(indices)
                return pad_to(ids_a, longest), lengths_a, pad_to(ids_b, longest), lengths_b, labels

            naive = unbucketed, padded
            if head == "cls":  # evaluation: both orders in one pass vs one pass per order, same batches
                batched_seconds = timed_evaluation(model, bucketed, collate, precision)
                with one_pass_per_order(model.head):
                    two_pass_seconds = timed_evaluation(model, bucketed, collate, precision)
                row.update(
                    {
                        "eval_pairs_per_s": pairs / batched_seconds,
                        "eval_two_pass_pairs_per_s": pairs / two_pass_seconds,
                        "eval_over_two_pass": two_pass_seconds / batched_seconds,
                    }
                )
        if naive:
            seconds["naive"] = timed_steps(model, *naive)
        peaks_after = matmul_peaks()
        peak = {name: (peaks_before[name] + peaks_after[name]) / 2 for name in PEAK_DTYPES}
        row["pairs_per_s"], row["peak_fraction"] = rates(pairs, seconds["harness"], flops, peak[precision])
        row["fp32_pairs_per_s"], row["fp32_peak_fraction"] = rates(pairs, seconds["fp32"], flops, peak[FLOAT32])
        row.update(
            {
                "over_fp32": seconds["fp32"] / seconds["harness"],
                "epoch_seconds": len(train) / row["pairs_per_s"],
                "fp32_epoch_seconds": len(train) / row["fp32_pairs_per_s"],
                "matmul_peak_gflops_per_s": peak[FLOAT32],
                "bf16_matmul_peak_gflops_per_s": peak["bf16-mixed"],
                "load_average": os.getloadavg()[0],
            }
        )
        if "recomputed" in seconds:
            row.update(
                {
                    "recomputed_pairs_per_s": pairs / seconds["recomputed"],
                    "cached_over_recomputed": seconds["recomputed"] / seconds["harness"],
                }
            )
        if "naive" in seconds:
            row["naive_pairs_per_s"], row["naive_peak_fraction"] = rates(
                naive_pairs, seconds["naive"], naive_flops, peak[FLOAT32]
            )
            row.update(
                {
                    "over_naive": row["pairs_per_s"] / row["naive_pairs_per_s"],
                    "fp32_over_naive": row["fp32_pairs_per_s"] / row["naive_pairs_per_s"],
                }
            )
        if head in CROSS_HEADS:
            row.update(
                {
                    "over_pool_mlp": pool_mlp["pairs_per_s"] / row["pairs_per_s"],
                    "fp32_over_pool_mlp": pool_mlp["fp32_pairs_per_s"] / row["fp32_pairs_per_s"],
                }
            )
        rows.append(row)
        print(
            f"  measured {family} {row['mode']} {head}: {row['pairs_per_s']:.0f} pairs/s ({precision}), "
            f"{row['fp32_pairs_per_s']:.0f} in float32",
            file=sys.stderr,
            flush=True,
        )
    cache_folder.cleanup()
    return rows


def two_pass_joint(
    head: JointClassifier, language_model, ids_ab, lengths_ab, ids_ba, lengths_ba, language_modelling: bool = True
):
    """The joint classifier as it evaluated before both orders were batched (the baseline of the
    ``cls`` row, and the reference of ``tests/downstream/test_joint.py``): one model pass per order."""
    cls_states, lm = [], {"nll_forward": 0.0, "count": 0}
    for ids, lengths in ((ids_ab, lengths_ab), (ids_ba, lengths_ba)):
        hidden = language_model.hidden_states(ids, lengths)  # (B, T, H)
        cls_states.append(hidden[torch.arange(len(lengths)), lengths - 1])  # (B, H)
        if language_modelling:
            sums = language_model.next_token_nll(hidden, ids, lengths)
            lm = {name: lm[name] + sums[name] for name in lm}
    return head.linear(head.dropout(cls_states[0] + cls_states[1])), lm if language_modelling else None


@contextmanager
def one_pass_per_order(head: JointClassifier):
    """``head`` runs :func:`two_pass_joint` inside the block."""
    head.forward = partial(two_pass_joint, head)
    try:
        yield head
    finally:
        del head.forward


@contextmanager
def profiled():
    """Prints torch.profiler's top operators (self CPU time) of the block."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        yield
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def print_table(rows: list[dict]) -> None:
    print(
        f"\n{'family':<8}{'mode':<8}{'head':<10}{'pairs/s':>9}{'% peak':>8}{'fp32':>8}{'% peak':>8}{'naive':>8}"
        f"{'% peak':>8}{'× naive':>9}{'fp32 ×':>8}{'cached ×':>10}{'epoch s':>9}  versus"
    )
    for r in rows:
        naive = (
            f"{r['naive_pairs_per_s']:8.0f}{100 * r['naive_peak_fraction']:8.1f}{r['over_naive']:9.1f}"
            f"{r['fp32_over_naive']:8.1f}"
            if "naive_pairs_per_s" in r
            else f"{'':>33}"
        )
        cached = f"{r['cached_over_recomputed']:10.1f}" if "cached_over_recomputed" in r else f"{'':>10}"
        versus = (
            f"{r['over_pool_mlp']:.1f}× the pool-mlp epoch (float32: {r['fp32_over_pool_mlp']:.1f}×)"
            if "over_pool_mlp" in r
            else f"evaluation {r['eval_pairs_per_s']:.0f} pairs/s, {r['eval_over_two_pass']:.2f}× one pass per order"
            if "eval_over_two_pass" in r
            else ""
        )
        print(
            f"{r['family']:<8}{r['mode']:<8}{r['head']:<10}{r['pairs_per_s']:>9.0f}{100 * r['peak_fraction']:8.1f}"
            f"{r['fp32_pairs_per_s']:8.0f}{100 * r['fp32_peak_fraction']:8.1f}{naive}{cached}"
            f"{r['epoch_seconds']:>9.1f}  {versus}"
        )
    fp32_peaks = [r["matmul_peak_gflops_per_s"] for r in rows]
    bf16_peaks = [r["bf16_matmul_peak_gflops_per_s"] for r in rows]
    print(
        f"batch {BATCH_SIZE} pairs, scalar mix (GPT's cls: its own head); pairs/s at {rows[0]['precision']}, "
        f"fp32 = the same path in float32, naive (float32) = no cache, random batches padded to the data set's "
        f"longest; % peak = model FLOP/s over the matmul peak of the row's precision (float32 "
        f"{min(fp32_peaks):.0f}–{max(fp32_peaks):.0f} GFLOP/s, "
        f"bfloat16 {min(bf16_peaks):.0f}–{max(bf16_peaks):.0f}, "
        f"this process); native bf16: {'yes' if cpu_bf16_supported() else 'no'}; threads {torch.get_num_threads()}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=pretrained_families(), choices=pretrained_families())
    parser.add_argument("--batches", type=int, default=30, help="training batches timed per variant")
    parser.add_argument(
        "--encoder",
        action="append",
        default=[],
        metavar="FAMILY=SOURCE",
        help="use a trained encoder for a family (runs:/<id>, a path, latest:<family>)",
    )
    parser.add_argument(
        "--precision",
        choices=tuple(PEAK_DTYPES),
        default=default_precision(),
        help="of the harness rows (default: bf16-mixed where the CPU has native bf16, else 32-true)",
    )
    parser.add_argument("--profile", action="store_true", help="print each harness step's top operators")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    retain_freed_memory()
    sources = dict(item.split("=", 1) for item in args.encoder)
    rows = []
    for family in args.families:
        encoder = load_encoder(sources[family]) if family in sources else config_encoder(family)
        rows += measure_family(family, encoder, args.batches, args.profile, args.precision)
    print_table(rows)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
