"""Model bundles pickled before a module moved still load (core/_moved.py and ``core.kernels.__getattr__``).

A bundle names each class by its module path. The old layout is reproduced exactly: the moved classes are
pickled under their old ``__module__`` (pickle checks that the old path leads to the same class), the bytes
are checked to name the old paths, and a fresh interpreter, where no old name was imported yet, loads them
and predicts what the model predicted before pickling.
"""

from __future__ import annotations

import io
import subprocess
import sys
import zlib
from pathlib import Path

import joblib
import numpy as np
import pytest

from core._moved import new_name
from core.ensemble.stacking_regressor import StackingRegressor
from core.kernel_methods import gp_kernels
from core.kernel_methods.gaussian_process_regressor import GaussianProcessRegressor
from core.kernel_methods.kernel_ridge_regression import KernelRidgeRegression
from core.kernels import tree as kernel_tree
from core.neural import _mlp_engine
from core.neural.mlp_classifier import MLPClassifier

ROOT = Path(__file__).resolve().parents[2]

# class -> the module path a bundle of the old layout names it by
OLD_PATHS = {
    GaussianProcessRegressor: "core.kernel.gaussian_process_regressor",
    KernelRidgeRegression: "core.kernel.kernel_ridge_regression",
    _mlp_engine.MLPNetwork: "core.neural.mlp_engine",
    **{cls: "core.kernels" for cls in (gp_kernels.GPConstant, gp_kernels.GPWhite, gp_kernels.GPRBF,
                                        gp_kernels.GPLinear, gp_kernels.GPPoly, gp_kernels.GPSum,
                                        gp_kernels.GPProduct)},
    **{cls: "core.kernels" for cls in (kernel_tree.BaseKernel, kernel_tree.SumKernel, kernel_tree.ProductKernel,
                                        kernel_tree.ScaledKernel, kernel_tree.CosineKernel)},
}


def _old_layout_pickle(models) -> bytes:
    saved = {cls: cls.__module__ for cls in OLD_PATHS}
    try:
        for cls, old in OLD_PATHS.items():
            cls.__module__ = old
        buf = io.BytesIO()
        joblib.dump(models, buf, compress=3)
    finally:
        for cls, module in saved.items():
            cls.__module__ = module
    return buf.getvalue()


def test_new_name_maps_only_the_moved_modules():
    assert new_name("core.kernel") == "core.kernel_methods"
    assert new_name("core.kernel.gaussian_process_regressor") == "core.kernel_methods.gaussian_process_regressor"
    assert new_name("core.neural.mlp_engine") == "core.neural._mlp_engine"
    assert new_name("core.svm.smo") == "core.svm._smo"
    assert new_name("core.kernels") is None and new_name("core.kernel_methods") is None
    assert new_name("core.kernelx") is None
    assert new_name("core.svm.smox") is None and new_name("core.svm") is None


def test_old_engine_module_paths_import_as_the_private_engines():
    import importlib

    from core.svm import _smo

    assert importlib.import_module("core.svm.smo") is _smo
    assert importlib.import_module("core.neural.mlp_engine") is _mlp_engine
    from core.svm.smo import SMOResult, solve_smo  # the form a pickle's find_class resolves

    assert solve_smo is _smo.solve_smo and SMOResult is _smo.SMOResult


def test_bundles_of_the_old_module_layout_load_and_predict_the_same(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=40)
    labels = np.where(X[:, 0] > 0, "a", "b")
    gpr = GaussianProcessRegressor(kernel="constant*rbf + white", n_restarts_optimizer=0).fit(X, y)
    krr = KernelRidgeRegression(kernel="0.5*rbf + cosine(poly)").fit(X, y)
    mlp = MLPClassifier(hidden_layer_sizes=[4], max_iter=5).fit(X, labels)
    stack = StackingRegressor(estimators=[{"name": "ridge_regression", "params": {}}], cv=2).fit(X, y)
    del stack.stack_methods_  # a stacking regressor pickled before the shared stacking base had none
    models = {"gpr": gpr, "krr": krr, "mlp": mlp, "stack": stack}
    expected = {k: np.asarray(m.predict(X)) for k, m in models.items()}
    blob = _old_layout_pickle(models)
    text = zlib.decompress(blob)  # joblib's compress=3, as the artifact store writes bundles: one zlib stream
    for old in ("core.kernel.gaussian_process_regressor", "core.kernel.kernel_ridge_regression",
                "core.neural.mlp_engine", "GPRBF", "SumKernel"):
        assert old.encode() in text
    (tmp_path / "old.joblib").write_bytes(blob)
    np.save(tmp_path / "X.npy", X)
    np.savez(tmp_path / "expected.npz", **expected)
    code = (
        "import sys, joblib, numpy as np\n"
        f"d = {str(tmp_path)!r}\n"
        "assert not any(m == 'core' or m.startswith('core.') for m in sys.modules)\n"
        "models = joblib.load(d + '/old.joblib')\n"
        "X = np.load(d + '/X.npy'); expected = np.load(d + '/expected.npz', allow_pickle=True)\n"
        "for k, m in models.items():\n"
        "    got = np.asarray(m.predict(X))\n"
        "    assert np.array_equal(got, expected[k]), k\n"
        "print('loaded', sorted(models))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "loaded ['gpr', 'krr', 'mlp', 'stack']" in proc.stdout


@pytest.mark.parametrize("name", ["GPRBF", "HyperKernel"])
def test_old_kernel_names_resolve_to_the_gp_kernels(name):
    import core.kernels

    assert getattr(core.kernels, name) is getattr(gp_kernels, name)
    with pytest.raises(AttributeError):
        core.kernels.NoSuchKernel  # noqa: B018
