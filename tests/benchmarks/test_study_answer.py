"""The published answer: read at its true precision and stated where a reader starts. Checked on the
committed reports: v3's headline CI (over pretraining runs) is never narrower than the checkpoints
one it generalises, and carries the between-run SD's upper bound and the registered test beside it;
docs/study.md, results/README.md and the report open with the answer generated from results.csv;
v2, one pretraining per encoder, says its gaps cannot generalise over pretraining runs."""

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.report.answer import BEGIN, END, answer_lines, rewrite_block
from benchmarks.stats.pretraining_runs import STATISTICS_VERSION

REPO = Path(__file__).resolve().parents[2]
V3 = REPO / "docs" / "study-report"
V2 = REPO / "results" / "families-budget" / "report"
SOURCE = "docs/study-report/results.csv"


def registered(folder: Path) -> pd.DataFrame:
    table = pd.read_csv(folder / "results.csv")
    return table[table["preregistered"].fillna(False).astype(bool)].set_index("method")


def test_every_registered_headline_ci_is_at_least_as_wide_as_its_checkpoints_ci():
    rows = registered(V3)
    assert len(rows) == 12 and (rows["gap_test"] == "runs x items").all()
    width = rows["gap_ci_high"] - rows["gap_ci_low"]
    fixed = rows["checkpoints_ci_high"] - rows["checkpoints_ci_low"]
    assert (width >= fixed - 1e-12).all(), (width - fixed)[width < fixed - 1e-12]


def test_the_between_run_sd_carries_its_upper_bound_and_the_registered_test_stays_beside_it():
    rows = registered(V3)
    assert (rows["between_run_sd_upper"] >= rows["between_run_sd"]).all()
    assert (rows["mde_at_sd_upper"] >= rows["mde_vs_random"]).all()
    sensitivity = ["registered_ci_low", "registered_ci_high", "registered_p", "registered_p_adjusted"]
    assert rows[sensitivity].notna().all().all()


@pytest.mark.parametrize("document", ["docs/study.md", "results/README.md"])
def test_the_documents_open_with_the_answer_from_the_committed_table(document):
    text = (REPO / document).read_text().splitlines()
    expected = answer_lines(pd.read_csv(REPO / SOURCE))
    assert text[1] == BEGIN.format(source=SOURCE) and text[2 + len(expected)] == END
    assert text[2 : 2 + len(expected)] == expected  # lines 3–8: the answer, as results.csv gives it
    assert 2 + len(expected) <= 8


def test_the_reports_first_screen_is_the_answer_under_a_header_naming_the_statistics():
    report = (V3 / "report.md").read_text()
    head = report.split("## Results", 1)[0]
    assert f"- statistics: {STATISTICS_VERSION}" in head
    assert "## The answer\n\n" + "\n".join(answer_lines(pd.read_csv(V3 / "results.csv"))) in head
    assert "only the encoder's weights differ" not in report
    assert "vary less than their seeds" not in report
    assert "The selection is not symmetric" in report


def test_v2_says_its_gaps_cannot_generalise_over_pretraining_runs():
    report = (V2 / "report.md").read_text()
    assert "cannot generalise over pretraining runs" in report.split("## Results", 1)[0]
    assert "Each encoder was pretrained once" in report


def test_the_answer_reads_each_number_from_the_table():
    table = pd.read_csv(V3 / "results.csv")
    lines = answer_lines(table)
    changed = table.copy()
    row = changed.index[changed["method"] == "gpt-reuters-frozen-attn"][0]
    changed.loc[row, "gap_vs_random"] += 0.01
    assert answer_lines(changed) != lines and "+5.2 points over its random-init twin" in "\n".join(
        answer_lines(changed)
    )


def test_rewriting_a_block_names_a_file_without_markers(tmp_path):
    document = tmp_path / "page.md"
    document.write_text("# Page\n")
    with pytest.raises(ValueError, match="page.md: no answer markers"):
        rewrite_block(document, ["- x"], SOURCE)
    document.write_text(f"# Page\n{BEGIN.format(source=SOURCE)}\nold\n{END}\nrest\n")
    assert rewrite_block(document, ["- x"], SOURCE)
    assert document.read_text() == f"# Page\n{BEGIN.format(source=SOURCE)}\n- x\n{END}\nrest\n"


def test_a_tfidf_gap_whose_ci_is_off_zero_is_a_lead_not_no_gap_detected():
    # GPT frozen attn is +2.4 over TF-IDF with a CI off 0 and Holm p 0.064: neither a finding nor "no gap"
    line = next(line for line in answer_lines(pd.read_csv(V3 / "results.csv")) if "Against TF-IDF" in line)
    rows = registered(V3)
    spans = ((rows["gap_vs_tfidf_ci_low"] <= 0) & (rows["gap_vs_tfidf_ci_high"] >= 0)).sum()
    assert "leads, not findings (CI off 0, Holm p ≥ 0.05): `gpt-reuters-frozen-attn` +2.4" in line
    assert line.endswith(f"no gap detected (CI spans 0) in {spans}.") and "for the rest" not in line
