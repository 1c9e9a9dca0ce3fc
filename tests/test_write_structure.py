"""Every write-then-rename of the packages goes through ``harness.atomic``: no other module calls
``os.replace``/``os.rename``/``shutil.move`` or a path's ``rename``/``replace``, except the real
moves listed below, each with its reason."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "pretrain", "downstream", "benchmarks")
HELPER = Path("harness/atomic.py")
MODULE_CALLS = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}

# (file, the call's source text): why it is a move, not a write
MOVES = {
    (
        "harness/server/postgres.py",
        "self.data.rename(kept)",
    ): "an open cluster kept aside whole before a closed one is created; nothing is written",
}


def renames(tree: ast.AST, text: str) -> list[str]:
    """The source text of each rename-like call in ``tree``: ``os.replace(…)`` and its kin, and
    ``<x>.rename(y)``/``<x>.replace(y)`` with one argument and no keywords (``Path``'s; a string's
    ``replace`` takes two, a data frame's ``rename`` keywords)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, name = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and (owner.id, name) in MODULE_CALLS:
            found.append(ast.get_source_segment(text, node))
        elif name in ("rename", "replace") and len(node.args) == 1 and not node.keywords:
            found.append(ast.get_source_segment(text, node))
    return found


def test_the_finder_sees_each_form_and_skips_string_and_table_calls():
    text = (
        "os.replace(a, b)\nshutil.move(a, b)\npath.rename(b)\nPath(a).replace(b)\n"
        "name.replace('-', '_')\ntable.rename(columns={})\nreplace(config, seed=1)\n"
    )
    assert renames(ast.parse(text), text) == [
        "os.replace(a, b)",
        "shutil.move(a, b)",
        "path.rename(b)",
        "Path(a).replace(b)",
    ]


def test_no_module_but_harness_atomic_renames_files_into_place():
    found = set()
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO)
            if relative == HELPER:
                continue
            text = path.read_text(encoding="utf-8")
            found |= {(relative.as_posix(), call) for call in renames(ast.parse(text), text)}
    assert found - set(MOVES) == set(), "write through harness.atomic (atomic_write, atomic_folder, move_into_place)"
    assert set(MOVES) <= found, "a listed move is gone: drop it from MOVES"
