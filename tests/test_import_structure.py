"""How the packages import: a model file loads torch only, package ``__init__``s load nothing
heavy, no module imports itself back through others at module level, the packages and the folders
of benchmarks/ import only downward in the order stated here, and no folder imports another that
imports it back."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "pretrain", "downstream", "benchmarks")  # bottom first: each imports only those before it
# benchmarks/'s folders, bottom first: each imports only those before it; the package's own modules
# (suite, __main__) sit above them all
BENCHMARKS_FOLDERS = ("cell", "stats", "plan", "speed", "tasks", "report", "results_files", "engine")
SUITE_CALLERS = ("evaluate",)  # folders that run studies through the suite sit above it
HEAVY = ("mlflow", "pytorch_lightning", "lightning", "transformers", "ray", "pandas", "sklearn")


def loaded_after(statement: str) -> list[str]:
    """The heavy libraries in ``sys.modules`` after ``statement``, in a fresh interpreter."""
    probe = f"import sys\n{statement}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    process = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return eval(process.stdout.strip().splitlines()[-1])  # a list of names, printed above


def model_modules() -> list[str]:
    return sorted(
        f"pretrain.models.{path.stem}"
        for path in (REPO / "pretrain" / "models").glob("*.py")
        if path.stem != "__init__"
    )


def test_the_model_files_import_torch_only():
    assert loaded_after("import pretrain.models\n" + "\n".join(f"import {name}" for name in model_modules())) == []


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sub_packages() -> list[str]:
    """Every package of the project, the four top-level ones and the folders inside them."""
    return sorted(module_name(init) for package in PACKAGES for init in (REPO / package).rglob("__init__.py"))


def test_package_inits_import_nothing_heavy():
    assert len(sub_packages()) > len(PACKAGES)
    assert loaded_after("\n".join(f"import {package}" for package in sub_packages())) == []


@pytest.mark.parametrize("package", sub_packages())
def test_every_package_says_what_it_holds_and_the_contributing_page_lists_it(package):
    init = REPO / package.replace(".", "/") / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"{init}: a docstring saying what the package holds"
    assert f"`{package.replace('.', '/')}/`" in (REPO / "docs" / "contributing.md").read_text(), (
        f"docs/contributing.md's layout has no line for {package}"
    )


def module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports when it is imported (a.b.c imports a and a.b too)."""
    named = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    imported = set()
    for name in named:
        parts = name.split(".")
        imported |= {".".join(parts[:end]) for end in range(1, len(parts) + 1)} & modules
    return imported - {module_name(path)}


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path of modules, or [] (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == "open":
                return stack[stack.index(child) :] + [child]
            if child not in state:
                found = visit(child)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_no_import_cycle_at_module_level():
    paths = [path for package in PACKAGES for path in (REPO / package).rglob("*.py")]
    modules = {module_name(path) for path in paths}
    graph = {module_name(path): module_level_imports(path, modules) for path in paths}
    assert cycle(graph) == [], " -> ".join(cycle(graph))


def imported_anywhere(path: Path, modules: set[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in it, inside functions too (the deepest
    module each import names: ``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``)."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            prefixes = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
            imported |= set([prefix for prefix in prefixes if prefix in modules][:1])
    return imported - {module_name(path)}


def project_imports() -> dict[str, set[str]]:
    """``{module: the project modules it imports anywhere}`` over the four packages."""
    paths = [path for package in PACKAGES for path in (REPO / package).rglob("*.py")]
    modules = {module_name(path) for path in paths}
    return {module_name(path): imported_anywhere(path, modules) for path in paths}


def child_of(package: str, module: str) -> str | None:
    """The module or folder directly inside ``package`` that holds ``module`` (None outside it)."""
    if not module.startswith(package + "."):
        return None
    return f"{package}.{module[len(package) + 1 :].split('.')[0]}"


def folder_graph(package: str, imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """What each module and folder directly inside ``package`` imports of the others, a folder
    counting every import of any module under it."""
    graph: dict[str, set[str]] = {}
    for module, imported in imports.items():
        source = child_of(package, module)
        if source is not None:
            targets = {child_of(package, target) for target in imported} - {None, source}
            graph.setdefault(source, set()).update(targets)
    return {node: {target for target in targets if target in graph} for node, targets in graph.items()}


@pytest.mark.parametrize("package", sub_packages())
def test_no_folder_imports_one_that_imports_it_back(package):
    """Inside every package its folders and modules form layers: no two import each other, through
    however many others, at module level or inside a function."""
    found = cycle(folder_graph(package, project_imports()))
    assert found == [], f"{package}: " + " -> ".join(found)


def upward_imports(order: tuple[str, ...], imports: dict[str, set[str]], unit) -> list[str]:
    """``module -> module`` for each import from a unit of ``order`` to one after it (``unit``:
    a module's unit, None outside ``order``'s)."""
    found = []
    for module, imported in sorted(imports.items()):
        for target in sorted(imported):
            source_unit, target_unit = unit(module), unit(target)
            if source_unit in order and target_unit in order and order.index(target_unit) > order.index(source_unit):
                found.append(f"{module} -> {target}")
    return found


def benchmarks_unit(module: str) -> str | None:
    """A benchmarks module's folder, "top" for the package's own modules (``suite``, ``__main__``)."""
    parts = module.split(".")
    if parts[0] != "benchmarks" or len(parts) == 1:
        return None
    folders = (*BENCHMARKS_FOLDERS, *SUITE_CALLERS)
    return parts[1] if parts[1] in folders or (REPO / "benchmarks" / parts[1]).is_dir() else "top"


def test_the_packages_import_only_downward():
    assert upward_imports(PACKAGES, project_imports(), lambda module: module.split(".")[0]) == []


def test_the_benchmarks_folders_are_all_in_the_stated_order():
    folders = {path.parent.name for path in (REPO / "benchmarks").glob("*/__init__.py")}
    assert folders == {*BENCHMARKS_FOLDERS, *SUITE_CALLERS}, "place each benchmarks/ folder in BENCHMARKS_FOLDERS"


def test_the_benchmarks_folders_import_only_downward():
    found = upward_imports((*BENCHMARKS_FOLDERS, "top", *SUITE_CALLERS), project_imports(), benchmarks_unit)
    assert found == [], f"imports up the order {' < '.join(BENCHMARKS_FOLDERS)} < suite: " + "; ".join(found)


def test_the_order_checks_find_an_upward_import():
    imports = {
        "benchmarks.plan.cells": {"benchmarks.tasks.cells"},
        "benchmarks.tasks.cells": {"benchmarks.cell.definition"},
        "benchmarks.stats.gaps": {"benchmarks.suite"},
    }
    assert upward_imports((*BENCHMARKS_FOLDERS, "top"), imports, benchmarks_unit) == [
        "benchmarks.plan.cells -> benchmarks.tasks.cells",
        "benchmarks.stats.gaps -> benchmarks.suite",
    ]
    graph = folder_graph(
        "benchmarks",
        {
            "benchmarks.plan.lr_selection": {"benchmarks.report.run_table"},
            "benchmarks.report.outputs": {"benchmarks.plan.lr_selection"},
        },
    )
    assert cycle(graph) == ["benchmarks.plan", "benchmarks.report", "benchmarks.plan"]


def test_the_cycle_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("name", ["Encoder", "load_encoder", "random_encoder"])
def test_the_python_api_still_imports_from_pretrain(name):
    import pretrain

    assert getattr(pretrain, name).__name__ == name
