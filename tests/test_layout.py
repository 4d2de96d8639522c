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


def test_executors_never_import_the_engine():
    """runner/executors/ sees a run only through RunContext: no module under it imports runner.engine."""
    modules = _modules()
    under = {n: p for n, p in modules.items() if n.startswith("evalnb.runner.executors")}
    assert {"evalnb.runner.executors.base", "evalnb.runner.executors.local", "evalnb.runner.executors.ray_driver",
            "evalnb.runner.executors.ray_worker", "evalnb.runner.executors.batch"} <= set(under)
    for name, path in under.items():
        assert "evalnb.runner.engine" not in _imports(name, path, modules), f"{name} imports runner.engine"


def test_the_engine_rule_sees_an_engine_import(tmp_path):
    fake = tmp_path / "bad.py"
    fake.write_text("def f():\n    from evalnb.runner import engine\n    from evalnb.runner.engine import Engine\n")
    modules = _modules()
    assert "evalnb.runner.engine" in _imports("evalnb.runner.executors.bad", fake, modules)


def test_executors_keep_their_public_names():
    import evalnb
    from evalnb.runner.executors.batch import BatchExecutor
    from evalnb.runner.executors.ray_driver import RayExecutor

    assert evalnb.RayExecutor is RayExecutor and evalnb.BatchExecutor is BatchExecutor


SAMPLE_MAKERS = {"sample", "generated", "reused"}  # RunContext methods whose Sample the executor fills in


def _is_ctx(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "ctx") or (isinstance(node, ast.Attribute) and node.attr == "ctx")


def _mentions_ctx(node: ast.AST) -> bool:
    return any(_is_ctx(n) for n in ast.walk(node))


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _contract_breaches(source: str, allowed: set[str]) -> list[str]:
    """Where an executor's source reaches past RunContext's public methods or writes run state."""
    found = []
    for fn in [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        tainted: set[str] = set()  # local names bound to something reached through ctx (not a new Sample)
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and _is_ctx(node.value) and node.attr not in allowed:
                found.append(f"{fn.name}: ctx.{node.attr}")
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _mentions_ctx(node.value):
                made = isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) and \
                    node.value.func.attr in SAMPLE_MAKERS
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted.update(t.id for t in targets if isinstance(t, ast.Name) and not made)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else node.targets if isinstance(node, ast.Delete) else []
            for target in targets:
                if not isinstance(target, (ast.Attribute, ast.Subscript)):
                    continue
                root = _root(target)
                if _mentions_ctx(target.value) or (isinstance(root, ast.Name) and root.id in tainted):
                    found.append(f"{fn.name}: writes {ast.unparse(target)}")
    return found


def _run_context_surface() -> set[str]:
    from evalnb.runner.run_context import RunContext

    return {n for n in dir(RunContext) if not n.startswith("_")} | {"plan", "run_id"}


def test_executors_reach_the_run_only_through_run_context_methods():
    """No executor writes engine state: no ctx.<private> or ctx.<attribute> write, nothing
    reached through ctx (the panel's counters, the budget, a task's state) is changed."""
    allowed = _run_context_surface()
    assert {"try_reserve", "release", "calls_started", "calls_ended", "count", "show", "worst_cost"} <= allowed
    assert not {"progress", "budget", "tasks"} & allowed
    for path in sorted((PACKAGE / "runner" / "executors").glob("*.py")):
        assert _contract_breaches(path.read_text(encoding="utf-8"), allowed) == [], path.name


def test_the_contract_rule_sees_writes_behind_the_contract():
    bad = (
        "class X:\n"
        "    def a(self, ctx):\n"
        "        ctx.progress.model('m').in_flight += 1\n"
        "    def b(self):\n"
        "        mp = self.ctx.calls_started\n"
        "        mp.x = 1\n"
        "    def c(self):\n"
        "        self.ctx.plan.concurrency = 3\n"
        "    def d(self, ctx, unit):\n"
        "        s = ctx.sample(unit)\n"
        "        s.scores = {}\n"  # filling in its own new sample: allowed
    )
    found = _contract_breaches(bad, _run_context_surface())
    assert set(found) == {"a: ctx.progress", "a: writes ctx.progress.model('m').in_flight", "b: writes mp.x",
                          "c: writes self.ctx.plan.concurrency"}, found
