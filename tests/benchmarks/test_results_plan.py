"""Folders checked against the study's registered plan (``benchmarks.results_files.plan_check``): a
seed dropped from one arm and the folder sealed again, a whole chunk dropped, an added folder or an
added cell are each one line, never a table with fewer or more pairs; a study that genuinely lost a
cell reports with ``--incomplete``, each comparison it touches marked."""

import shutil

import pandas as pd

from benchmarks.__main__ import main
from benchmarks.results_files.folder import CELLS_DIR
from tests.benchmarks.test_results_across_folders import cell_path
from tests.benchmarks.test_results_files import make_folder, tiny_config
from tests.benchmarks.test_results_folder_checks import unseal


def report(tmp_path, folders, configs, *flags) -> int:
    arguments = ["report", *map(str, folders), "--out", str(tmp_path / "report"), "--registered", *map(str, configs)]
    return main([*arguments, *flags])


def refusal(capsys) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ")
    return line


def drop_cell(folder, kind: str, seed: int) -> None:
    """The cell removed with its predictions, and the folder sealed again, as a forger would."""
    path = cell_path(folder, kind, seed)
    (folder / CELLS_DIR / path.name.replace(".json", ".predictions.csv.gz")).unlink()
    path.unlink()
    unseal(folder)
    assert main(["seal", str(folder)]) == 0


def test_folders_that_hold_their_plan_report_and_deterministic_baselines_are_exempt(tmp_path):
    folder = make_folder(tmp_path / "tiny")  # no majority baseline, which the config plans
    assert report(tmp_path, [folder], [tiny_config(tmp_path / "tiny.yaml")]) == 0
    assert "planned_cells_missing" not in pd.read_csv(tmp_path / "report" / "results.csv")


def test_a_seed_dropped_from_one_arm_and_sealed_again_is_refused_or_marked_incomplete(tmp_path, capsys):
    folder = make_folder(tmp_path / "tiny")
    drop_cell(folder, "random", 2)
    config = tiny_config(tmp_path / "tiny.yaml")
    capsys.readouterr()
    assert report(tmp_path, [folder], [config]) == 2
    line = refusal(capsys)
    assert "'random-scalar-pool-mlp' (random) seed 2 at fraction 1 is planned by" in line and "--incomplete" in line
    assert report(tmp_path, [folder], [config], "--incomplete") == 0
    results = pd.read_csv(tmp_path / "report" / "results.csv").set_index("method")
    assert results["planned_cells_missing"].to_dict() == {"elmo-scalar-pool-mlp": 1, "random-scalar-pool-mlp": 1}
    assert (
        "**incomplete**: `random-scalar-pool-mlp` lacks 1 planned cell(s) (seed 2"
        in (tmp_path / "report" / "report.md").read_text()
    )


def test_a_whole_chunk_dropped_is_seen_and_one_not_run_yet_is_not(tmp_path, capsys):
    folder = make_folder(tmp_path / "tiny")
    own = tiny_config(tmp_path / "tiny.yaml", seeds="[0, 1, 2]")
    dropped = tiny_config(tmp_path / "more.yaml", seeds="[3, 4]", name="tiny-more")  # its folder was removed
    assert report(tmp_path, [folder], [own, dropped]) == 2
    assert "seed 3 at fraction 1 is planned by" in refusal(capsys)
    not_run = tmp_path / "gpt.yaml"
    not_run.write_text("name: gpt-chunk\nencoders: [{name: gpt, run: 'runs:/abc'}]\nseeds: 2\n")
    assert report(tmp_path, [folder], [own, not_run]) == 0


def test_a_folder_or_a_cell_outside_the_plan_is_refused(tmp_path, capsys):
    folder = make_folder(tmp_path / "tiny", seeds=4)  # seed 3 is not planned
    config = tiny_config(tmp_path / "tiny.yaml")
    assert report(tmp_path, [folder], [config]) == 2
    assert "'elmo-scalar-pool-mlp' (pretrained) seed 3 at fraction 1 (2 such cell(s)): added by hand?" in refusal(
        capsys
    )
    shutil.rmtree(folder)
    study, extra = make_folder(tmp_path / "tiny"), make_folder(tmp_path / "extra", seeds=1)
    (extra / "benchmark.json").write_text((extra / "benchmark.json").read_text().replace('"tiny"', '"tiny-extra"'))
    unseal(extra)
    assert main(["seal", str(extra)]) == 0
    capsys.readouterr()
    assert report(tmp_path, [study, extra], [config]) == 2
    assert "benchmark 'tiny-extra' is not one the study registered" in refusal(capsys)
