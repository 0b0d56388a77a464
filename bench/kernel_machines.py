"""Benchmark: kernel machines vs scikit-learn (ratios ours / sklearn, same data, same run, CPU time).

    OPENBLAS_NUM_THREADS=1 python bench/kernel_machines.py [--quick] [--parity]

* SVC rbf fit on digits (1797 x 64, 10 classes, one-vs-one) and on a 10,000 x 20 synthetic binary set
  (target: within 3x libsvm);
* linear SVM, Pegasos on 100,000 x 50 vs LinearSVC (target: within 2x);
* GP regression with hyperparameter optimisation on 2,000 points vs GaussianProcessRegressor (target: 2x);
* single-row predict latency of every model (target: < 100 microseconds);
* with ``--parity``: 5-fold accuracy of solver="pegasos" (one-vs-rest) vs LinearSVC(loss="hinge") on
  iris, wine, breast_cancer and a 600-row digits subsample, same folds (target: |diff| <= 1 pp).

Prints a Markdown table (paste into bench/results/kernel_machines.md).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor as SKGP  # noqa: E402
from sklearn.gaussian_process import kernels as skk  # noqa: E402
from sklearn.kernel_ridge import KernelRidge  # noqa: E402
from sklearn.linear_model import Perceptron  # noqa: E402
from sklearn.svm import SVC, SVR, LinearSVC  # noqa: E402

from core.kernel_methods.gaussian_process_regressor import GaussianProcessRegressor  # noqa: E402
from core.kernel_methods.kernel_perceptron import KernelPerceptron  # noqa: E402
from core.kernel_methods.kernel_ridge_regression import KernelRidgeRegression  # noqa: E402
from core.svm.svm_classifier import SVMClassifier  # noqa: E402
from core.svm.svm_regressor import SVMRegressor  # noqa: E402

warnings.filterwarnings("ignore")
QUICK = "--quick" in sys.argv
PARITY = "--parity" in sys.argv
ROWS = []


def timed(fn, repeat=1):
    """Best CPU time (process_time) of ``repeat`` runs: wall time is meaningless on the shared 2-core box."""
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def std(X):
    s = X.std(0)
    s[s == 0] = 1
    return (X - X.mean(0)) / s


def row(task, ours_t, ref_t, ours_score, ref_score, target):
    ratio = ours_t / ref_t
    ROWS.append((task, ours_t, ref_t, ratio, ours_score, ref_score, target))
    print(f"{task:50s} ours {ours_t:8.3f}s  sklearn {ref_t:8.3f}s  ratio {ratio:5.2f}  "
          f"score {ours_score:.4f} vs {ref_score:.4f}  (target {target})", flush=True)


def latency(model, x, n=2000, method="predict"):
    f = getattr(model, method)
    f(x)
    best = np.inf
    for _ in range(3):
        t = time.process_time()
        for _ in range(n):
            f(x)
        best = min(best, (time.process_time() - t) / n * 1e6)
    return best


def pegasos_parity():
    """5-fold CV accuracy, pegasos (ovr) vs LinearSVC(loss="hinge"), same folds, standardised on the train fold."""
    from core.model_selection import StratifiedKFold

    def digits600():
        Xd, yd = datasets.load_digits(return_X_y=True)
        idx = np.random.default_rng(0).permutation(len(yd))[:600]
        return Xd[idx], yd[idx]

    data = {
        "iris": lambda: datasets.load_iris(return_X_y=True),
        "wine": lambda: datasets.load_wine(return_X_y=True),
        "breast_cancer": lambda: datasets.load_breast_cancer(return_X_y=True),
        "digits600": digits600,
    }
    print("\n| dataset | C | pegasos (ovr) | LinearSVC(loss=hinge) | diff | prediction agreement |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, load in data.items():
        X, y = load()
        for C in (0.1, 1.0, 10.0):
            a, b, agree = [], [], []
            for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
                mu, sd = X[tr].mean(0), X[tr].std(0)
                sd[sd == 0] = 1.0
                Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
                ours = SVMClassifier(kernel="linear", solver="pegasos", multi_class="ovr", C=C, random_state=0)
                ours.fit(Xtr, y[tr])
                ref = LinearSVC(loss="hinge", C=C, max_iter=100000).fit(Xtr, y[tr])
                a.append(ours.score(Xte, y[te]))
                b.append(ref.score(Xte, y[te]))
                agree.append(np.mean(ours.predict(Xte) == ref.predict(Xte)))
            print(f"| {name} | {C:g} | {np.mean(a):.4f} | {np.mean(b):.4f} | {100 * (np.mean(a) - np.mean(b)):+.2f} pp "
                  f"| {np.mean(agree):.4f} |", flush=True)


def main():
    rng = np.random.default_rng(0)
    # --- SVC rbf on digits -------------------------------------------------------------------
    X, y = datasets.load_digits(return_X_y=True)
    X = std(X)
    t_o, m_o = timed(lambda: SVMClassifier().fit(X, y), 2)
    t_r, m_r = timed(lambda: SVC().fit(X, y), 2)
    row("SVC rbf fit, digits 1797x64 (ovo, 45 problems)", t_o, t_r, m_o.score(X, y), m_r.score(X, y), "<= 3x")
    svc_digits = m_o
    t_o, m_o = timed(lambda: SVMClassifier(probability=True, random_state=0).fit(X, y))
    t_r, m_r = timed(lambda: SVC(probability=True, random_state=0).fit(X, y))
    row("SVC rbf probability=True fit, digits", t_o, t_r, m_o.score(X, y), m_r.score(X, y), "-")

    # --- SVC rbf on 10,000 x 20 ------------------------------------------------------------------
    n_big = 4000 if QUICK else 10000
    Xb, yb = datasets.make_classification(n_samples=n_big, n_features=20, n_informative=10, random_state=0)
    Xb = std(Xb)
    t_o, m_o = timed(lambda: SVMClassifier().fit(Xb, yb))
    t_r, m_r = timed(lambda: SVC().fit(Xb, yb))
    row(f"SVC rbf fit, synthetic {n_big}x20 binary", t_o, t_r, m_o.score(Xb, yb), m_r.score(Xb, yb), "<= 3x")
    print(f"   iterations ours {m_o.n_iter_.sum()} libsvm {m_r.n_iter_.sum()}, SVs {m_o.support_.size} / "
          f"{m_r.support_.size}", flush=True)

    # --- Pegasos vs LinearSVC on 100,000 x 50 -------------------------------------------------------
    n_lin = 20000 if QUICK else 100000
    Xl, yl = datasets.make_classification(n_samples=n_lin, n_features=50, n_informative=20, random_state=1)
    Xl = std(Xl)
    tr = np.arange(n_lin) % 5 != 0
    peg_model = SVMClassifier(kernel="linear", solver="pegasos", random_state=0)
    t_o, m_o = timed(lambda: peg_model.fit(Xl[tr], yl[tr]))
    t_r, m_r = timed(lambda: LinearSVC().fit(Xl[tr], yl[tr]))
    row(f"linear SVM fit, {n_lin}x50: pegasos vs LinearSVC", t_o, t_r, m_o.score(Xl[~tr], yl[~tr]),
        m_r.score(Xl[~tr], yl[~tr]), "<= 2x")
    peg = m_o
    yb_l = np.where(yl[tr] == m_o.classes_[1], 1.0, -1.0)

    def hinge_objective(w, b):  # 1/2 (||w||^2 + b^2) + C sum_i hinge_i, C = 1 (the objective both minimise)
        return 0.5 * (w @ w + b * b) + np.maximum(0.0, 1.0 - yb_l * (Xl[tr] @ w + b)).sum()

    t_h, m_h = timed(lambda: LinearSVC(loss="hinge").fit(Xl[tr], yl[tr]))
    print(f"   hinge objective: pegasos+refinement {hinge_objective(m_o.coef_[0], m_o.intercept_[0]):.4f}, "
          f"LinearSVC(loss='hinge') {hinge_objective(m_h.coef_[0], m_h.intercept_[0]):.4f} ({t_h:.3f}s, "
          f"held-out acc {m_h.score(Xl[~tr], yl[~tr]):.4f})", flush=True)

    # --- GP with hyperparameter optimisation on 2,000 points -----------------------------------------
    n_gp = 800 if QUICK else 2000
    Xg = rng.uniform(-3, 3, size=(n_gp, 3))
    yg = np.sin(Xg[:, 0]) * np.cos(Xg[:, 1]) + 0.3 * Xg[:, 2] + 0.1 * rng.normal(size=n_gp)
    gp_model = GaussianProcessRegressor(kernel="constant*rbf + white", normalize_y=True)
    t_o, m_o = timed(lambda: gp_model.fit(Xg, yg))
    t_r, m_r = timed(lambda: SKGP(kernel=skk.ConstantKernel() * skk.RBF() + skk.WhiteKernel(),
                                  normalize_y=True).fit(Xg, yg))
    row(f"GP fit + L-BFGS-B evidence maximisation, {n_gp}x3", t_o, t_r, m_o.log_marginal_likelihood_value_,
        m_r.log_marginal_likelihood_value_, "<= 2x")
    gp = m_o

    # --- single-row predict latency ------------------------------------------------------------------
    Xd, yd = datasets.load_diabetes(return_X_y=True)
    Xd = std(Xd)
    svr = SVMRegressor().fit(Xd, yd)
    krr = KernelRidgeRegression(kernel="rbf").fit(Xd, yd)
    kp = KernelPerceptron(random_state=0).fit(X, y)
    svc_prob = SVMClassifier(probability=True, random_state=0).fit(X, y)
    refs = {
        "svm_classifier (rbf, digits, 45 ovo)": (svc_digits, X[:1], SVC().fit(X, y)),
        "svm_classifier decision_function (digits, ovr shape)": (svc_digits, X[:1], SVC().fit(X, y)),
        "svm_classifier predict_proba (digits)": (svc_prob, X[:1], SVC(probability=True, random_state=0).fit(X, y)),
        "svm_classifier pegasos (50 features)": (peg, Xl[:1], LinearSVC().fit(Xl[:5000], yl[:5000])),
        "svm_regressor (rbf, diabetes)": (svr, Xd[:1], SVR().fit(Xd, yd)),
        "kernel_ridge_regression (rbf, diabetes)": (krr, Xd[:1], KernelRidge(kernel="rbf").fit(Xd, yd)),
        f"gaussian_process_regressor ({n_gp} train points)": (gp, Xg[:1], m_r),
        "kernel_perceptron (rbf, digits)": (kp, X[:1], Perceptron().fit(X, y)),
    }
    lat_rows = []
    for name, (model, x, ref) in refs.items():
        method = next((m for m in ("predict_proba", "decision_function") if m in name), "predict")
        us = latency(model, x, method=method)
        ref_us = latency(ref, x, method=method) if ref is not None else float("nan")
        lat_rows.append((name, us, ref_us))
        print(f"single-row predict {name:45s} {us:8.1f} us   (sklearn {ref_us:8.1f} us)", flush=True)

    print("\n| task | ours (s) | sklearn (s) | ratio | score ours | score sklearn | target |")
    print("|---|---|---|---|---|---|---|")
    for task, a, b, r, sa, sb, tg in ROWS:
        print(f"| {task} | {a:.3f} | {b:.3f} | {r:.2f} | {sa:.4f} | {sb:.4f} | {tg} |")
    print("\n| single-row predict | ours (us) | sklearn (us) |")
    print("|---|---|---|")
    for name, us, ref_us in lat_rows:
        print(f"| {name} | {us:.1f} | {ref_us:.1f} |")


if __name__ == "__main__":
    main()
    if PARITY:
        pegasos_parity()
