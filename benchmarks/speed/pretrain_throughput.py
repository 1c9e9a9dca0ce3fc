"""Pretraining throughput of every family: real tokens/s and model FLOP/s, in float32 and under
bf16-mixed, against a padded baseline and the machine's matmul peaks, all measured in one run.

``python -m benchmarks.speed.pretrain_throughput [--json PATH] [--batches 20] [--rounds 5]
[--peak-seconds 1] [--rows NAME ...] [--profile STEPS]``

Rows; where the CPU computes bf16 natively (``bf16_supported`` in each row), every row has a twin
named ``<row>-bf16`` that runs the same step under Lightning's ``bf16-mixed`` autocast (what
``--trainer.precision=bf16-mixed`` does); elsewhere the CLIs refuse bf16, and torch has no bf16
LSTM kernel to emulate it with, so there are no bf16 rows:

- ``seed-padded-baseline``: the straightforward biLM at ``seed.yaml``: every batch padded to the
  data set's longest sentence, both directions run over the padding (the backward one reads the
  padded row reversed), full softmax and loss at every position.
- ``seed-full`` / ``seed-adaptive``: the harness's biLM step at ``seed.yaml`` (length-bucketed
  batches, trailing padding only, loss over real tokens) with the exact / adaptive softmax.
- ``default-*``: the same at the default config (``elmo.yaml``).
- ``<family>-cpu`` for every other registered family, at its ``Family.pretrain_config``:
  ``ulmfit-cpu`` (the AWD-LSTM, 256/768 × 3, tied, every dropout, AR/TAR), ``gpt-cpu`` (the
  transformer, 4 × 256, byte-level BPE 8k, tied softmax).

The rows of one model (a row and its bf16 twin; the padded baseline with ``seed-full``, the same
model on unbucketed batches) form a group, measured in its own process (its peak RSS is its own):
one model and fused AdamW, fixed batches (the first a warm-up), and its rows and the matmul peaks of
float32 and of the rows' other precision (a ``torch.mm`` of up to 2048², smaller where one product would take over a
second or two, as emulated bf16 does) run interleaved in ``--rounds`` rounds
(``benchmarks.speed.rounds``). Every figure and ratio (``over_fp32`` of a twin, ``over_baseline``
over the padded baseline at the same precision, ``peak_fraction`` over the same round's peak of the
row's precision) is formed inside a round, then reported as its median (the row's keys) and its
spread (``spread``); the load average is recorded before and after each group's rounds. Model
FLOPs count the useful matmul work on real tokens only (``benchmarks.speed.model_flops``).
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import json
import multiprocessing
import operator
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from functools import partial
from itertools import islice
from pathlib import Path

import torch
from pytorch_lightning.plugins.precision import MixedPrecision

from benchmarks.speed.levers import LEVERS, compiled, first_pass_seconds, lever_error
from benchmarks.speed.model_flops import step_flops
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
from benchmarks.speed.step_phases import phases_text, timed_phases
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
FLOAT32, BF16 = "32-true", "bf16-mixed"
PEAK_DTYPES = {FLOAT32: torch.float32, BF16: torch.bfloat16}
BF16_PEAK = "bf16_matmul_peak_gflops_per_s"
BATCHES, ROUNDS, PEAK_SECONDS = 20, 5, 1.0  # timed batches of a row per round, rounds, seconds of a peak


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
    return family, model, data, optimisation, {**data_args, **arguments, "data_args": data_args}


def plan(
    batches: int,
    rounds: int,
    names: list[str] | None = None,
    profile: int = 0,
    peak_seconds: float = PEAK_SECONDS,
    bf16: bool | None = None,
    levers: tuple[str, ...] = (),
) -> list[dict]:
    """The groups of rows measured together in one process, interleaved: rows of one config and
    softmax (the padded baseline beside ``seed-full``), each row followed by its bf16 twin where
    ``bf16`` (default: where the CPU computes bf16 natively; elsewhere torch has no bf16 LSTM
    kernel and the CLIs refuse bf16); ``names`` keeps only those rows (empty groups are dropped)."""
    precisions = (
        (("", FLOAT32), ("-bf16", BF16)) if (cpu_bf16_supported() if bf16 is None else bf16) else (("", FLOAT32),)
    )
    groups: dict[tuple[str, str | None], dict] = {}
    for name, config, softmax, padded in plan_rows():
        group = groups.setdefault(
            (config, softmax),
            {
                "config": config,
                "softmax": softmax,
                "padded": False,
                "batches": batches,
                "rounds": rounds,
                "profile": profile,
                "peak_seconds": peak_seconds,
                "levers": levers,
                "rows": [],
            },
        )
        for suffix, precision in precisions:
            if not names or name + suffix in names:
                group["rows"].append({"name": name + suffix, "padded": padded, "precision": precision})
    return [group for group in groups.values() if group["rows"]]


def fixed_batches(data: CorpusDataModule, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first ``count`` batches of ``data``'s training loader (cycled if it has fewer)."""
    batches = []
    while len(batches) < count:
        more = list(islice(iter(data.train_dataloader()), count - len(batches)))
        if not more:
            raise UserError("the pretraining corpus has no training batch")
        batches += more
    return batches


def measure(group: dict) -> list[dict]:
    """Time the group's rows in interleaved rounds on fixed batches, in one process; one result per row."""
    retain_freed_memory()  # as the CLIs do, for every row alike
    torch.manual_seed(0)
    family, model, data, optimisation, settings = build(group)
    model.train()
    optimizers = {  # the harness's fused AdamW; the foreach lever's multi-tensor one
        fused: torch.optim.AdamW(
            model.parameters(),
            lr=optimisation["learning_rate"],
            weight_decay=optimisation["weight_decay"],
            fused=fused,
            foreach=None if fused else True,
        )
        for fused in (True, False)
    }
    networks = {None: model, "foreach": model}
    if "compile" in group["levers"]:
        networks["compile"] = compiled(model)
    loaders = {False: data}  # bucketed, as the harness trains; unbucketed for the padded baseline
    if any(row["padded"] for row in group["rows"]):
        loaders[True] = CorpusDataModule(**{**settings["data_args"], "bucket": False})
    # the timed rounds' fixed batches, the first a warm-up
    batches = {padded: fixed_batches(loader, group["batches"] + 1) for padded, loader in loaders.items()}
    max_length = max(len(ids) for ids in data.train_ids)

    def step(token_ids, lengths, padded: bool, precision: str, lever: str | None = None):
        autocast = MixedPrecision(BF16, "cpu") if precision == BF16 else None
        with autocast.forward_context() if autocast else nullcontext():
            if padded:
                token_ids = torch.nn.functional.pad(token_ids, (0, max_length - token_ids.shape[1]))  # (B, T_max)
                loss = padded_baseline_loss(model, token_ids)
            else:
                loss = harness_loss(networks[lever], token_ids, lengths)
        forward = time.perf_counter()
        optimizer = optimizers[lever != "foreach"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        backward = time.perf_counter()
        if optimisation["clip"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), optimisation["clip"])
        optimizer.step()
        return [forward, backward, time.perf_counter()]

    def timed(padded: bool, precision: str, lever: str | None = None) -> float:
        """Seconds of the training steps over the fixed batches but the warm-up."""
        step(*batches[padded][0], padded, precision, lever)
        start = time.perf_counter()
        for token_ids, lengths in batches[padded][1:]:
            step(token_ids, lengths, padded, precision, lever)
        return time.perf_counter() - start

    work = {  # over the timed batches: (real tokens, computed tokens, useful FLOPs)
        padded: (
            sum(int(lengths.sum()) for _, lengths in timed_batches[1:]),
            sum(len(ids) * (max_length if padded else ids.shape[1]) for ids, _ in timed_batches[1:]),
            sum(step_flops(family, model, ids, lengths) for ids, lengths in timed_batches[1:]),
        )
        for padded, timed_batches in batches.items()
    }
    variants = {row["name"]: partial(timed, row["padded"], row["precision"]) for row in group["rows"]}
    compile_walls = {}  # row → wall seconds of its compiled step's first pass, compilation included
    for row in group["rows"]:
        for lever in group["levers"] if not row["padded"] else ():  # the padded baseline is no harness step
            variants[f"{row['name']} {lever}"] = partial(timed, False, row["precision"], lever)
            if lever == "compile":
                compile_walls[row["name"]] = first_pass_seconds(variants[f"{row['name']} {lever}"])
    for precision in dict.fromkeys([FLOAT32, *(row["precision"] for row in group["rows"])]):  # the peaks needed
        dtype = PEAK_DTYPES[precision]
        variants[f"peak {precision}"] = partial(matmul_peak_gflops, dtype, seconds=group["peak_seconds"])
    load_before = load_average()
    seconds = interleaved(variants, group["rounds"])
    load_after = load_average()
    tied = bool(settings["tie_weights"]) if "tie_weights" in settings else tied_output(model, data.vocab_size)
    results = []
    for row in group["rows"]:
        real, computed, _ = work[row["padded"]]
        medians, spreads = row_figures(seconds, row, work, group["rows"])
        if row["name"] in compile_walls:
            lever_seconds = statistics.median(seconds[f"{row['name']} compile"])
            overhead = compile_walls[row["name"]] - (group["batches"] + 1) / group["batches"] * lever_seconds
            saved = (statistics.median(seconds[row["name"]]) - lever_seconds) / group["batches"]  # a step
            medians["compile"] = {
                "compile_seconds": overhead,
                "break_even_steps": overhead / saved if saved > 0 else None,
            }
        phases = step_phases(
            loaders[row["padded"]], group["batches"], partial(step, padded=row["padded"], precision=row["precision"])
        )
        profile = (
            profile_steps(partial(step, padded=row["padded"], precision=row["precision"]), data, group["profile"])
            if group["profile"]
            else None
        )
        results.append(
            {
                "name": row["name"],
                "family": family.name,
                "precision": row["precision"],
                "softmax": group["softmax"] or ("full, tied" if tied else "full"),
                "batch_size": settings.get("batch_size", 16),
                "tie_weights": tied,
                "hidden_size": getattr(model, "hidden_size", None),
                "num_layers": model.num_layers,
                "vocab_size": data.vocab_size,
                **medians,
                "spread": spreads,
                "phases": phases,
                "padded_fraction": 1 - real / computed,
                "timed_batches": group["batches"],
                "rounds": group["rounds"],
                "bf16_supported": cpu_bf16_supported(),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "threads": torch.get_num_threads(),
                "machine": machine(),
                "load_average": [load_before[0], load_after[0]],
                "load_average_before_after": [load_before, load_after],
                **({"profile": profile} if profile else {}),
            }
        )
    return results


def step_phases(data: CorpusDataModule, batches: int, step) -> dict[str, float]:
    """A row's step split into its phases over ``batches`` steps (after a warm-up), its inputs
    the next batch of the row's own training loader, as a run makes them."""

    def loader_batches():  # cycled, as fixed_batches does for a loader of fewer batches
        while True:
            yield from data.train_dataloader()

    loader = loader_batches()
    return timed_phases(range(batches + 1), lambda _: next(loader), step)


def row_figures(
    seconds: dict[str, list[float]], row: dict, work: dict, rows: list[dict]
) -> tuple[dict[str, float], dict[str, dict]]:
    """One row's figures, each formed inside every round (against that round's peaks, twin and
    padded baseline), then summarised: (medians, spreads)."""
    own = seconds[row["name"]]
    real, _, flops = work[row["padded"]]
    fp32_peak = seconds[f"peak {FLOAT32}"]
    figures = {
        "real_tokens_per_s": per_round(lambda s: real / s, own),
        "model_gflops_per_s": per_round(lambda s: flops / s / 1e9, own),
        "peak_fraction": per_round(lambda s, p: peak_fraction(flops, s, p), own, seconds[f"peak {row['precision']}"]),
        "fp32_peak_fraction": per_round(lambda s, p: peak_fraction(flops, s, p), own, fp32_peak),
        "matmul_peak_gflops_per_s": fp32_peak,
    }
    if f"peak {BF16}" in seconds:
        figures["bf16_matmul_peak_gflops_per_s"] = seconds[f"peak {BF16}"]
    twin = row["name"].removesuffix("-bf16")
    if row["precision"] == BF16 and twin in seconds:  # the same batches: the ratio of seconds
        figures["over_fp32"] = per_round(operator.truediv, seconds[twin], own)
    for lever in LEVERS:
        if f"{row['name']} {lever}" in seconds:
            lever_seconds = seconds[f"{row['name']} {lever}"]
            figures[f"{lever}_over_harness"] = per_round(operator.truediv, own, lever_seconds)
            figures[f"{lever}_peak_fraction"] = per_round(
                lambda s, p: peak_fraction(flops, s, p), lever_seconds, seconds[f"peak {row['precision']}"]
            )
    baseline = BASELINE + ("-bf16" if row["precision"] == BF16 else "")
    if not row["padded"] and any(other["name"] == baseline for other in rows):
        baseline_real = work[True][0]
        figures["over_baseline"] = per_round(lambda s, b: (real / s) / (baseline_real / b), own, seconds[baseline])
    return summarise(figures)


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


def print_table(results: list[dict]) -> None:
    """Each row's medians over rounds with their [min–max], the target's summary, the machine and load."""
    print(
        f"\n{'row':<26}{'softmax':<11}{'batch':>6}{'tokens/s':>20}{'× base':>18}{'× fp32':>18}{'pad %':>7}"
        f"{'GFLOP/s':>9}{'% own peak':>18}{'RSS MB':>8}"
    )
    for r in results:
        spread = r["spread"]
        times_base = range_text(spread["over_baseline"], spec=".2f") if "over_baseline" in r else "—"
        times_fp32 = range_text(spread["over_fp32"], spec=".2f") if "over_fp32" in r else ""
        print(
            f"{r['name']:<26}{r['softmax']:<11}{r['batch_size']:>6}{' ' + range_text(spread['real_tokens_per_s']):>20}"
            f"{' ' + times_base:>18}{' ' + times_fp32:>18}"
            f"{100 * r['padded_fraction']:>7.1f}{r['model_gflops_per_s']:>9.1f}"
            f"{' ' + range_text(spread['peak_fraction'], 100, '.1f'):>18}{r['peak_rss_mb']:>8.0f}"
        )
        for lever in LEVERS:
            if f"{lever}_over_harness" in r:
                account = r.get("compile") if lever == "compile" else None
                paid = (
                    f", compile {account['compile_seconds']:.0f} s, paid back after "
                    + (f"{account['break_even_steps']:.0f} steps" if account["break_even_steps"] else "never")
                    if account
                    else ""
                )
                print(
                    f"{'':<4}{lever}: {range_text(spread[f'{lever}_over_harness'], spec='.2f')}× as run, "
                    f"{range_text(spread[f'{lever}_peak_fraction'], 100, '.1f')}% of the peak{paid}"
                )
    fp32_peaks = [value for r in results for value in r["spread"]["matmul_peak_gflops_per_s"]["rounds"]]
    bf16_peaks = [
        value for r in results if "bf16_matmul_peak_gflops_per_s" in r for value in r["spread"][BF16_PEAK]["rounds"]
    ]
    bf16_text = f", bfloat16 {min(bf16_peaks):.0f}–{max(bf16_peaks):.0f}" if bf16_peaks else ""
    print(
        f"% own peak: model FLOP/s over the same round's matmul peak of the row's precision (torch.mm up to "
        f"2048², each group's own process): float32 {min(fp32_peaks):.0f}–{max(fp32_peaks):.0f} GFLOP/s{bf16_text}; "
        f"× base: real tokens/s over the padded baseline's at the same precision, same rounds; native bf16 on "
        f"this CPU: {'yes' if results[0]['bf16_supported'] else 'no (no bf16 rows)'}"
    )
    print("where a step's time goes (% of it; benchmarks.speed.step_phases):")
    for r in results:
        print(f"  {r['name']}: {phases_text(r['phases'])}")
    print(target_summary([r for r in results if r["name"].removesuffix("-bf16") != BASELINE], lambda r: r["name"]))
    loads = [pair for r in results for pair in r["load_average_before_after"]]
    print(machine_line(results[0]["machine"], loads[0], loads[-1], results[0]["rounds"]))
    print(f"load average (1 min) over the groups: {min(v[0] for v in loads):.1f}–{max(v[0] for v in loads):.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the rows as a JSON list here")
    parser.add_argument("--batches", type=int, default=BATCHES, help="training batches timed per row and round")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds of every group's rows")
    parser.add_argument(
        "--peak-seconds", type=float, default=PEAK_SECONDS, help="of each matmul peak measurement, every round"
    )
    parser.add_argument(
        "--levers", nargs="*", choices=LEVERS, default=[], help="also time each harness row with these, interleaved"
    )
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="only these rows (default: all; names above)")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="STEPS",
        help="after its rounds, profile each row for STEPS steps and print its top operators",
    )
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1 or args.peak_seconds <= 0:
        parser.error("--batches and --rounds must be at least 1, --peak-seconds above 0")
    if lever_error(args.levers):
        print(f"error: {lever_error(args.levers)}", file=sys.stderr)
        return 2
    groups = plan(args.batches, args.rounds, args.rows, args.profile, args.peak_seconds, levers=tuple(args.levers))
    if not groups:
        names = [row["name"] for group in plan(1, 1) for row in group["rows"]]
        print(f"error: --rows: no such row; choose from {', '.join(names)}", file=sys.stderr)
        return 2
    results = []
    context = multiprocessing.get_context("spawn")
    for group in groups:
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                measured = pool.submit(measure, group).result()
            except UserError as error:  # e.g. no MRPC files and no network
                print(f"error: {error}", file=sys.stderr)
                return 2
        for result in measured:
            print(f"  measured {result['name']}: {result['real_tokens_per_s']:.0f} real tokens/s", file=sys.stderr)
            if "profile" in result:
                print(f"\n{result['name']}: top operators over {args.profile} steps\n{result.pop('profile')}")
        results += measured
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"rows written to {args.json}")
    return 0


if __name__ == "__main__":
    run_main(main)
