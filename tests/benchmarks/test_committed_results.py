"""The committed study results (``results/``) are still the cells today's code would plan: every
cell file's hash recomputes from its settings under its protocol, and each chunk's encoder
identity is its config's pretraining-stage hash. A refactor that moved either would silently split
the study into cells a re-run no longer finds; a protocol bump is the deliberate way to move them.
The stage hashes recompute from the corpus digests each folder records, so a clone of the
repository alone checks them; the digests themselves are checked against the corpora where those
are (``CORPORA_DIR``, else ``../shared/data`` beside the repository)."""

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.plan.encoders import corpus_digests, shared_corpus_names, stage_hashes, stages_of
from benchmarks.plan.precision import with_precision
from harness.protocol import settings_hash
from pretrain.corpus.corpora import SENTENCES_FILE, SHARED_FOLDERS, default_corpora_dir

RESULTS = Path(__file__).resolve().parents[2] / "results"
FOLDERS = sorted(path.parent for path in RESULTS.glob("*/*/benchmark.json")) + sorted(
    path.parent for path in RESULTS.glob("*/benchmark.json")
)


def cells_of(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((folder / "cells").glob("*.json"))]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: str(folder.relative_to(RESULTS)))
def test_a_committed_cell_hash_recomputes_from_its_settings(folder):
    cells = cells_of(folder)
    assert cells, f"{folder}: no cells"
    moved = [cell["cell_hash"] for cell in cells if settings_hash(cell["spec"], cell["protocol"]) != cell["cell_hash"]]
    assert moved == [], f"{folder}: {len(moved)} of {len(cells)} cell hashes moved without a protocol bump"


CHUNKS = [folder for folder in FOLDERS if folder.parent.name == "families-budget"]


def pretrained_encoders(benchmark: dict) -> list[dict]:
    return [encoder for encoder in benchmark["settings"]["encoders"] if "pretrain" in encoder]


@pytest.mark.parametrize(
    "folder",
    CHUNKS + [folder for folder in FOLDERS if folder.name in ("calibration", "study-cells")],
    ids=lambda folder: folder.name,
)
def test_a_chunk_encoder_identity_is_its_pretraining_stage_hash(folder):
    """Its stages as the suite ran them, under each cell's own protocol version, with the precision
    the folder's machine record names pinned into their flags (``benchmarks.plan.precision``)."""
    benchmark = json.loads((folder / "benchmark.json").read_text())
    pretrained = pretrained_encoders(benchmark)
    identities: dict[str, dict[str, str]] = {}
    for cell in cells_of(folder):
        if cell["encoder"] and cell["encoder"].get("identity"):
            identities.setdefault(cell["encoder"]["name"], {})[cell["protocol"]] = cell["encoder"]["identity"]
    assert pretrained and identities
    precision = (benchmark.get("machine") or {}).get("precision")
    for encoder in pretrained:
        stages = stages_of(encoder)
        if precision:
            stages = [replace(stage, args=with_precision(stage.config, stage.args, precision)) for stage in stages]
        for protocol, identity in identities[encoder["name"]].items():
            assert stage_hashes(stages, benchmark["data_digest"], benchmark["corpora"], protocol)[-1] == identity


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: str(folder.relative_to(RESULTS)))
def test_a_folder_records_the_digest_of_every_shared_corpus_its_stages_read(folder):
    benchmark = json.loads((folder / "benchmark.json").read_text())
    read = {
        name
        for encoder in pretrained_encoders(benchmark)
        for stage in stages_of(encoder)
        for name in shared_corpus_names(stage.args, stage.config_text())
    }
    assert set(benchmark["corpora"]) == read
    assert all(len(digest) == 64 for digest in benchmark["corpora"].values())


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: str(folder.relative_to(RESULTS)))
def test_a_folder_corpus_digests_are_those_of_the_corpora(folder):
    benchmark = json.loads((folder / "benchmark.json").read_text())
    missing = [
        name
        for name in benchmark["corpora"]
        if not (default_corpora_dir() / SHARED_FOLDERS[name] / SENTENCES_FILE).is_file()
    ]
    if missing:
        pytest.skip(
            f"set CORPORA_DIR to the folder holding {SHARED_FOLDERS[missing[0]]}/{SENTENCES_FILE} "
            f"to check the recorded corpus digests"
        )
    assert corpus_digests(pretrained_encoders(benchmark)) == benchmark["corpora"]


RESEAL = re.compile(r"\bre-?seal", re.IGNORECASE)  # a commit subject that names a re-seal
BEFORE_SEAL_CHAINS = {  # commits that changed committed folders' files before seals recorded a chain
    "175ed18832df4b07b80043020c9e0f1ecbe1fbec": "calibration: corpora recorded, sealed",
    "570a61248a0759a0911f2ac9d30f99868a8bdd78": "device-check: its README's table",
    "ce05f8300f5c2d9c8b535b95f7878fff9270349a": "every folder: manifests introduced",
    "ed1e1d2b69c665b1ae05192c2f136b5def48e123": "every folder: corpus digests recorded",
    "189951812174c77b802bd6b7f45a9e1448ba7de1": "families-budget: ULMFiT re-exported with its stages",
    "30f94474dc6c9866460f132547cd311add09693c": "study-cells: a cell added",
    "b0b46670cdb12c8a32b1da50be87abc1cab2aca0": "study-cells: re-timed",
}


def git(*arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=RESULTS.parent, capture_output=True, text=True, timeout=60, check=True
    ).stdout


def results_history() -> list[tuple[str, str, list[str]]]:
    """Every commit that touched ``results/``, oldest first: (commit, subject, paths)."""
    commits = []
    for block in git("log", "--reverse", "--no-renames", "--format=%x00%H %s", "--name-only", "--", "results").split(
        "\0"
    )[1:]:
        header, *paths = block.strip().splitlines()
        commit, _, subject = header.partition(" ")
        commits.append((commit, subject, [path for path in paths if path]))
    return commits


def test_a_committed_folder_changes_only_in_a_commit_that_names_its_re_seal():
    """A folder's files stay as the commit that added them made them: an edit (and the manifest
    sealed again over it) passes every check of the folder's own, so git's history is what shows it;
    a later change is a deliberate re-seal, named in its commit's subject."""
    try:
        if git("rev-parse", "--is-shallow-repository").strip() == "true":
            pytest.skip("a shallow clone: the history that added the results folders is not here")
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: no history to hold the results folders to")
    folders = [f"{folder.relative_to(RESULTS.parent).as_posix()}/" for folder in FOLDERS]
    added: set[str] = set()
    changed = []
    for commit, subject, paths in results_history():
        for path in paths:
            if not any(path.startswith(folder) for folder in folders):
                continue
            if path in added and commit not in BEFORE_SEAL_CHAINS and not RESEAL.search(subject):
                changed.append(f"{path} in {commit[:12]} ({subject})")
            added.add(path)
    assert changed == [], f"{len(changed)} committed results file(s) changed without a re-seal: {changed[:3]}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: str(folder.relative_to(RESULTS)))
def test_a_committed_folder_names_the_commit_that_sealed_it_and_that_commit_exists(folder):
    seals = json.loads((folder / "manifest.json").read_text()).get("seals")
    assert seals, f"{folder}: its manifest records no seal: re-seal it with `python -m benchmarks seal --again`"
    commit = seals[-1]["commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit), f"{folder}: sealed at {commit!r}, not a commit (uncommitted code?)"
    try:
        if git("rev-parse", "--is-shallow-repository").strip() == "true":
            pytest.skip("a shallow clone: the sealing commit may lie outside it")
        git("cat-file", "-e", f"{commit}^{{commit}}")
    except (OSError, subprocess.SubprocessError):
        pytest.fail(f"{folder}: sealed at {commit}, a commit this repository does not hold")
