"""Unsupervised family benchmark: Orchard vs scikit-learn in the same run (ratio = ours / sklearn).

    python bench/unsupervised.py            # all cases
    python bench/unsupervised.py gmm pca    # some cases

Cases (targets from the unsupervised brief):
  gmm       GaussianMixture full covariance, 10 components, 100,000 x 10, 20 EM steps (tol=0)   <= 1.5x
  pca       PCA 100,000 x 100, 10 components, default solver                                     <= 1.2x
  ward      agglomerative ward on 10,000 points (peak traced memory vs one n^2 float64 matrix)  <= 2x
  silhouette  silhouette_score on 20,000 points, 6 clusters (bounded-memory chunks)             <= 1.5x
  kmeans    KMeans k=10 on 100,000 x 10, n_init=3                                                (report)
Each timing is the best of a few runs (wall clock; 1 for gmm and ward);
the machine is shared, so ratios are noisy.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPEAT = 2


def best(fn, repeat=REPEAT):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def compare(ours_fn, ref_fn, repeat=REPEAT):
    """Best times of ours and the reference, run ALTERNATELY so load swings hit both."""
    a, b = [], []
    for _ in range(repeat):
        a.append(best(ours_fn, 1))
        b.append(best(ref_fn, 1))
    return min(a), min(b)


def peak_mb(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def blobs(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    C = rng.normal(scale=4.0, size=(k, d))
    lab = rng.integers(0, k, size=n)
    return C[lab] + rng.normal(size=(n, d)), lab


def case_gmm():
    from sklearn.mixture import GaussianMixture as Sk

    from core.mixture.gaussian_mixture import GaussianMixture

    X, _ = blobs(100_000, 10, 10)
    kw = dict(n_components=10, covariance_type="full", max_iter=20, tol=0.0, init_params="random",
              random_state=0)
    ours, ref = compare(
        lambda: GaussianMixture(**kw).fit(X),
        lambda: Sk(**kw).fit(X),
        repeat=2,
    )
    return "gmm full k=10, 100000x10, 20 EM steps", ours, ref, 1.5, ""


def case_pca():
    from sklearn.decomposition import PCA as Sk

    from core.decomposition.pca import PCA

    mix = np.random.default_rng(1).normal(size=(100, 100))
    X = np.random.default_rng(0).normal(size=(100_000, 100)) @ mix
    ours, ref = compare(
        lambda: PCA(n_components=10).fit(X).transform(X),
        lambda: Sk(n_components=10).fit(X).transform(X),
        repeat=5,
    )
    return "pca 100000x100 -> 10 (fit+transform)", ours, ref, 1.2, ""


def case_ward():
    from sklearn.cluster import AgglomerativeClustering as Sk

    from core.cluster.agglomerative import AgglomerativeClustering

    n = 10_000
    X, _ = blobs(n, 10, 8)
    ours, ref = compare(
        lambda: AgglomerativeClustering(n_clusters=8).fit(X),
        lambda: Sk(n_clusters=8).fit(X),
        repeat=1,
    )
    mb = peak_mb(lambda: AgglomerativeClustering(n_clusters=8).fit(X))
    note = f"peak traced memory {mb:.0f} MB = {mb / (n * n * 8 / 2**20):.2f} x one n^2 float64 matrix"
    return "agglomerative ward, 10000 points", ours, ref, 2.0, note


def case_silhouette():
    from sklearn.metrics import silhouette_score as sk_sil

    from core.metrics.clustering import silhouette_score

    X, lab = blobs(20_000, 10, 6)
    ours, ref = compare(
        lambda: silhouette_score(X, lab),
        lambda: sk_sil(X, lab),
        repeat=3,
    )
    mb = peak_mb(lambda: silhouette_score(X, lab))
    diff = abs(silhouette_score(X, lab) - sk_sil(X, lab))
    return "silhouette 20000 points, 6 clusters", ours, ref, 1.5, f"peak {mb:.0f} MB; |diff| {diff:.1e}"


def case_kmeans():
    from sklearn.cluster import KMeans as Sk

    from core.cluster.kmeans import KMeans

    X, _ = blobs(100_000, 10, 10)
    a = KMeans(n_clusters=10, n_init=3, random_state=0)
    b = Sk(n_clusters=10, n_init=3, random_state=0)
    ours, ref = compare(
        lambda: a.fit(X),
        lambda: b.fit(X),
        repeat=3,
    )
    return "kmeans k=10, 100000x10, n_init=3", ours, ref, None, f"inertia ratio {a.inertia_ / b.inertia_:.4f}"


CASES = {"gmm": case_gmm, "pca": case_pca, "ward": case_ward, "silhouette": case_silhouette,
         "kmeans": case_kmeans}


def main(argv):
    names = argv or list(CASES)
    print("| case | ours (s) | scikit-learn (s) | ratio | target | note |")
    print("|---|---|---|---|---|---|")
    for name in names:
        label, ours, ref, target, note = CASES[name]()
        tgt = f"<= {target}x" if target else "-"
        print(f"| {label} | {ours:.3f} | {ref:.3f} | {ours / ref:.2f} | {tgt} | {note} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
