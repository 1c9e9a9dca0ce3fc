"""``make bench-throughput``'s groups: the rows of one model measured together, interleaved in
rounds with the matmul peaks, each figure and ratio formed inside a round."""

import pytest

from benchmarks.speed import pretrain_throughput
from benchmarks.speed.step_phases import PHASES


def test_the_padded_baseline_is_grouped_with_seed_full_and_every_row_with_its_bf16_twin():
    groups = pretrain_throughput.plan(batches=3, rounds=2, bf16=True)
    names = [[row["name"] for row in group["rows"]] for group in groups]
    assert names[0] == ["seed-padded-baseline", "seed-padded-baseline-bf16", "seed-full", "seed-full-bf16"]
    assert ["gpt-cpu", "gpt-cpu-bf16"] in names
    assert all(len(group) == 2 for group in names[1:])
    only = pretrain_throughput.plan(3, 2, ["seed-full-bf16", "gpt-cpu"], bf16=True)
    assert [[row["name"] for row in group["rows"]] for group in only] == [["seed-full-bf16"], ["gpt-cpu"]]
    assert pretrain_throughput.plan(3, 2, ["no-such-row"]) == []
    without = pretrain_throughput.plan(3, 2, bf16=False)  # a CPU without native bf16: no twins
    assert not any(row["name"].endswith("-bf16") for group in without for row in group["rows"])
    assert [row["name"] for row in without[0]["rows"]] == ["seed-padded-baseline", "seed-full"]


@pytest.mark.slow
def test_a_group_is_measured_in_interleaved_rounds(monkeypatch, mrpc_dir, capsys):
    monkeypatch.setenv("MRPC_DIR", str(mrpc_dir))
    rows = ["seed-padded-baseline", "seed-full"]
    group = pretrain_throughput.plan(2, 2, rows, 0, 0.05, bf16=False, levers=("foreach",))[0]
    results = pretrain_throughput.measure(group)
    assert [r["name"] for r in results] == ["seed-padded-baseline", "seed-full"]
    baseline, full = results
    for row in results:
        assert row["real_tokens_per_s"] > 0 and 0 < row["peak_fraction"]
        assert len(row["spread"]["real_tokens_per_s"]["rounds"]) == 2
        assert len(row["load_average_before_after"][0]) == 3 and row["machine"]["cores"] >= 1
        peaks = row["spread"]["matmul_peak_gflops_per_s"]["rounds"]  # float32: its own precision's peak
        shares = [g / p for g, p in zip(row["spread"]["model_gflops_per_s"]["rounds"], peaks)]
        assert row["spread"]["peak_fraction"]["rounds"] == pytest.approx(shares)
    assert baseline["padded_fraction"] > full["padded_fraction"]
    for row in results:  # each step split into its phases, on its own loader's batches
        assert sum(row["phases"][phase] for phase in PHASES) == pytest.approx(1) and row["phases"]["step_ms"] > 0
        assert row["phases"]["forward"] > 0 and row["phases"]["backward"] > 0 and row["phases"]["optimizer"] > 0
    full_rate, baseline_rate = (row["spread"]["real_tokens_per_s"]["rounds"] for row in (full, baseline))
    assert full["spread"]["over_baseline"]["rounds"] == pytest.approx([a / b for a, b in zip(full_rate, baseline_rate)])
    assert "over_baseline" not in baseline
    assert len(full["spread"]["foreach_over_harness"]["rounds"]) == 2 and "foreach_over_harness" not in baseline
    pretrain_throughput.print_table(results)
    printed = capsys.readouterr().out
    assert "interleaved rounds" in printed and "load average" in printed and "target ≥ 50%" in printed
    assert "foreach:" in printed
    assert "where a step's time goes" in printed and "  seed-full: inputs " in printed
