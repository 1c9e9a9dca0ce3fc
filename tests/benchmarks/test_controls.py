"""The pre-registered control rule: a comparison whose twin (or pretrained arm) predicted one class,
or sits within 1 point of the majority rate, is shown and named but never counted as holding."""

import numpy as np
import pandas as pd

from benchmarks.report.control_rule import failed_note
from benchmarks.report.outputs import write_outputs
from benchmarks.report.recipe_section import recipe_section
from benchmarks.report.results_table import build_results
from benchmarks.report.study_table import study_remarks
from benchmarks.stats.controls import control_check, control_failed, failed_arms, majority_rate
from benchmarks.stats.preregistration import Family
from tests.benchmarks.test_report import CONTEXT, make_benchmark

ITEMS = 300
LABELS = (np.arange(ITEMS) % 3 != 0).astype(int)  # majority rate 2/3


def predictions(accuracy: float, seed: int, collapsed: bool = False) -> pd.DataFrame:
    """Test predictions right on about ``accuracy`` of the items (all positive when ``collapsed``)."""
    rng = np.random.default_rng(seed)
    pred = np.ones(ITEMS, int) if collapsed else np.where(rng.random(ITEMS) < accuracy, LABELS, 1 - LABELS)
    return pd.DataFrame({"id1": np.arange(ITEMS), "id2": np.arange(ITEMS), "label": LABELS, "prob": 0.5, "pred": pred})


def arm(accuracy: float, collapsed_seeds=()) -> dict:
    return {seed: predictions(accuracy, seed + int(100 * accuracy), seed in collapsed_seeds) for seed in range(3)}


def test_the_majority_rate_is_the_most_frequent_test_label():
    assert majority_rate(predictions(0.8, 0)) == 2 / 3


def test_both_arms_learned_passes():
    assert control_check("m", arm(0.85), "twin", arm(0.78)) == (True, "")


def test_a_twin_that_collapsed_in_one_run_fails_and_is_named():
    ok, reason = control_check("m", arm(0.85), "twin", arm(0.80, collapsed_seeds=(1,)))
    assert not ok and reason.startswith("`twin`: one class in 1/3 runs")
    assert "`m`" not in reason  # the arm that learned is not blamed


def test_an_arm_within_1_point_of_the_majority_rate_fails_even_without_collapse():
    twin = {seed: predictions(1.0, seed) for seed in range(3)}
    for frame in twin.values():  # right on 67.3% of the items: 0.7 points above the majority rate
        wrong = np.arange(ITEMS) < 98
        frame["pred"] = np.where(wrong, 1 - frame["label"], frame["label"])
    ok, reason = control_check("m", arm(0.85), "twin", twin)
    assert not ok and "mean test acc 67.3% ≤ majority 66.7% + 1 point" in reason and "one class" not in reason


def test_a_pretrained_arm_that_collapsed_fails_too():
    ok, reason = control_check("m", arm(0.85, collapsed_seeds=(0,)), "twin", arm(0.78))
    assert not ok and reason.startswith("`m`: one class in 1/3 runs")


def test_control_failed_reads_bools_csv_text_and_missing_values():
    assert control_failed(False) and control_failed(np.False_) and control_failed("False")
    assert not any(control_failed(value) for value in (True, "True", None, np.nan))


def test_results_carry_control_ok_and_the_reason():
    runs, preds = make_benchmark()
    results = build_results(runs, preds).set_index("method")
    # elmo-layer:1-pool-mlp collapsed in its seed 1
    assert results.loc["elmo-layer:1-pool-mlp", "control_ok"] is False
    assert results.loc["elmo-layer:1-pool-mlp", "control_reason"] == "`elmo-layer:1-pool-mlp`: one class in 1/2 runs"
    assert results.loc["elmo-average-pool-mlp", "control_ok"] is True
    assert pd.isna(results.loc["elmo-average-pool-mlp", "control_reason"])
    assert pd.isna(results.loc["random-scalar-pool-mlp", "control_ok"])  # a twin has no comparison of its own
    assert pd.isna(results.loc["tfidf-lr", "control_ok"])


def test_the_report_shows_the_control_column_and_names_failed_comparisons(tmp_path):
    runs, preds = make_benchmark()
    write_outputs(tmp_path, build_results(runs, preds), runs, CONTEXT)
    report = (tmp_path / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| method |"))
    assert "| gap vs random (95% CI) | control | p |" in header
    row = next(line for line in report.splitlines() if line.startswith("| `elmo-layer:1-pool-mlp` |"))
    assert "| ✗ failed |" in row
    assert "| ok |" in next(line for line in report.splitlines() if line.startswith("| `elmo-scalar-pool-mlp` |"))
    (remark,) = [line for line in report.splitlines() if line.startswith("- `elmo-layer:1-pool-mlp` against")]
    assert "**control failed**" in remark and "shown, not counted" in remark and "beats" not in remark
    (rule,) = [line for line in report.splitlines() if line.startswith("- Control rule (pre-registered")]
    assert "1 of 6 twin comparisons failed it (`elmo-layer:1-pool-mlp`)" in rule
    assert "A control that fails does not count" in report.split("## How to read")[1]


def test_the_study_note_names_each_failed_comparison_once_and_then_its_arms():
    rows = pd.DataFrame(
        {
            "method": ["m", "n", "o"],
            "control_ok": [False, False, True],
            "control_reason": ["`m`: one class in 1/3 runs; `random-m`: one class in 2/3 runs", "`random-n`: mean", ""],
        }
    )
    (note, _) = failed_note(rows)
    assert note.endswith(". `m`: one class in 1/3 runs; `random-m`: one class in 2/3 runs; `n` — `random-n`: mean.")


STUDY = [
    "family",
    "encoder",
    "corpus",
    "words",
    "transfer",
    "head",
    "fraction",
    "method",
    "seeds",
    "test_acc",
    "test_f1",
    "gap",
    "low",
    "high",
    "mde",
    "p",
    "p_adjusted",
    "registered",
    "control_ok",
    "control_reason",
]


def study(*cells) -> pd.DataFrame:
    """Registered study rows of family ``ulmfit`` from ``(method, gap, low, high, p_adjusted, control_ok)``."""
    return pd.DataFrame(
        [
            [
                "ulmfit",
                "u",
                "mrpc",
                1e5,
                transfer,
                "attn",
                1.0,
                method,
                5,
                70.0,
                80.0,
                gap,
                low,
                high,
                3.0,
                p_adjusted / 10,
                p_adjusted,
                True,
                ok,
                "" if ok else "`twin`: one class in 4/5 runs",
            ]
            for transfer, (method, gap, low, high, p_adjusted, ok) in zip(("gradual", "frozen", "full"), cells)
        ],
        columns=STUDY,
    )


def test_a_gap_over_a_twin_that_did_not_learn_is_never_the_one_that_holds():
    rows = study(("ulmfit-gradual", 4.6, 2.6, 6.6, 0.0003, False), ("ulmfit-frozen", 2.0, 0.5, 3.5, 0.04, True))
    family = Family(("ulmfit-gradual", "ulmfit-frozen", "elmo-x"), ())
    remarks = study_remarks(rows, family=family)
    assert remarks[0].startswith("ulmfit: pretraining pays most with `ulmfit-frozen`: +2.0")
    assert "Not counted, control failed: `ulmfit-gradual` +4.6" in remarks[0]
    (answer,) = [remark for remark in remarks if remark.startswith("The study:")]
    assert "pays most with `ulmfit-frozen`" in answer
    assert (
        "the only gap that holds whose arms both learned among the 3 pre-registered comparisons; 1 of them "
        "failed the control rule and are not counted" in answer
    )


def test_with_every_significant_gap_failed_nothing_holds_and_the_headline_says_why():
    rows = study(("ulmfit-gradual", 4.6, 2.6, 6.6, 0.0003, False), ("ulmfit-frozen", -1.0, -3.0, 0.5, 0.9, True))
    remarks = study_remarks(rows, family=Family(("ulmfit-gradual", "ulmfit-frozen"), ()))
    assert remarks[0].startswith("ulmfit: no gap over the twin holds among the comparisons whose arms both learned")
    assert "pays most" not in " ".join(remarks)
    (answer,) = [remark for remark in remarks if remark.startswith("The study:")]
    assert answer.startswith(
        "The study: no pre-registered gap over the twin holds (p_adjusted < 0.05) whose arms both learned"
    )
    assert "`ulmfit-gradual` +4.6" in answer


def test_a_gap_that_holds_says_both_arms_learned_only_where_the_rule_was_checked():
    rows = study(("ulmfit-gradual", 4.6, 2.6, 6.6, 0.0003, True))
    assert "; both arms learned) among" in study_remarks(rows)[0]
    assert "both arms learned" not in study_remarks(rows.drop(columns=["control_ok", "control_reason"]))[0]


def test_failed_arms_reads_back_each_arm_a_reason_names():
    _, reason = control_check("random(e)-m@0.1", arm(0.6, collapsed_seeds=(0,)), "twin", arm(0.62))
    arms = failed_arms(reason)
    assert list(arms) == ["random(e)-m@0.1", "twin"]
    assert arms["random(e)-m@0.1"].startswith("one class in 1/3 runs, mean test acc")
    assert failed_arms("") == {} and failed_arms(np.nan) == {}


def test_the_recipe_section_says_why_an_arm_failed_after_its_own_selection():
    """No grid point above the majority baseline on dev (+1 point): the grid held no learning recipe;
    a pick that learned on its selection seed: it did not carry over to the final seeds."""
    recipes = pd.DataFrame(
        {
            "method": ["m@0.1"] * 2 + ["twin@0.1"] * 2 + ["ok"],
            "folder": ["sel"] * 5,
            "head": ["cls"] * 5,
            "learning_rate": [1e-4, 2e-4, 1e-4, 2e-4, 1e-4],
            "n_seeds": [1] * 5,
            "dev_acc_mean": [0.66, 0.69, 0.72, 0.70, 0.8],
            "chosen": [False, True, True, False, True],
        }
    )
    results = pd.DataFrame(
        {
            "method": ["m@0.1", "twin@0.1", "ok", "majority"],
            "dev_acc_mean": [0.67, 0.68, 0.8, 0.684],
            "control_ok": [False, np.nan, True, np.nan],
            "control_reason": ["`m@0.1`: mean test acc 65.0% ≤ majority 66.5% + 1 point; `twin@0.1`: x", "", "", ""],
        }
    )
    lines = [line for line in recipe_section(recipes, results) if line.startswith("- ")]
    assert lines == [
        "- `m@0.1` (mean test acc 65.0% ≤ majority 66.5% + 1 point): no point of its grid learned on dev (the "
        "best, 69.0%, against the majority baseline's 68.4%), so its cells ran at a recipe that had not learned "
        "either.",
        "- `twin@0.1` (x): its pick learned on dev on the selection's one seed (72.0%, the majority baseline "
        "68.4%) but not on the final seeds.",
    ]
    assert not [line for line in recipe_section(recipes) if line.startswith("- ")]  # no results: no account
