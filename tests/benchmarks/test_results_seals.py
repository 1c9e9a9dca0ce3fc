"""Seals that say by what and over what (``benchmarks.results_files.seal_chain``): a folder unsealed,
edited and sealed again passes every check of its own, so its manifest records the commit that
sealed and the manifest it replaced, and a report lists each folder's seal, flagging one re-sealed
or sealed at a commit none of its cells ran at."""

import hashlib
import json

from benchmarks.__main__ import main
from benchmarks.results_files.folder import MANIFEST_FILE
from benchmarks.results_files.seal_chain import seal_text, sealing_commit
from tests.benchmarks.test_results_files import edit_record, make_folder
from tests.benchmarks.test_results_folder_checks import cells_by_arm, unseal


def seals(folder) -> list[dict]:
    return json.loads((folder / MANIFEST_FILE).read_text())["seals"]


def report_text(tmp_path, *folders) -> str:
    assert main(["report", *map(str, folders), "--out", str(tmp_path / "report")]) == 0
    return (tmp_path / "report" / "report.md").read_text()


def test_an_edited_folder_sealed_again_names_the_commit_that_sealed_it(tmp_path):
    folder = make_folder(tmp_path / "a")  # its cells ran at commit "abc"
    unseal(folder)
    edit_record(cells_by_arm(folder)[("random", 2)], lambda record: record["tags"].update(method="edited"))
    assert main(["seal", str(folder)]) == 0
    assert seals(folder) == [{"commit": sealing_commit(), "replaces": ""}]
    commit = sealing_commit()[:12] or "no commit"
    assert f"- seal of `a`: sealed at `{commit}`, **not at a commit its cells ran at**" in report_text(tmp_path, folder)


def test_a_re_seal_chains_the_manifest_it_replaces_and_is_flagged(tmp_path, capsys):
    folder = make_folder(tmp_path / "a")
    first = hashlib.sha256((folder / MANIFEST_FILE).read_bytes()).hexdigest()
    assert main(["seal", str(folder)]) == 2 and "seal --again" in capsys.readouterr().err
    assert main(["seal", "--again", str(folder)]) == 0
    assert seals(folder) == [{"commit": sealing_commit(), "replaces": first}]
    second = hashlib.sha256((folder / MANIFEST_FILE).read_bytes()).hexdigest()
    assert main(["seal", "--again", str(folder)]) == 0
    assert seals(folder)[1:] == [{"commit": sealing_commit(), "replaces": second}] and len(seals(folder)) == 2
    assert "**re-sealed** (2 earlier manifest(s) chained; git's history says what changed)" in report_text(
        tmp_path, folder
    )


def test_a_folder_sealed_at_a_commit_its_cells_ran_at_is_not_flagged():
    assert seal_text([{"commit": "c" * 40, "replaces": ""}], {"c" * 40}) == f"sealed at `{'c' * 12}`"
    assert "no chain" in seal_text([], {"c" * 40})
