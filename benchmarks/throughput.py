"""Pretraining throughput: real tokens/s and model FLOP/s, against a padded baseline and the
machine's matmul peak, all measured in one run.

``python -m benchmarks.throughput [--json PATH] [--seconds S] [--ppl-epochs N]``

Rows (each in a fresh process, so its peak RSS is its own):
- ``seed-padded-baseline``: the straightforward implementation at ``seed.yaml``: every batch
  padded to the data set's longest sentence, both directions run over the padding (the backward
  one reads the padded row reversed), full softmax and loss at every position.
- ``seed-full`` / ``seed-adaptive``: the harness's training step at ``seed.yaml`` (length-bucketed
  batches, trailing padding only, loss over real tokens) with the exact / adaptive softmax.
- ``default-*``: the same at the default config (``elmo.yaml``).

Model FLOPs count the useful work only: the matmuls of the LSTMs and the softmax on real tokens,
×3 for forward + backward. Padding is never credited, so the baseline's wasted work shows up as a
lower FLOP/s. The matmul peak is a float32 2048×2048 ``torch.mm`` in the same process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import yaml

from pretrain.models.bilm import BiLM, padding_mask
from pretrain.corpus import BiLMDataModule
from harness.runtime import retain_freed_memory

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "pretrain"


def matmul_peak_gflops(size: int = 2048, seconds: float = 2.0) -> float:
    """Best sustained float32 ``torch.mm`` rate over a few repeats, in GFLOP/s."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        a @ b
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * size**3 / (time.perf_counter() - start) / 1e9)
    return best


def lstm_flops_per_token(model: BiLM) -> float:
    """Forward FLOPs of one token through both directions' LSTM stacks."""
    total = 0
    for stack in (model.forward_stack, model.backward_stack):
        for lstm in stack.layers:
            cell, output = lstm.hidden_size, lstm.proj_size or lstm.hidden_size
            total += 2 * 4 * cell * (lstm.input_size + output) + (2 * cell * output if lstm.proj_size else 0)
    return total


def softmax_flops(model: BiLM, targets: torch.Tensor) -> float:
    """Forward FLOPs of the softmax for the given (N,) targets."""
    hidden = model.hidden_size
    if model.softmax_kind == "full":
        return 2 * hidden * model.softmax.out_features * targets.numel()
    adaptive = model.softmax
    flops = 2 * hidden * adaptive.head_size * targets.numel()
    for index, projection in enumerate(adaptive.tail):
        low, high = adaptive.cutoffs[index], adaptive.cutoffs[index + 1]
        members = int(((targets >= low) & (targets < high)).sum())
        project, out = projection[0], projection[1]
        flops += 2 * members * (project.in_features * project.out_features + out.in_features * out.out_features)
    return flops


def padded_baseline_loss(model: BiLM, token_ids: torch.Tensor) -> torch.Tensor:
    """The straightforward biLM step: run over every position, padding included."""
    embedded = model.embedding(token_ids)  # (B, T, H)
    forward_top = model.forward_stack(embedded)[-1]  # (B, T, H)
    backward_top = model.backward_stack(embedded.flip(1))[-1].flip(1)  # (B, T, H): padding read first
    hidden = torch.cat([forward_top[:, :-1], backward_top[:, 1:]])  # (2B, T-1, H)
    targets = torch.cat([token_ids[:, 1:], token_ids[:, :-1]])  # (2B, T-1)
    logits = model.softmax(model.output_dropout(hidden))  # (2B, T-1, V)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def config_of(name: str) -> dict:
    return yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())


def measure(row: dict) -> dict:
    """Train for ``row['seconds']`` at the row's config; returns the row's measurements."""
    retain_freed_memory()  # as the CLIs do, for every row alike
    torch.manual_seed(0)
    config = config_of(row["config"])
    model_args, data_args = dict(config.get("model", {})), dict(config.get("data", {}))
    model_args["softmax"] = row["softmax"]
    if row["softmax"] == "adaptive":
        model_args["tie_weights"] = False  # the adaptive softmax has no single output matrix to tie
    data = BiLMDataModule(**{**data_args, "bucket": not row["padded"]})
    bilm_keys = ("hidden_size", "cell_size", "num_layers", "dropout", "softmax", "adaptive_cutoffs", "tie_weights")
    model = BiLM(data.vocab_size, **{k: model_args[k] for k in bilm_keys if k in model_args})
    optimizer = torch.optim.AdamW(model.parameters(), lr=model_args.get("learning_rate", 2e-3), fused=True)
    peak = matmul_peak_gflops()
    max_length = max(len(ids) for ids in data.train_ids)
    lstm_flops = lstm_flops_per_token(model)

    def step(token_ids, lengths):
        if row["padded"]:
            token_ids = torch.nn.functional.pad(token_ids, (0, max_length - token_ids.shape[1]))  # (B, T_max)
            loss = padded_baseline_loss(model, token_ids)
        else:
            sums = model(token_ids, lengths)
            loss = (sums["nll_forward"] + sums["nll_backward"]) / (2 * sums["count"])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
        mask = padding_mask(lengths, token_ids.shape[1])
        predicts_next = mask[:, :-1] & mask[:, 1:]  # (B, T-1)
        targets = torch.cat([token_ids[:, 1:][predicts_next], token_ids[:, :-1][predicts_next]])
        flops += 3 * (lstm_flops * int(lengths.sum()) + softmax_flops(model, targets))
    seconds = time.perf_counter() - start
    return {
        "name": row["name"],
        "softmax": row["softmax"],
        "batch_size": data_args.get("batch_size", 16),
        "tie_weights": bool(model_args.get("tie_weights", False)),
        "hidden_size": model.hidden_size,
        "num_layers": model.num_layers,
        "vocab_size": data.vocab_size,
        "real_tokens_per_s": real / seconds,
        "padded_fraction": 1 - real / computed,
        "model_gflops_per_s": flops / seconds / 1e9,
        "matmul_peak_gflops_per_s": peak,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": seconds,
    }


def rows(seconds: float) -> list[dict]:
    plan = [("seed-padded-baseline", "seed", "full", True), ("seed-full", "seed", "full", False),
            ("seed-adaptive", "seed", "adaptive", False), ("default-full", "elmo", "full", False),
            ("default-adaptive", "elmo", "adaptive", False)]
    return [{"name": n, "config": c, "softmax": s, "padded": p, "seconds": seconds} for n, c, s, p in plan]


def print_table(results: list[dict]) -> None:
    baseline = next(r for r in results if r["name"] == "seed-padded-baseline")["real_tokens_per_s"]
    print(f"\n{'row':<22}{'softmax':<10}{'batch':>6}{'tokens/s':>11}{'× base':>8}{'pad %':>7}"
          f"{'GFLOP/s':>9}{'% peak':>8}{'RSS MB':>8}")
    for r in results:
        print(f"{r['name']:<22}{r['softmax']:<10}{r['batch_size']:>6}{r['real_tokens_per_s']:>11.0f}"
              f"{r['real_tokens_per_s'] / baseline:>8.2f}{100 * r['padded_fraction']:>7.1f}"
              f"{r['model_gflops_per_s']:>9.1f}{100 * r['model_gflops_per_s'] / r['matmul_peak_gflops_per_s']:>8.1f}"
              f"{r['peak_rss_mb']:>8.0f}")
    print(f"matmul peak (float32 2048² torch.mm, same process): "
          f"{results[0]['matmul_peak_gflops_per_s']:.0f} GFLOP/s; threads {torch.get_num_threads()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the rows as a JSON list here")
    parser.add_argument("--seconds", type=float, default=25.0, help="timed training per row")
    args = parser.parse_args(argv)
    results = []
    context = multiprocessing.get_context("spawn")
    for row in rows(args.seconds):
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            results.append(pool.submit(measure, row).result())
        print(f"  measured {row['name']}: {results[-1]['real_tokens_per_s']:.0f} real tokens/s", file=sys.stderr)
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"rows written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
