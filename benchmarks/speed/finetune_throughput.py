"""Fine-tuning throughput of every family and mode, in pairs/s and as a fraction of the machine's
matmul peak, against a naive float32 baseline measured in the same process on the same GLUE-train pairs.

``python -m benchmarks.speed.finetune_throughput [--families elmo ulmfit gpt] [--batches 30]
[--rounds 5] [--levers compile foreach] [--precision bf16-mixed|32-true] [--peak-seconds 1]
[--json PATH] [--encoder FAMILY=SOURCE ...] [--profile]``

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
(``fp32_*``: the path before bf16; a float32 row is its own twin); the naive rows always run in
float32, so ``over_naive`` counts the precision's gain too. A row's variants (harness, float32
twin, recomputed / naive / pool-mlp reference, ``--levers``, and the matmul peaks of float32 and of
the precision, as ``benchmarks.speed.pretrain_throughput`` measures them) run interleaved in
``--rounds`` rounds on the same batches (``benchmarks.speed.rounds``); every figure and ratio is
formed inside a round and reported as its median (the row's keys) and spread (``spread``:
quartiles, range, each round's value). ``peak_fraction`` is a round's useful model FLOP/s
(``benchmarks.speed.model_flops``) over the same round's matmul peak of the row's precision; the
load average is recorded before and after each row's rounds.

Every variant times the same number of training steps (forward, backward, AdamW); one batch is a
warm-up. ``--levers`` (``benchmarks.speed.levers``): ``compile`` times the step of the model under
``torch.compile``, its compile time amortised over a study cell of the row's kind; ``foreach``
times AdamW's unfused step beside the fused one. ``--profile`` prints torch.profiler's top
operators of each harness step at the precision, before the rounds. After the rounds, each row's
``phases`` (``benchmarks.speed.step_phases``) split its harness step into making the inputs, the
forward pass, the backward pass and the optimiser step: where a row below the target spends its time.
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
import time
from contextlib import contextmanager, nullcontext
from functools import partial
from pathlib import Path

import torch
from pytorch_lightning.plugins.precision import MixedPrecision
from torch.utils.data import BatchSampler, RandomSampler

from benchmarks.speed.levers import LEVERS, amortised, cell_minutes, compiled, first_pass_seconds, lever_error
from benchmarks.speed.model_flops import finetune_step_flops
from benchmarks.speed.pretrain_throughput import matmul_peak_gflops
from benchmarks.speed.rounds import (
    interleaved,
    load_average,
    machine,
    machine_line,
    peak_fraction,
    per_round,
    range_text,
    summarise,
    target_summary,
)
from benchmarks.speed.step_phases import phases_text, step_phases, train_step
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
FLOAT32, BF16 = "32-true", "bf16-mixed"
PEAK_DTYPES = {FLOAT32: torch.float32, BF16: torch.bfloat16}
BF16_PEAK = "bf16_matmul_peak_gflops_per_s"
ROUNDS = 5  # interleaved rounds of every variant of a row
PEAK_SECONDS = 1.0  # of each matmul peak, every round


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


def timed_steps(
    classifier: PairClassifier, batches, inputs, precision: str = FLOAT32, profile: bool = False, fused: bool = True
) -> float:
    """Seconds for training steps of ``classifier`` over ``batches`` (pair-index lists) at ``precision``;
    ``inputs`` makes a step's four input tensors and labels. The first batch is a warm-up. Each step
    is the training step of ``LitPairClassifier``: forward, loss, backward and its (fused) AdamW
    groups, without the fine-tuning schedule (it needs a Trainer); ``fused=False``: AdamW's
    multi-tensor (foreach) step instead."""
    optimizer, autocast = ready_to_train(classifier, precision, fused)
    start = None
    with profiled() if profile else nullcontext():
        for index, pair_indices in enumerate(batches):
            if index == 1:
                start = time.perf_counter()
            train_step(classifier, inputs(pair_indices), optimizer, autocast)
    return time.perf_counter() - start


def ready_to_train(classifier: PairClassifier, precision: str = FLOAT32, fused: bool = True):
    """``classifier`` in training mode (a frozen encoder frozen), its AdamW groups as
    ``LitPairClassifier`` makes them (fused, or multi-tensor with ``fused=False``) and the
    precision's autocast plugin (None for float32)."""
    optimizer = torch.optim.AdamW(
        classifier.optimizer_groups(LEARNING_RATE, LR_DECAY),
        lr=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        fused=fused,
        foreach=None if fused else True,
    )
    classifier.train()
    if classifier.finetune == "frozen":
        classifier.encoder.freeze()
    return optimizer, MixedPrecision(precision, "cpu") if precision != FLOAT32 else None


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


def measure_family(
    family: str,
    encoder: Encoder,
    batches: int,
    profile: bool,
    precision: str,
    rounds: int = ROUNDS,
    levers: tuple[str, ...] = (),
    peak_seconds: float = PEAK_SECONDS,
) -> list[dict]:
    """Every mode of one family; returns one row per mode, each from its own interleaved rounds."""
    rows = []
    modes = [("frozen", "pool-mlp"), *(("frozen", head) for head in CROSS_HEADS), ("full", "pool-mlp")]
    modes += [("full", "cls")] if encoder.spec.joint_pair_input else []
    cache_folder = tempfile.TemporaryDirectory()  # one feature cache: the frozen heads read the same features
    pool_mlp = None  # the frozen pool-mlp row's (model, batches, inputs): the cross heads' reference
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
        mode = finetune if head != "cls" else "cls"
        row = {
            "family": family,
            "mode": mode,
            "head": head,
            "precision": precision,
            "batch_size": BATCH_SIZE,
            "timed_batches": batches,
            "rounds": rounds,
            "setup_seconds": setup_seconds,
            "model_gflop_per_pair": flops / pairs / 1e9,
        }
        if kind == "features":

            def inputs(indices):
                return collate(indices)[:5]

        else:
            inputs = collate
        if profile:
            timed_steps(model, bucketed, inputs, precision, profile=True)
        variants = {"harness": partial(timed_steps, model, bucketed, inputs, precision)}
        if precision != FLOAT32:  # its float32 twin; in float32 the harness row is its own
            variants["fp32"] = partial(timed_steps, model, bucketed, inputs)
        naive = None  # the naive variant's (batches, inputs)
        if head in CROSS_HEADS:  # the same cached features and batches as the frozen pool-mlp row
            variants["pool-mlp"] = partial(timed_steps, *pool_mlp, precision)
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

            variants["recomputed"] = partial(timed_steps, model, bucketed, recomputed, precision)
            naive = unbucketed, lambda indices: recomputed(indices, longest)
            row["cache_sentences"] = len(data.sentences())
            pool_mlp = model, bucketed, inputs
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
                variants["eval"] = partial(timed_evaluation, model, bucketed, collate, precision)
                variants["eval two-pass"] = partial(two_pass_evaluation, model, bucketed, collate, precision)
        if naive:
            variants["naive"] = partial(timed_steps, model, *naive)
        if "foreach" in levers:
            variants["foreach"] = partial(timed_steps, model, bucketed, inputs, precision, fused=False)
        if "compile" in levers:
            compiled_model = compiled(model)
            variants["compiled"] = partial(timed_steps, compiled_model, bucketed, inputs, precision)
            compile_wall = first_pass_seconds(variants["compiled"])  # every shape compiled before the rounds
        for name in dict.fromkeys([FLOAT32, precision]):  # the peaks of the precisions the row runs in
            variants[f"peak {name}"] = partial(matmul_peak_gflops, PEAK_DTYPES[name], seconds=peak_seconds)
        row["load_average_before"] = load_average()
        seconds = interleaved(variants, rounds)
        row["load_average_after"] = load_average()
        row["phases"] = step_phases(model, bucketed, inputs, *ready_to_train(model, precision))
        figures = row_figures(seconds, precision, pairs, naive_pairs, flops, naive_flops)
        row.update(figures[0])
        row["spread"] = figures[1]
        row["epoch_seconds"] = len(train) / row["pairs_per_s"]
        row["fp32_epoch_seconds"] = len(train) / row["fp32_pairs_per_s"]
        if "compiled" in seconds:
            transfer = "full" if mode == "cls" else finetune
            minutes, priced_by = cell_minutes(family, transfer, head)
            step, lever_step = (statistics.median(seconds[name]) / batches for name in ("harness", "compiled"))
            overhead = compile_wall - (batches + 1) / batches * statistics.median(seconds["compiled"])
            row["compile"] = {**amortised(overhead, step, lever_step, minutes), "priced_by": priced_by}
        rows.append(row)
        print(
            f"  measured {family} {row['mode']} {head}: {row['pairs_per_s']:.0f} pairs/s ({precision}), "
            f"{row['fp32_pairs_per_s']:.0f} in float32, {rounds} rounds",
            file=sys.stderr,
            flush=True,
        )
    cache_folder.cleanup()
    return rows


def row_figures(
    seconds: dict[str, list[float]], precision: str, pairs: int, naive_pairs: int, flops: float, naive_flops: float
) -> tuple[dict[str, float], dict[str, dict]]:
    """A row's figures and ratios, each formed inside every round from that round's seconds (and
    that round's matmul peaks, under ``peak <precision>``), then summarised: (medians, spreads)."""
    peak = seconds[f"peak {precision}"]
    fp32_peak = seconds[f"peak {FLOAT32}"]
    fp32 = seconds.get("fp32", seconds["harness"])
    rate = partial(per_round, lambda s: pairs / s)
    share = partial(per_round, lambda s, p: peak_fraction(flops, s, p))
    figures = {
        "pairs_per_s": rate(seconds["harness"]),
        "peak_fraction": share(seconds["harness"], peak),
        "fp32_pairs_per_s": rate(fp32),
        "fp32_peak_fraction": share(fp32, fp32_peak),
        "over_fp32": per_round(operator.truediv, fp32, seconds["harness"]),
        "matmul_peak_gflops_per_s": fp32_peak,
    }
    if f"peak {BF16}" in seconds:
        figures["bf16_matmul_peak_gflops_per_s"] = seconds[f"peak {BF16}"]
    if "naive" in seconds:
        naive_rate = per_round(lambda s: naive_pairs / s, seconds["naive"])
        figures["naive_pairs_per_s"] = naive_rate
        figures["naive_peak_fraction"] = per_round(
            lambda s, p: peak_fraction(naive_flops, s, p), seconds["naive"], fp32_peak
        )
        figures["over_naive"] = per_round(operator.truediv, figures["pairs_per_s"], naive_rate)
        figures["fp32_over_naive"] = per_round(operator.truediv, figures["fp32_pairs_per_s"], naive_rate)
    if "recomputed" in seconds:
        figures["recomputed_pairs_per_s"] = rate(seconds["recomputed"])
        figures["cached_over_recomputed"] = per_round(operator.truediv, seconds["recomputed"], seconds["harness"])
    if "pool-mlp" in seconds:  # the epoch of this head over pool-mlp's, both at the precision
        figures["over_pool_mlp"] = per_round(operator.truediv, seconds["harness"], seconds["pool-mlp"])
    if "eval" in seconds:
        figures["eval_pairs_per_s"] = rate(seconds["eval"])
        figures["eval_two_pass_pairs_per_s"] = rate(seconds["eval two-pass"])
        figures["eval_over_two_pass"] = per_round(operator.truediv, seconds["eval two-pass"], seconds["eval"])
    for lever in ("compiled", "foreach"):
        if lever in seconds:
            figures[f"{lever}_pairs_per_s"] = rate(seconds[lever])
            figures[f"{lever}_peak_fraction"] = share(seconds[lever], peak)
            figures[f"{lever}_over_harness"] = per_round(operator.truediv, seconds["harness"], seconds[lever])
    return summarise(figures)


def two_pass_evaluation(classifier: PairClassifier, batches, inputs, precision: str = FLOAT32) -> float:
    """:func:`timed_evaluation` with one model pass per order (the ``cls`` evaluation's baseline)."""
    with one_pass_per_order(classifier.head):
        return timed_evaluation(classifier, batches, inputs, precision)


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
    """Each row's medians over rounds with their [min–max], the target's summary, the machine and load."""
    print(
        f"\n{'family':<7}{'mode':<7}{'head':<9}{'pairs/s':>16}{'% peak':>16}{'fp32 pairs/s':>16}{'% fp32 peak':>16}"
        f"{'naive':>14}{'× naive':>16}{'× fp32':>16}  versus"
    )
    for r in rows:
        spread = r["spread"]
        naive = (
            f"{' ' + range_text(spread['naive_pairs_per_s']):>14}"
            f"{' ' + range_text(spread['over_naive'], spec='.1f'):>16}"
            if "naive_pairs_per_s" in r
            else f"{'':>30}"
        )
        versus = []
        if "over_pool_mlp" in r:
            versus.append(f"{range_text(spread['over_pool_mlp'], spec='.1f')}× the pool-mlp epoch")
        if "cached_over_recomputed" in r:
            versus.append(f"cached {range_text(spread['cached_over_recomputed'], spec='.1f')}× recomputed")
        if "eval_over_two_pass" in r:
            versus.append(
                f"evaluation {r['eval_pairs_per_s']:.0f} pairs/s, "
                f"{range_text(spread['eval_over_two_pass'], spec='.2f')}× one pass per order"
            )
        for lever in ("compiled", "foreach"):
            if f"{lever}_over_harness" in r:
                versus.append(
                    f"{lever} {range_text(spread[f'{lever}_over_harness'], spec='.2f')}× as run "
                    f"({range_text(spread[f'{lever}_peak_fraction'], 100)}% peak)"
                )
        if "compile" in r:
            account = r["compile"]
            versus.append(
                f"compile {account['compile_seconds']:.0f} s over a {account['cell_minutes']:.1f}-min cell "
                f"({account['priced_by']}): {account['saved_seconds_per_cell']:+.0f} s a cell"
            )
        print(
            f"{r['family']:<7}{r['mode']:<7}{r['head']:<9}{' ' + range_text(spread['pairs_per_s']):>16}"
            f"{' ' + range_text(spread['peak_fraction'], 100):>16}{' ' + range_text(spread['fp32_pairs_per_s']):>16}"
            f"{' ' + range_text(spread['fp32_peak_fraction'], 100):>16}{naive}"
            f"{' ' + range_text(spread['over_fp32'], spec='.2f'):>16}  {'; '.join(versus)}"
        )
    fp32_peaks = [value for r in rows for value in r["spread"]["matmul_peak_gflops_per_s"]["rounds"]]
    bf16_peaks = [value for r in rows if BF16_PEAK in r for value in r["spread"][BF16_PEAK]["rounds"]]
    bf16_text = f", bfloat16 {min(bf16_peaks):.0f}–{max(bf16_peaks):.0f}" if bf16_peaks else ""
    print(
        f"batch {BATCH_SIZE} pairs, scalar mix (GPT's cls: its own head); pairs/s at {rows[0]['precision']}, "
        f"fp32 = the same path in float32, naive (float32) = no cache, random batches padded to the data set's "
        f"longest; % peak = model FLOP/s over the same round's matmul peak of the row's precision (float32 "
        f"{min(fp32_peaks):.0f}–{max(fp32_peaks):.0f} GFLOP/s{bf16_text})"
    )
    print("where a harness step's time goes (% of it; benchmarks.speed.step_phases):")
    for r in rows:
        print(f"  {r['family']} {r['mode']} {r['head']}: {phases_text(r['phases'])}")
    print(target_summary(rows, lambda r: f"{r['family']} {r['mode']} {r['head']}"))
    loads = [r["load_average_before"] for r in rows] + [r["load_average_after"] for r in rows]
    print(machine_line(machine(), loads[0], loads[-1], rows[0]["rounds"]))
    print(f"load average (1 min) over the rows: {min(v[0] for v in loads):.1f}–{max(v[0] for v in loads):.1f}")


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
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds of every row's variants")
    parser.add_argument(
        "--levers", nargs="*", choices=LEVERS, default=[], help="also time each row with these levers, interleaved"
    )
    parser.add_argument(
        "--peak-seconds", type=float, default=PEAK_SECONDS, help="of each matmul peak measurement, every round"
    )
    parser.add_argument("--profile", action="store_true", help="print each harness step's top operators")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1 or args.peak_seconds <= 0:
        parser.error("--batches and --rounds must be at least 1, --peak-seconds above 0")
    if lever_error(args.levers):
        print(f"error: {lever_error(args.levers)}", file=sys.stderr)
        return 2
    retain_freed_memory()
    sources = dict(item.split("=", 1) for item in args.encoder)
    rows = []
    for family in args.families:
        encoder = load_encoder(sources[family]) if family in sources else config_encoder(family)
        levers = tuple(args.levers)
        rows += measure_family(
            family, encoder, args.batches, args.profile, args.precision, args.rounds, levers, args.peak_seconds
        )
    print_table(rows)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
