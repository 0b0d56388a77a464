"""core/ stays easy to hold in one's head: no module reaches for another module's private names, no import
cycle runs between its modules, and the boosting grower does not see the worker processes."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core"
MODULES = {p: ast.parse(p.read_text(), str(p)) for p in sorted(CORE.rglob("*.py"))}

# reasoned exceptions: (module, reference)
ALLOWED = {
    # a forked worker process leaves without the parent's exit handlers (the standard library's way to do so)
    ("core/ensemble/_hist_gradient_boosting/worker.py", "os._exit"),
    # the Gaussian mixture's k-means initialisation is the k-means engine itself (the same numbers as kmeans)
    ("core/mixture/gaussian_mixture.py", "from ..cluster import _kmeans_engine"),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_self(node) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _definitions() -> dict[str, set[Path]]:
    """Private name -> the modules that define it (functions, classes, variables, attributes of self or cls,
    keys of the fitted-state dicts given to setattr, keyword parameters)."""
    defined: dict[str, set[Path]] = defaultdict(set)
    for path, tree in MODULES.items():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_self(node.value):
                names = [node.attr]
            elif isinstance(node, ast.Dict):
                names = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            elif isinstance(node, ast.arg):
                names = [node.arg]
            for name in names:
                if _private(name):
                    defined[name].add(path)
    return defined


def _cross_module_private_references() -> list[tuple[str, str]]:
    defined = _definitions()
    found = []
    for path, tree in MODULES.items():
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and not _is_self(node.value):
                if isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super":
                    continue
                if path not in defined.get(node.attr, ()):
                    found.append((rel, f"{ast.unparse(node.value)}.{node.attr}"))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _private(node.args[1].value) and not _is_self(node.args[0])
                  and path not in defined.get(node.args[1].value, ())):
                found.append((rel, ast.unparse(node)))
            elif isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
                # (a package's own private modules, ``from . import _engine``, are its to use)
                for alias in node.names:
                    if _private(alias.name):
                        found.append((rel, f"from {'.' * node.level}{node.module or ''} import {alias.name}"))
    return found


def test_no_private_name_is_reached_across_modules():
    found = _cross_module_private_references()
    assert sorted(set(found) - ALLOWED) == []
    assert ALLOWED <= set(found), "an exception no longer needed: remove it from ALLOWED"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(body):
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)


def _import_graph(nodes=lambda tree: _module_level_imports(tree.body)) -> dict[str, set[str]]:
    """Module -> the core modules it imports (``from pkg import sub``: the submodule), by the import statements
    ``nodes(tree)`` gives of each module's tree: by default those that run at import time."""
    names = {_module_name(p): p for p in MODULES}
    graph: dict[str, set[str]] = {m: set() for m in names}
    for mod, path in names.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in nodes(MODULES[path]):
            if isinstance(node, ast.Import):
                graph[mod] |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + (node.module.split(".") if node.module else []))
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in names:
                        graph[mod].add(sub)
                    elif target in names:
                        graph[mod].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, or of a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]] and _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_core_modules():
    graph = _import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 300  # the graph was built
    assert _cycles(graph) == []


def _all_imports_graph() -> dict[str, set[str]]:
    """As ``_import_graph``, with the imports inside functions and under TYPE_CHECKING too (what a module can
    reach at all, not only at import time)."""
    return _import_graph(ast.walk)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


HGB = "core.ensemble._hist_gradient_boosting"


def test_the_boosting_grower_does_not_see_the_worker_processes():
    """The tree grower and the split finder work on histograms handed to them; only the histogram builder knows
    that rows may be summed in worker processes (worker.py). Neither imports the worker module, directly or
    through another module, at import time or inside a function."""
    graph = _all_imports_graph()
    assert f"{HGB}.worker" in _reachable(graph, f"{HGB}.histogram")  # the graph sees the one legitimate edge
    for mod in ("grower", "splitting"):
        reached = _reachable(graph, f"{HGB}.{mod}")
        assert f"{HGB}.worker" not in reached, (mod, sorted(reached))
