"""The benchmark's accuracy figures: an axis that starts at a meaningful floor, the majority and
TF-IDF + LR baselines as lines, and titles that say how many seeds a point is."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from benchmarks.report import figures
from benchmarks.report.results_table import build_results
from benchmarks.report.study_table import FAILED_CONTROL_LABEL, study_figures, study_rows
from tests.benchmarks.test_report import CELLS, make_benchmark

ONE_SEED = [(*cell[:7], 1) for cell in CELLS]


@pytest.fixture
def drawn(monkeypatch):
    """The figures ``figures._save`` (and the study's) were given, by file name."""
    saved = {}

    def keep(figure, path):
        saved[path.name] = figure
        return path

    monkeypatch.setattr(figures, "_save", keep)
    monkeypatch.setattr("benchmarks.report.study_table._save", keep)
    return saved


def baseline(runs, method: str) -> float:
    return 100 * runs.loc[runs["method"] == method, "test_acc"].mean()


ONE = {"learning_curve.png": "(1 seed)", "accuracy_by_layer.png": "(1 seed)", "mix_weights.png": "(1 seed)"}
MANY = {
    "learning_curve.png": "(mean ± std over 3 seeds)",
    "accuracy_by_layer.png": "(mean ± std over 2–3 seeds)",
    "mix_weights.png": "(mean ± std over 3 seeds)",
}


@pytest.mark.parametrize("cells, seeds", [(ONE_SEED, ONE), (CELLS, MANY)])
def test_accuracy_axes_start_at_a_floor_with_the_baselines_drawn(drawn, tmp_path, cells, seeds):
    runs, _ = make_benchmark(cells)
    figures.write_figures(runs, tmp_path)
    majority, tfidf = baseline(runs, "majority"), baseline(runs, "tfidf-lr")
    for name in ("learning_curve.png", "accuracy_by_layer.png"):
        axes = drawn[name].axes[0]
        low, high = axes.get_ylim()
        assert low <= min(50, majority - figures.MARGIN) and low % 5 == 0 and high >= tfidf
        lines = {
            round(line.get_ydata()[0], 6)
            for line in axes.get_lines()
            if len(set(line.get_ydata())) == 1 and len(line.get_xdata()) == 2
        }
        assert {round(majority, 6), round(tfidf, 6)} <= lines
        legend = [text.get_text() for text in axes.get_legend().get_texts()]
        assert f"majority class ({majority:.1f})" in legend and f"TF-IDF + LR ({tfidf:.1f})" in legend
    assert {name: drawn[name].axes[0].get_title()[-len(text) :] for name, text in seeds.items()} == seeds


def test_no_baseline_lines_without_baseline_runs(drawn, tmp_path):
    runs, _ = make_benchmark([cell for cell in CELLS if cell[2] != "baseline"])
    figures.write_figures(runs, tmp_path)
    axes = drawn["learning_curve.png"].axes[0]
    assert not any(text.get_text().startswith(("majority", "TF-IDF")) for text in axes.get_legend().get_texts())
    assert axes.get_ylim()[0] <= figures.CHANCE["classes"]


def test_gap_figures_promise_no_ci_with_one_seed(drawn, tmp_path):
    cells = [(*cell[:4], fraction, *cell[5:]) for cell in ONE_SEED for fraction in (0.5, 1.0) if cell[4] == 1.0]
    cells = [
        (f"{cell[0]}@{cell[4]:g}", *cell[1:5], f"{cell[5]}@{cell[4]:g}" if cell[5] else "", *cell[6:]) for cell in cells
    ]
    runs, preds = make_benchmark(cells)
    runs = runs.assign(transfer="frozen", family="elmo")
    rows = study_rows(build_results(runs, preds), runs, [{"name": "elmo"}])
    study_figures(rows, tmp_path)
    title = drawn["gap_by_fraction.png"].axes[0].get_title()
    assert "1 seed: no CI" in title and "95% CI" not in title


def overlaps(first, second) -> bool:
    return first.x0 < second.x1 and second.x0 < first.x1 and first.y0 < second.y1 and second.y0 < first.y1


def assert_legends_off_the_data(figure) -> None:
    """Every legend of ``figure`` lies outside every one of its axes, as drawn."""
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.tight_layout()
    for axes in figure.axes:
        legend = axes.get_legend()
        assert legend is not None
        for other in figure.axes:
            assert not overlaps(legend.get_window_extent(renderer), other.get_window_extent(renderer))


def study_figure_rows(failed_methods: set[str]):
    cells = [(*cell[:4], fraction, *cell[5:]) for cell in CELLS for fraction in (0.5, 1.0) if cell[4] == 1.0]
    cells = [
        (f"{cell[0]}@{cell[4]:g}", *cell[1:5], f"{cell[5]}@{cell[4]:g}" if cell[5] else "", *cell[6:]) for cell in cells
    ]
    runs, preds = make_benchmark(cells)
    runs = runs.assign(transfer="frozen", family="elmo")
    rows = study_rows(build_results(runs, preds), runs, [{"name": "elmo"}])
    rows["control_ok"] = [method not in failed_methods for method in rows["method"]]
    return rows


def test_every_legend_is_off_the_data(drawn, tmp_path):
    runs, _ = make_benchmark(CELLS)
    figures.write_figures(runs, tmp_path)
    study_figures(study_figure_rows(set()), tmp_path)
    assert {"learning_curve.png", "accuracy_by_layer.png", "mix_weights.png", "gap_by_fraction.png"} <= set(drawn)
    for name, figure in drawn.items():
        assert_legends_off_the_data(figure), name


def test_the_gap_figure_marks_the_comparisons_whose_control_failed(drawn, tmp_path):
    tested = study_figure_rows(set())
    tested = tested[tested["gap"].notna()]
    failed = tested.iloc[0]
    study_figures(study_figure_rows({failed["method"]}), tmp_path)
    axes = drawn["gap_by_fraction.png"].axes[0]
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert FAILED_CONTROL_LABEL in legend
    (marks,) = [collection for collection in axes.collections if collection.get_label() == FAILED_CONTROL_LABEL]
    assert marks.get_offsets().tolist() == [[failed["fraction"], failed["gap"]]]
    study_figures(study_figure_rows(set()), tmp_path)  # every control passed: nothing marked
    legend = [text.get_text() for text in drawn["gap_by_fraction.png"].axes[0].get_legend().get_texts()]
    assert FAILED_CONTROL_LABEL not in legend
