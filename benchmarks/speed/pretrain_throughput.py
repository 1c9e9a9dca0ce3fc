"""Pretraining throughput of every family: real tokens/s and model FLOP/s, in float32 and under
bf16-mixed, against a padded baseline and the machine's matmul peaks, all measured in one run.

``python -m benchmarks.speed.pretrain_throughput [--json PATH] [--seconds S] [--rows NAME ...] [--profile STEPS]``

Rows (each in a fresh process, so its peak RSS is its own); every row has a twin named
``<row>-bf16`` that runs the same step under Lightning's ``bf16-mixed`` autocast (what
``--trainer.precision=bf16-mixed`` does), measured whether or not the CPU has native bf16
(``bf16_supported`` in each row says which):

- ``seed-padded-baseline``: the straightforward biLM at ``seed.yaml``: every batch padded to the
  data set's longest sentence, both directions run over the padding (the backward one reads the
  padded row reversed), full softmax and loss at every position.
- ``seed-full`` / ``seed-adaptive``: the harness's biLM step at ``seed.yaml`` (length-bucketed
  batches, trailing padding only, loss over real tokens) with the exact / adaptive softmax.
- ``default-*``: the same at the default config (``elmo.yaml``).
- ``<family>-cpu`` for every other registered family, at its ``Family.pretrain_config``:
  ``ulmfit-cpu`` (the AWD-LSTM, 256/768 × 3, tied, every dropout, AR/TAR), ``gpt-cpu`` (the
  transformer, 4 × 256, byte-level BPE 8k, tied softmax).

Model FLOPs count the useful matmul work on real tokens only (``benchmarks.speed.model_flops``). The
matmul peaks are a ``torch.mm`` of up to 2048² (smaller where one product would take over a
second or two, as emulated bf16 does) in float32 and in bfloat16, in the row's own process, taken
before and after its timed training (the mean is reported): the machine is shared, so a row's
FLOP/s are compared with the peak measured under the same load, and the load average is recorded.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import multiprocessing
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import torch
from pytorch_lightning.plugins.precision import MixedPrecision

from benchmarks.speed.model_flops import step_flops
from harness.cli.precision import cpu_bf16_supported
from harness.cli.runtime import retain_freed_memory
from harness.entry_point import run_main
from harness.errors import UserError
from harness.unique_keys import load_yaml
from pretrain.cli import DEFAULT_FAMILY
from pretrain.corpus.datamodule import CorpusDataModule
from pretrain.families import FAMILIES, Family, family_of, family_of_config, pretrained_families
from pretrain.models.bilm import BiLM

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "pretrain"
# name, config, softmax (biLM rows), padded baseline: the biLM's softmax and padding study
BILM_ROWS = [
    ("seed-padded-baseline", "seed", "full", True),
    ("seed-full", "seed", "full", False),
    ("seed-adaptive", "seed", "adaptive", False),
    ("default-full", "elmo", "full", False),
    ("default-adaptive", "elmo", "adaptive", False),
]
BASELINE = "seed-padded-baseline"


def plan_rows() -> list[tuple[str, str, str | None, bool]]:
    """The biLM rows, then ``<family>-cpu`` at each other family's own config."""
    measured = {config for _, config, _, _ in BILM_ROWS}
    return BILM_ROWS + [(f"{name}-cpu", name, None, False) for name in pretrained_families() if name not in measured]


def matmul_peak_gflops(
    dtype: torch.dtype = torch.float32, size: int = 2048, seconds: float = 2.0, smallest: int = 256
) -> float:
    """Best ``torch.mm`` rate of two n² matrices of ``dtype`` over repeats for about ``seconds``, in
    GFLOP/s, n the largest power-of-two step from ``smallest`` up to ``size`` whose one product is
    expected within ``seconds`` (8× the step below): on a CPU that only emulates bf16 (about 1.5
    GFLOP/s, 12 s a 2048² product) the measurement stays as short as on any other machine."""
    n = smallest
    while True:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        start = time.perf_counter()
        a @ b  # a warm-up, timed to choose the size
        if n >= size or 8 * (time.perf_counter() - start) > seconds:
            break
        n *= 2
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or best == 0.0:
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e9)
    return best


def padded_baseline_loss(model: BiLM, token_ids: torch.Tensor) -> torch.Tensor:
    """The straightforward biLM step: run over every position, padding included."""
    embedded = model.embedding(token_ids)  # (B, T, H)
    forward_top = model.forward_stack(embedded)[-1]  # (B, T, H)
    backward_top = model.backward_stack(embedded.flip(1))[-1].flip(1)  # (B, T, H): padding read first
    hidden = torch.cat([forward_top[:, :-1], backward_top[:, 1:]])  # (2B, T-1, H)
    targets = torch.cat([token_ids[:, 1:], token_ids[:, :-1]])  # (2B, T-1)
    logits = model.softmax(model.output_dropout(hidden))  # (2B, T-1, V)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def harness_loss(model: torch.nn.Module, token_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The training loss of ``LitLanguageModel.training_step``: mean NLL over directions and real
    tokens, plus the model's regularisation (AWD-LSTM's AR/TAR)."""
    sums = model(token_ids, lengths)
    loss = model.objective.mean_nll(sums)
    return loss + sums["regularization"] if "regularization" in sums else loss


def build(row: dict) -> tuple[Family, torch.nn.Module, CorpusDataModule, dict, dict]:
    """The row's family, model, data and optimiser/trainer settings, from its config file."""
    path = family_of(row["config"]).pretrain_config if row["config"] in FAMILIES else CONFIGS / f"{row['config']}.yaml"
    config = load_yaml(path)
    family, arguments = family_of_config(config, DEFAULT_FAMILY)
    if row["softmax"]:
        arguments["softmax"] = row["softmax"]
        if row["softmax"] == "adaptive":
            arguments["tie_weights"] = False  # the adaptive softmax has no single output matrix to tie
    data_args = dict(config.get("data", {}))
    data = CorpusDataModule(**{**data_args, "bucket": not row["padded"]})
    model = family.build(family.config_from(arguments, data.vocab_size))
    optimisation = {
        "learning_rate": arguments.get("learning_rate", 2e-3),
        "weight_decay": arguments.get("weight_decay", 0.01),
        "clip": (config.get("trainer") or {}).get("gradient_clip_val"),
    }
    return family, model, data, optimisation, {**data_args, **arguments}


def measure(row: dict) -> dict:
    """Train for ``row['seconds']`` at the row's config and precision; returns the row's measurements."""
    retain_freed_memory()  # as the CLIs do, for every row alike
    torch.manual_seed(0)
    family, model, data, optimisation, settings = build(row)
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=optimisation["learning_rate"], weight_decay=optimisation["weight_decay"], fused=True
    )
    autocast = MixedPrecision("bf16-mixed", "cpu") if row["precision"] == "bf16-mixed" else None
    load_before = os.getloadavg()[0]
    peaks_before = matmul_peak_gflops(torch.float32), matmul_peak_gflops(torch.bfloat16)
    max_length = max(len(ids) for ids in data.train_ids)

    def step(token_ids, lengths):
        with autocast.forward_context() if autocast else nullcontext():
            if row["padded"]:
                token_ids = torch.nn.functional.pad(token_ids, (0, max_length - token_ids.shape[1]))  # (B, T_max)
                loss = padded_baseline_loss(model, token_ids)
            else:
                loss = harness_loss(model, token_ids, lengths)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if optimisation["clip"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), optimisation["clip"])
        optimizer.step()
        return token_ids.numel()

    real = computed = 0
    flops = 0.0
    batches = iter(data.train_dataloader())
    for _ in range(3):  # warm-up
        step(*next(batches))
    start = time.perf_counter()
    while time.perf_counter() - start < row["seconds"]:
        try:
            token_ids, lengths = next(batches)
        except StopIteration:
            batches = iter(data.train_dataloader())
            continue
        computed += step(token_ids, lengths)
        real += int(lengths.sum())
        flops += step_flops(family, model, token_ids, lengths)
    seconds = time.perf_counter() - start
    peaks_after = matmul_peak_gflops(torch.float32), matmul_peak_gflops(torch.bfloat16)
    profile = profile_steps(step, data, row["profile"]) if row.get("profile") else None
    tied = bool(settings["tie_weights"]) if "tie_weights" in settings else tied_output(model, data.vocab_size)
    return {
        "name": row["name"],
        "family": family.name,
        "precision": row["precision"],
        "softmax": row["softmax"] or ("full, tied" if tied else "full"),
        "batch_size": settings.get("batch_size", 16),
        "tie_weights": tied,
        "hidden_size": getattr(model, "hidden_size", None),
        "num_layers": model.num_layers,
        "vocab_size": data.vocab_size,
        "real_tokens_per_s": real / seconds,
        "padded_fraction": 1 - real / computed,
        "model_gflops_per_s": flops / seconds / 1e9,
        "matmul_peak_gflops_per_s": (peaks_before[0] + peaks_after[0]) / 2,
        "bf16_matmul_peak_gflops_per_s": (peaks_before[1] + peaks_after[1]) / 2,
        "matmul_peaks_before_after": [list(peaks_before), list(peaks_after)],
        "bf16_supported": cpu_bf16_supported(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
        "threads": torch.get_num_threads(),
        "load_average": [load_before, os.getloadavg()[0]],
        **({"profile": profile} if profile else {}),
    }


def tied_output(model: torch.nn.Module, vocab_size: int) -> bool:
    """Whether the output layer is the input embedding: one (V, ·) matrix among the parameters."""
    return sum(1 for p in model.parameters() if p.dim() == 2 and p.shape[0] == vocab_size) == 1


def profile_steps(step, data: CorpusDataModule, steps: int) -> str:
    """torch.profiler's table of the top operators (self CPU time) over ``steps`` training steps."""
    from torch.profiler import ProfilerActivity, profile

    batches = iter(data.train_dataloader())
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step(*next(batches))
    return profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)


def rows(seconds: float, names: list[str] | None = None, profile: int = 0) -> list[dict]:
    """The plan, each row followed by its bf16 twin; ``names`` keeps only those rows."""
    plan = [
        {
            "name": name + suffix,
            "config": config,
            "softmax": softmax,
            "padded": padded,
            "seconds": seconds,
            "precision": precision,
            "profile": profile,
        }
        for name, config, softmax, padded in plan_rows()
        for suffix, precision in (("", "32-true"), ("-bf16", "bf16-mixed"))
    ]
    return [row for row in plan if not names or row["name"] in names]


def is_bilm_row(name: str) -> bool:
    return name.removesuffix("-bf16") in {row for row, _, _, _ in BILM_ROWS}


def print_table(results: list[dict]) -> None:
    by_name = {r["name"]: r for r in results}
    baseline = by_name.get(BASELINE, {}).get("real_tokens_per_s")
    print(
        f"\n{'row':<26}{'softmax':<11}{'batch':>6}{'tokens/s':>10}{'× base':>8}{'× fp32':>8}{'pad %':>7}"
        f"{'GFLOP/s':>9}{'% fp32 pk':>10}{'% bf16 pk':>10}{'RSS MB':>8}{'load':>6}"
    )
    for r in results:
        fp32_twin = by_name.get(r["name"].removesuffix("-bf16")) if r["precision"] == "bf16-mixed" else None
        times_base = f"{r['real_tokens_per_s'] / baseline:8.2f}" if baseline and is_bilm_row(r["name"]) else f"{'—':>8}"
        times_fp32 = f"{r['real_tokens_per_s'] / fp32_twin['real_tokens_per_s']:8.2f}" if fp32_twin else f"{'':>8}"
        bf16_peak = (
            f"{100 * r['model_gflops_per_s'] / r['bf16_matmul_peak_gflops_per_s']:10.1f}"
            if r["precision"] == "bf16-mixed"
            else f"{'':>10}"
        )
        print(
            f"{r['name']:<26}{r['softmax']:<11}{r['batch_size']:>6}{r['real_tokens_per_s']:>10.0f}{times_base}"
            f"{times_fp32}{100 * r['padded_fraction']:>7.1f}{r['model_gflops_per_s']:>9.1f}"
            f"{100 * r['model_gflops_per_s'] / r['matmul_peak_gflops_per_s']:>10.1f}{bf16_peak}"
            f"{r['peak_rss_mb']:>8.0f}{r['load_average'][0]:>6.1f}"
        )
    fp32_peaks = [r["matmul_peak_gflops_per_s"] for r in results]
    bf16_peaks = [r["bf16_matmul_peak_gflops_per_s"] for r in results]
    print(
        f"matmul peaks (torch.mm up to 2048², each row's own process, before/after its timing): float32 "
        f"{min(fp32_peaks):.0f}–{max(fp32_peaks):.0f} GFLOP/s, bfloat16 {min(bf16_peaks):.0f}–{max(bf16_peaks):.0f}; "
        f"native bf16 on this CPU: {'yes' if results[0]['bf16_supported'] else 'no (bf16 rows are emulated)'}; "
        f"threads {results[0]['threads']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the rows as a JSON list here")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed training per row")
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="only these rows (default: all; names above)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="STEPS",
        help="after its timing, profile each row for STEPS steps and print its top operators",
    )
    args = parser.parse_args(argv)
    plan = rows(args.seconds, args.rows, args.profile)
    if not plan:
        print(f"error: --rows: no such row; choose from {', '.join(r['name'] for r in rows(0))}", file=sys.stderr)
        return 2
    results = []
    context = multiprocessing.get_context("spawn")
    for row in plan:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                results.append(pool.submit(measure, row).result())
            except UserError as error:  # e.g. no MRPC files and no network
                print(f"error: {error}", file=sys.stderr)
                return 2
        print(f"  measured {row['name']}: {results[-1]['real_tokens_per_s']:.0f} real tokens/s", file=sys.stderr)
        if "profile" in results[-1]:
            print(f"\n{row['name']}: top operators over {args.profile} steps\n{results[-1].pop('profile')}")
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"rows written to {args.json}")
    return 0


if __name__ == "__main__":
    run_main(main)
