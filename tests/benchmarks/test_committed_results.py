"""The committed study results (``results/``) are still the cells today's code would plan: every
cell file's hash recomputes from its settings under its protocol, and each chunk's encoder
identity is its config's pretraining-stage hash. A refactor that moved either would silently split
the study into cells a re-run no longer finds; a protocol bump is the deliberate way to move them."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.plan.encoders import stage_hashes, stages_of
from benchmarks.plan.precision import with_precision
from harness.protocol import protocol_version, settings_hash

RESULTS = Path(__file__).resolve().parents[2] / "results"
FOLDERS = sorted(path.parent for path in RESULTS.glob("*/*/benchmark.json")) + \
    sorted(path.parent for path in RESULTS.glob("*/benchmark.json"))


def cells_of(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((folder / "cells").glob("*.json"))]


def current_cells(folder: Path) -> list[dict]:
    return [cell for cell in cells_of(folder) if cell["protocol"] == protocol_version()]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: str(folder.relative_to(RESULTS)))
def test_a_committed_cell_hash_recomputes_from_its_settings(folder):
    cells = cells_of(folder)
    assert cells, f"{folder}: no cells"
    moved = [cell["cell_hash"] for cell in cells if settings_hash(cell["spec"], cell["protocol"]) != cell["cell_hash"]]
    assert moved == [], f"{folder}: {len(moved)} of {len(cells)} cell hashes moved without a protocol bump"


@pytest.mark.parametrize("folder", [folder for folder in FOLDERS
                                    if folder.parent.name == "families-budget" or folder.name == "calibration"],
                         ids=lambda folder: folder.name)
def test_a_chunk_encoder_identity_is_its_pretraining_stage_hash(folder):
    """Its stages as the suite ran them: with the precision the folder's machine record names
    pinned into their flags (``benchmarks.plan.precision``)."""
    benchmark = json.loads((folder / "benchmark.json").read_text())
    pretrained = [encoder for encoder in benchmark["settings"]["encoders"] if "pretrain" in encoder]
    identities = {cell["encoder"]["name"]: cell["encoder"]["identity"] for cell in current_cells(folder)
                  if cell["encoder"] and cell["encoder"].get("identity")}
    if not identities:
        pytest.skip(f"no cell of protocol {protocol_version()} in {folder.name}: made under an older one")
    assert pretrained
    precision = (benchmark.get("machine") or {}).get("precision")
    for encoder in pretrained:
        stages = stages_of(encoder)
        if precision:
            stages = [replace(stage, args=with_precision(stage.config, stage.args, precision)) for stage in stages]
        assert stage_hashes(stages, benchmark["data_digest"])[-1] == identities[encoder["name"]]
