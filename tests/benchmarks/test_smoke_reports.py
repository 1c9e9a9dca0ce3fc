"""A smoke matrix (``smoke: true``, the quick benchmarks) says on the first line of its report and
of its console summary that its numbers test the pipeline, not transfer."""

from pathlib import Path

import pytest
import yaml

from benchmarks.plan.matrix import load_config
from benchmarks.report.console_summary import print_summary
from benchmarks.report.outputs import SMOKE_NOTE, write_outputs
from harness.errors import UserError
from tests.benchmarks.test_report import CONTEXT

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "benchmarks"


@pytest.fixture(scope="module")
def benchmark():
    from benchmarks.report.results_table import build_results
    from tests.benchmarks.test_report import make_benchmark

    runs, preds = make_benchmark()
    return runs, build_results(runs, preds)


@pytest.mark.parametrize("smoke", [True, False])
def test_the_reports_first_line_says_smoke_test(benchmark, tmp_path, smoke):
    runs, results = benchmark
    write_outputs(tmp_path, results, runs, {**CONTEXT, "smoke": smoke})
    first = (tmp_path / "report.md").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# Benchmark report: unit") and (SMOKE_NOTE in first) == smoke


@pytest.mark.parametrize("smoke", [True, False])
def test_the_summarys_first_line_says_smoke_test(benchmark, tmp_path, capsys, smoke):
    _, results = benchmark
    print_summary(results, {"name": "quick", "experiment": "mrpc", "smoke": smoke}, "parent1", tmp_path, 60.0)
    first = next(line for line in capsys.readouterr().out.splitlines() if line.strip())
    assert "benchmark 'quick'" in first and (SMOKE_NOTE in first) == smoke


def test_the_quick_matrices_are_smoke_tests_and_the_studies_are_not(tmp_path):
    smoke = {path.stem: yaml.safe_load(path.read_text()).get("smoke", False) for path in CONFIGS.glob("*.yaml")}
    assert smoke.pop("quick") is True and smoke.pop("families-quick") is True
    assert smoke.pop("calibration") is True  # a tiny GPT: it times cells, its numbers say nothing of transfer
    assert smoke.pop("study-cells") is True  # a twentieth of the study's pretraining: it times the study's cells
    assert not any(smoke.values()), smoke
    load_config(CONFIGS / "quick.yaml")  # the key is known
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("name: wrong\nsmoke: yes please\nencoders: [{name: elmo, run: latest}]\n")
    with pytest.raises(UserError, match=r"wrong.yaml: `smoke` must be true or false"):
        load_config(wrong)
