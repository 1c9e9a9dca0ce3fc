"""``make bench-finetune``'s rows: the harness path at the default precision beside the same path
in float32 and the float32 naive baseline, each with its fraction of the matmul peak."""

import json

import pytest

from benchmarks.speed import finetune_throughput
from benchmarks.speed.step_phases import PHASES


@pytest.mark.parametrize("native", [True, False])
def test_the_default_precision_is_bf16_where_the_cpu_has_it(monkeypatch, native):
    monkeypatch.setattr(finetune_throughput, "cpu_bf16_supported", lambda: native)
    assert finetune_throughput.default_precision() == ("bf16-mixed" if native else "32-true")


@pytest.mark.slow
def test_rows_carry_their_precision_the_float32_path_the_naive_baseline_and_peak_fractions(
    monkeypatch, mrpc_dir, tmp_path
):
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    monkeypatch.setattr(finetune_throughput, "CROSS_HEADS", ("attn",))
    monkeypatch.setattr(finetune_throughput, "BATCH_SIZE", 8)
    output = tmp_path / "speed.json"
    argv = ["--families", "elmo", "--batches", "2", "--rounds", "2", "--peak-seconds", "0.05", "--json", str(output)]
    assert finetune_throughput.main([*argv, "--levers", "foreach"]) == 0
    rows = json.loads(output.read_text())
    assert [(row["mode"], row["head"]) for row in rows] == [
        ("frozen", "pool-mlp"),
        ("frozen", "attn"),
        ("full", "pool-mlp"),
    ]
    for row in rows:
        assert row["precision"] == finetune_throughput.default_precision()
        assert row["pairs_per_s"] > 0 and row["fp32_pairs_per_s"] > 0 and row["model_gflop_per_pair"] > 0
        assert 0 < row["peak_fraction"] and 0 < row["fp32_peak_fraction"]
        assert row["matmul_peak_gflops_per_s"] > 0
        assert (row.get("bf16_matmul_peak_gflops_per_s", 0) > 0) == (row["precision"] == "bf16-mixed")
        assert len(row["load_average_before"]) == len(row["load_average_after"]) == 3
        assert sum(row["phases"][phase] for phase in PHASES) == pytest.approx(1) and row["phases"]["step_ms"] > 0
        spread = row["spread"]
        for name in ("pairs_per_s", "peak_fraction", "over_fp32", "foreach_over_harness"):
            assert len(spread[name]["rounds"]) == 2 and spread[name]["min"] <= row[name] <= spread[name]["max"]
        # a share of the peak: each round's FLOP/s over that round's peak of the row's precision
        peak = spread[
            "bf16_matmul_peak_gflops_per_s" if row["precision"] == "bf16-mixed" else "matmul_peak_gflops_per_s"
        ]
        flops = row["model_gflop_per_pair"] * 1e9 * spread["pairs_per_s"]["rounds"][0]
        assert spread["peak_fraction"]["rounds"][0] == pytest.approx(flops / (peak["rounds"][0] * 1e9))
    pool_mlp, attn, full = rows
    for row in (pool_mlp, full):
        rounds = [
            a / b for a, b in zip(row["spread"]["pairs_per_s"]["rounds"], row["spread"]["naive_pairs_per_s"]["rounds"])
        ]
        assert row["spread"]["over_naive"]["rounds"] == pytest.approx(rounds)
        assert 0 < row["naive_peak_fraction"]
    assert attn["over_pool_mlp"] > 0 and len(attn["spread"]["over_pool_mlp"]["rounds"]) == 2
    assert attn["model_gflop_per_pair"] > 10 * pool_mlp["model_gflop_per_pair"]  # its BiLSTM, beside pool-mlp's MLP
