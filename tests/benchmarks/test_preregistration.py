"""The pre-registered family (``comparisons:``): Holm over exactly those comparisons, checked
against statsmodels; every other gap exploratory; a registered comparison not yet run counts as
p = 1; the matrix refuses a name of no encoder; the study's answer says among how many."""

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from benchmarks.plan.matrix import parse_matrix
from benchmarks.report.study_table import PRETRAINED_RECIPE, study_remarks, study_tables
from benchmarks.stats.preregistration import adjust_registered, missing_note, registered_comparisons
from harness.errors import UserError

P_VALUES = {
    "elmo-frozen-attn": 0.004,
    "elmo-frozen-attn@0.1": 0.03,
    "gpt-full-cls": 0.02,
    "minilm-frozen-attn": 1e-6,
    "elmo-frozen-pool-mlp": 0.001,
}


def results() -> pd.DataFrame:
    return pd.DataFrame({"method": list(P_VALUES), "p_value_vs_random": list(P_VALUES.values())})


def test_holm_goes_over_exactly_the_registered_comparisons():
    registered = ("elmo-frozen-attn", "elmo-frozen-attn@0.1", "gpt-full-cls")
    table, family = adjust_registered(results(), registered)
    expected = multipletests([P_VALUES[name] for name in registered], method="holm")[1]
    adjusted = table.set_index("method")["p_adjusted"]
    np.testing.assert_allclose([adjusted[name] for name in registered], expected)
    # the positive control and an extra head are outside: exploratory, whatever their p
    assert adjusted[["minilm-frozen-attn", "elmo-frozen-pool-mlp"]].isna().all()
    assert table["preregistered"].tolist() == [True, True, True, False, False]
    assert family.size == 3 and family.missing == ()


def test_an_extra_exploratory_row_never_moves_a_registered_claim():
    registered = ("elmo-frozen-attn", "gpt-full-cls")
    before, _ = adjust_registered(results().iloc[:3], registered)
    after, _ = adjust_registered(results(), registered)
    pd.testing.assert_series_equal(before["p_adjusted"], after["p_adjusted"].iloc[:3])


def test_a_registered_comparison_not_yet_run_counts_as_p_one():
    registered = ("elmo-frozen-attn", "ulmfit-gradual-concat-pool", "gpt-full-cls")
    table, family = adjust_registered(results(), registered)
    expected = multipletests([0.004, 1.0, 0.02], method="holm")[1]
    adjusted = table.set_index("method")["p_adjusted"]
    assert adjusted["elmo-frozen-attn"] == pytest.approx(expected[0])
    assert adjusted["gpt-full-cls"] == pytest.approx(expected[2])
    assert family.missing == ("ulmfit-gradual-concat-pool",)
    (note,) = missing_note(family)
    assert note.startswith("1 of the 3 pre-registered comparisons has no tested gap yet (`ulmfit-gradual-concat-pool`)")


def test_without_a_registered_family_nothing_changes():
    table, family = adjust_registered(results(), ())
    assert family is None and table.equals(results())


def test_the_chunks_register_the_union_of_their_lists_in_order():
    assert registered_comparisons([{"comparisons": ["a-x", "b-y"]}, None, {"comparisons": ["b-y", "c-z"]}]) == (
        "a-x",
        "b-y",
        "c-z",
    )


def test_the_matrix_refuses_a_comparison_of_no_encoder_and_a_duplicate():
    matrix = {"encoders": [{"name": "elmo-reuters", "run": "runs:/abc"}]}
    assert parse_matrix({**matrix, "comparisons": ["elmo-reuters-frozen-attn"]}).comparisons == (
        "elmo-reuters-frozen-attn",
    )
    with pytest.raises(UserError, match="'gpt-reuters-full-cls' is no method of an encoder here"):
        parse_matrix({**matrix, "comparisons": ["gpt-reuters-full-cls"]})
    with pytest.raises(UserError, match="names a method twice"):
        parse_matrix({**matrix, "comparisons": ["elmo-reuters-frozen-attn", "elmo-reuters-frozen-attn"]})
    with pytest.raises(UserError, match="`comparisons` must be a list"):
        parse_matrix({**matrix, "comparisons": "elmo-reuters-frozen-attn"})


def study(registered: list[bool], recipe: str = "") -> pd.DataFrame:
    """Study rows: two ELMo gaps that hold and the positive control's larger one."""
    return pd.DataFrame(
        {
            "family": ["elmo", "elmo", "hf"],
            "encoder": ["e", "e", "m"],
            "corpus": ["r", "r", ""],
            "words": np.nan,
            "transfer": ["gradual", "frozen", "frozen"],
            "head": ["attn", "attn", "attn"],
            "fraction": [1.0, 0.1, 1.0],
            "method": ["e-gradual-attn", "e-frozen-attn@0.1", "m-frozen-attn"],
            "seeds": 5,
            "test_acc": 75.0,
            "test_f1": 82.0,
            "gap": [4.0, 6.0, 9.0],
            "low": [1.0, 2.0, 7.0],
            "high": [7.0, 10.0, 11.0],
            "mde": 3.0,
            "p": [0.01, 0.004, 1e-6],
            "p_adjusted": [0.02, 0.012 if registered[1] else np.nan, np.nan],
            "registered": registered,
            "recipe": [recipe, "", ""],
            "collapsed": "",
            "twin": ["r-gradual-attn", "r-frozen-attn@0.1", "rm"],
            "twin_collapsed": ["2/5", "", ""],
        }
    )


def test_the_study_answer_selects_among_the_registered_and_sets_the_control_apart():
    _, family = adjust_registered(
        pd.DataFrame({"method": ["e-gradual-attn", "e-frozen-attn@0.1"], "p_value_vs_random": [0.01, 0.004]}),
        ("e-gradual-attn", "e-frozen-attn@0.1", "g-full-cls"),
    )
    remarks = study_remarks(study([True, True, False]), family=family)
    assert remarks[0].startswith("elmo: pretraining pays most with `e-frozen-attn@0.1`")
    assert "among the family's 2 registered comparisons" in remarks[0]
    assert remarks[1].startswith("hf: outside the pre-registered comparisons (exploratory")
    assert remarks[-1].startswith("The study: pretraining pays most with `e-frozen-attn@0.1` (elmo, 10% of the labels)")
    assert remarks[-1].endswith(
        "the largest of the 2 gaps that hold among the 3 pre-registered comparisons, 1 of them not yet run."
    )
    # an exploratory ELMo row is never the answer, however large its gap
    remarks = study_remarks(study([True, False, False]), family=family)
    assert "pays most with `e-gradual-attn`" in remarks[0] and "`e-frozen-attn@0.1`" not in remarks[0]


def test_a_fine_tuned_gap_is_told_under_the_pretrained_arms_recipe_with_its_collapsed_twin():
    rows = study([True, True, False], recipe=PRETRAINED_RECIPE)
    rows.loc[1, "gap"] = 1.0  # the fine-tuned row is now the largest
    _, family = adjust_registered(
        pd.DataFrame({"method": ["e-gradual-attn"], "p_value_vs_random": [0.01]}),
        ("e-gradual-attn", "e-frozen-attn@0.1"),
    )
    remarks = study_remarks(rows, family=family)
    assert (
        "`e-gradual-attn`: +4.0 (+1.0, +7.0) p=0.01 p_adj=0.02 over its twin (under the pretrained arm's recipe; "
        "twin collapsed in 2/5 runs)"
    ) in remarks[0]
    text = "\n".join(study_tables(rows, family))
    assert "Fine-tuned rows (gradual) are measured under the pretrained arm's recipe" in text
    assert "Collapsed arms (runs predicting one class): `r-gradual-attn` 2/5." in text


def test_study_rows_read_the_recipe_from_the_runs_fine_tuning_and_the_chosen_rate():
    from benchmarks.report.study_table import study_rows

    runs = pd.DataFrame(
        {
            "method": ["e-frozen-attn", "e-gradual-attn", "e-full-cls", "r-gradual-attn"],
            "family": "elmo",
            "encoder": "e",
            "head": "attn",
            "train_fraction": 1.0,
            "transfer": ["frozen", "gradual", "full", "gradual"],
            "kind": ["pretrained", "pretrained", "pretrained", "random"],
            "finetune": ["frozen", "gradual", "full", "gradual"],
            "control": ["", "r-gradual-attn", "", ""],
        }
    )
    results = pd.DataFrame(
        {
            "method": ["e-frozen-attn", "e-gradual-attn", "e-full-cls", "r-gradual-attn"],
            "n_seeds": 5,
            "test_acc_mean": 0.7,
            "test_f1_mean": 0.8,
            "p_value_vs_random": 0.01,
            "collapsed_runs": [0, 0, 0, 3],
            "learning_rate": [np.nan, np.nan, 1e-3, np.nan],
        }
    )
    rows = study_rows(results, runs, [{"name": "e"}]).set_index("method")
    assert rows.loc["e-frozen-attn", "recipe"] == ""
    assert rows.loc["e-gradual-attn", "recipe"] == PRETRAINED_RECIPE
    assert rows.loc["e-gradual-attn", "twin_collapsed"] == "3/5"
    assert rows.loc["e-full-cls", "recipe"] == "each arm's rate from a grid, on dev"


def test_a_report_of_several_chunks_is_named_after_their_study():
    from benchmarks.results_files.folder_report import report_name

    chunks = [{"benchmark": "families-budget-elmo-frozen"}, {"benchmark": "families-budget-gpt-finetuned-10"}]
    assert report_name(chunks) == "families-budget (elmo-frozen + gpt-finetuned-10)"
    assert report_name([{"benchmark": "quick"}, {"benchmark": "frozen-heads"}]) == "quick + frozen-heads"
    assert report_name([{"benchmark": "quick"}, {"benchmark": "quick"}]) == "quick"


def test_every_remark_on_adjusted_p_names_the_registered_family_not_the_rows_present():
    from benchmarks.stats.multiplicity import chance_remark
    from benchmarks.stats.preregistration import family_text

    table, family = adjust_registered(results(), ("elmo-frozen-attn", "gpt-full-cls", "ulmfit-frozen-attn"))
    rows = table[table["preregistered"]]
    remark = chance_remark([0.01, 0.02], [0.05, 0.06], rows["p_adjusted"], adjustment=family_text(family))
    assert "after Holm over the 3 pre-registered comparisons" in remark and "2 comparisons" not in remark
    assert "2 of 2 CIs exclude 0" in remark and "2 of them stay below p = 0.05" in remark
    assert "Holm's adjustment for the 2 comparisons" in chance_remark([0.01, 0.02], [0.05, 0.06], [0.01, 0.02])
