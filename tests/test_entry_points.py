"""Every ``python -m`` entry point ends a user's mistake in one line: found here by the guard each
one has (``if __name__ == "__main__"``), so a new entry point cannot escape the rule, and held to
ending through :func:`harness.entry_point.run_main` (a ``UserError`` is one ``error:`` line and
exit 2, never a traceback). The Makefile's ``-m`` targets are among them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.entry_point import run_main
from harness.errors import UserError
from tests.helpers import assert_one_line_exit, run_module

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("benchmarks", "downstream", "harness", "pretrain", "tests")
# Guards that are not `python -m` entry points of the project, and why.
NOT_ENTRY_POINTS = {
    "harness/dependency_hash.py": "run as a script by the Makefile with the system Python, before the venv exists",
    "harness/server/tracking_server.py": "refuses to run in one line, naming `make server`",
    "tests/preloaded.py": "the tests' stdlib-only client, run as a script; the module it forks is the entry point",
}


def guarded_files() -> dict[str, ast.If]:
    """``{path: its if __name__ == "__main__" block}`` of every Python file of the project."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if (
                    isinstance(node, ast.If)
                    and "__name__" in ast.unparse(node.test)
                    and "__main__" in ast.unparse(node.test)
                ):
                    found[path.relative_to(REPO).as_posix()] = node
    return found


def module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__main__").replace("/", ".")


def test_every_entry_point_ends_through_run_main():
    guarded = guarded_files()
    assert "downstream/__main__.py" in guarded and "benchmarks/speed/finetune_throughput.py" in guarded
    escaped = []
    for path, block in guarded.items():
        if path in NOT_ENTRY_POINTS:
            continue
        calls = [
            node.value.func.id
            for node in block.body
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
        ]
        if calls != ["run_main"] or len(block.body) != 1:
            escaped.append(path)
    assert not escaped, f"end these entry points with run_main(main) (harness.entry_point): {escaped}"
    assert set(NOT_ENTRY_POINTS) <= set(guarded), "an exemption names a file that is no longer an entry point"


def test_every_module_the_makefile_runs_is_a_checked_entry_point():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    modules = set(re.findall(r"-m ((?:benchmarks|downstream|harness|pretrain|tests)[\w.]*)", makefile))
    checked = {module_name(path) for path in guarded_files()}
    assert modules and modules <= checked, sorted(modules - checked)


def test_run_main_ends_a_user_error_in_one_line_with_status_2(capsys):
    def failing() -> int:
        raise UserError("--flag=x: what to do")

    with pytest.raises(SystemExit) as ended:
        run_main(failing)
    assert ended.value.code == 2
    assert capsys.readouterr().err == "error: --flag=x: what to do\n"
    with pytest.raises(SystemExit) as ended:
        run_main(lambda value: value, 3)
    assert ended.value.code == 3


def test_the_finetune_speed_benchmark_ends_a_data_error_in_one_line(tmp_path):
    """``make bench-finetune`` with MSR files it cannot read (here: a malformed train file, which
    needs no network to refuse)."""
    data = tmp_path / "mrpc"
    data.mkdir()
    (data / "msr_paraphrase_train.txt").write_text("not\tthe\tMSR\tformat\n")
    (data / "msr_paraphrase_test.txt").write_text("not\tthe\tMSR\tformat\n")
    process = run_module(
        "benchmarks.speed.finetune_throughput",
        "--families",
        "elmo",
        "--batches",
        "1",
        uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
        cwd=REPO,
        mrpc_dir=data,
        timeout=300,
    )
    assert_one_line_exit(process, "msr_paraphrase_train.txt")
