"""The package's shape: no import cycles, no module shadowed by a name, old public paths work.

The import graph is read from the source (nothing imported), and every import counts: one
inside a function or under ``if TYPE_CHECKING:`` is still a dependency.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import evalnb

PACKAGE = Path(evalnb.__file__).parent
LAYOUT_DOC = (PACKAGE.parent / "docs" / "development.md").read_text(encoding="utf-8")  # its "Layout" section


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]

    def resolve(mod: str) -> str | None:
        while mod and mod not in modules:
            mod = mod.rpartition(".")[0]
        return mod or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (resolve(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")[: len(base.split(".")) - (node.level - 1)]
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                target = full if full in modules else resolve(mod)
                if target:
                    found.add(target)
    found.discard(name)
    return found


def _cycle_from(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (loop := visit(w)):
                return loop
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (loop := visit(v)):
            return loop
    return None


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycle_from(graph) is None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle_from({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle_from({"a": {"b"}, "b": set()}) is None


def test_top_level_is_small_and_no_module_name_repeats_a_folder():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    top = [p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    assert len(top) <= 12, top
    for stem in top:
        head = stem.lstrip("_").split("_")[0]
        assert head not in folders or head == stem, f"{stem}.py belongs in {head}/"


def test_no_submodule_is_shadowed_by_a_name_in_its_package():
    for info in pkgutil.walk_packages([str(PACKAGE)], "evalnb."):
        module = importlib.import_module(info.name)
        parent, _, child = info.name.rpartition(".")
        assert getattr(importlib.import_module(parent), child) is module, info.name


def test_public_names_stay_where_users_import_them():
    import evalnb
    from evalnb.results import stats

    assert evalnb.stats is stats  # an attribute of evalnb (docs/results.md: evalnb.stats.sample_size), not a copy
    assert callable(evalnb.stats.sample_size)
    assert not (PACKAGE / "stats.py").exists() and not (PACKAGE / "comparison.py").exists()  # no shims
    assert callable(evalnb.run) and evalnb.run.__module__ == "evalnb.runner.api"
    assert evalnb.Suite.from_dict is not None and hasattr(evalnb.Suite, "items")
    import evalnb.runner.engine  # noqa: F401 - importing the package must not rebind evalnb.run

    assert callable(evalnb.run)


def test_the_documented_layout_names_every_package():
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    block = LAYOUT_DOC.split("## Layout", 1)[1].split("```", 2)[1]
    for folder in folders:
        assert f"{folder}/" in block, folder
