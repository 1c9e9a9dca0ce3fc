"""downstream/ in rooms: ``model`` (the classifier's torch modules), ``data`` (what a run reads),
``zero_shot`` (similarity without training, from the same features) and ``run`` (one run's CLI,
LightningModule and records), each small, imports pointing ``model`` ← ``data`` ← ``zero_shot`` ←
``run`` only (function-level imports included)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "downstream"
ROOMS = ("model", "data", "zero_shot", "run")  # a room may import the rooms before it, never those after
MOST_FILES = 20


def imported_rooms(path: Path) -> set[str]:
    """The rooms of ``downstream`` that ``path`` imports anywhere in its body."""
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        rooms |= {name.split(".")[1] for name in names if name.startswith("downstream.") and name.count(".") >= 1}
    return rooms & set(ROOMS)


def test_the_package_is_its_rooms_and_its_entry_point():
    assert sorted(path.name for path in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]
    assert sorted(path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__") == sorted(
        ROOMS
    )


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_is_small_and_imports_only_the_rooms_before_it(room):
    files = sorted((PACKAGE / room).glob("*.py"))
    assert len(files) <= MOST_FILES, f"downstream/{room}/ holds {len(files)} files; split it by what changes together"
    later = set(ROOMS[ROOMS.index(room) + 1 :])
    wrong = {path.name: sorted(imported_rooms(path) & later) for path in files if imported_rooms(path) & later}
    assert wrong == {}, f"downstream/{room}/ imports rooms above it"


def test_the_room_finder_reads_both_import_forms(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import downstream.run.cli\n\ndef f():\n    from downstream.data import features\n")
    assert imported_rooms(module) == {"run", "data"}
