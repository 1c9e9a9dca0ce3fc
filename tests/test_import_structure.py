"""How the packages import: a model file loads torch only, package ``__init__``s load nothing
heavy, and no module imports itself back through others at module level."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "pretrain", "downstream", "benchmarks")
HEAVY = ("mlflow", "pytorch_lightning", "lightning", "transformers", "ray", "pandas", "sklearn")


def loaded_after(statement: str) -> list[str]:
    """The heavy libraries in ``sys.modules`` after ``statement``, in a fresh interpreter."""
    probe = f"import sys\n{statement}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    process = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    return eval(process.stdout.strip().splitlines()[-1])  # a list of names, printed above


def model_modules() -> list[str]:
    return sorted(f"pretrain.models.{path.stem}" for path in (REPO / "pretrain" / "models").glob("*.py")
                  if path.stem != "__init__")


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
    assert f"`{package.replace('.', '/')}/`" in (REPO / "docs" / "contributing.md").read_text(), \
        f"docs/contributing.md's layout has no line for {package}"


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
                return stack[stack.index(child):] + [child]
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


def test_the_cycle_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("name", ["Encoder", "load_encoder", "random_encoder"])
def test_the_python_api_still_imports_from_pretrain(name):
    import pretrain

    assert getattr(pretrain, name).__name__ == name
