"""No import cycles among the modules of ``core`` and ``service``.

The import graph is grimp's (import-linter's graph library): every ``import`` statement, at module level or
inside a function, since a function-level import that closes a loop is still a cycle a reader must hold in
their head; imports under ``TYPE_CHECKING`` are left out (they never run). A cycle is a strongly connected
component of more than one module.
"""

from __future__ import annotations

import grimp
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components


def import_cycles(*packages: str) -> list[frozenset[str]]:
    graph = grimp.build_graph(*packages, include_external_packages=False, exclude_type_checking_imports=True)
    modules = sorted(graph.modules)
    index = {m: i for i, m in enumerate(modules)}
    edges = [(index[m], index[t]) for m in modules for t in graph.find_modules_directly_imported_by(m)]
    rows, cols = zip(*edges, strict=True) if edges else ((), ())
    adjacency = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(modules), len(modules)))
    _, label = connected_components(adjacency, directed=True, connection="strong")
    groups: dict[int, set[str]] = {}
    for m, c in zip(modules, label, strict=True):
        groups.setdefault(int(c), set()).add(m)
    return [frozenset(g) for g in groups.values() if len(g) > 1]


def test_core_and_service_have_no_import_cycles():
    assert [sorted(c) for c in import_cycles("core", "service")] == []


def test_core_alone_has_no_import_cycles():
    assert import_cycles("core") == []


def test_the_check_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "cyclic_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\n")  # a function-level import
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_pkg") == [frozenset({"cyclic_pkg.a", "cyclic_pkg.b"})]
