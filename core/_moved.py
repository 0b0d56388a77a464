"""Modules that moved, under their old names, for model bundles pickled before the move.

A bundle is a pickle: it names each class by its module path (``core.kernel.gaussian_process_regressor``,
``core.neural.mlp_engine``). This finder answers the old names with the modules that now hold those classes, so
an old bundle still loads; code imports the new names. Installed first on ``sys.meta_path`` by ``core/__init__``
(a leftover ``core/kernel/`` directory of compiled files must not be found as a namespace package instead).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

# old module path -> new module path (a package maps its submodules by prefix)
MOVED = {
    "core.kernel": "core.kernel_methods",
    "core.neural.mlp_engine": "core.neural._mlp_engine",
    "core.svm.pegasos": "core.svm._pegasos",
    "core.svm.smo": "core.svm._smo",
}


def new_name(fullname: str) -> str | None:
    """The module that now holds what ``fullname`` held, or None when ``fullname`` did not move."""
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:  # the target module is already executed
        return None


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install() -> None:
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
