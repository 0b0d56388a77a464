"""Kernel objects: the evaluable tree a kernel expression builds (``K = kernel(X, Y)``, ``kernel.diag(X)``).

Sums, products and positive scalings of valid kernels are valid kernels
([Passerini §12.4, §12.3.1]; [Colombo §5.1]); the cosine normalisation
k~(x, x') = k(x, x') / sqrt(k(x, x) k(x', x')) is one too.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np

from .expression import parse_kernel
from .functions import KERNELS, PSD_KERNELS, gram, kernel_diag, rbf_gram, resolve_gamma

__all__ = [
    "Kernel",
    "BaseKernel",
    "SumKernel",
    "ProductKernel",
    "ScaledKernel",
    "CosineKernel",
    "build_kernel",
    "kernel_matrix",
]


def kernel_matrix(X, Y=None, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0, normalize=False):
    """Gram matrix K[i, j] = k(X[i], Y[j]); ``normalize`` applies cosine normalisation.

    ``kernel`` may also be a composite expression or a :class:`Kernel` object
    (then ``gamma``/``degree``/``coef0`` are the defaults of its leaves).
    """
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    if isinstance(kernel, Kernel) or not (isinstance(kernel, str) and kernel in KERNELS):
        k = kernel if isinstance(kernel, Kernel) else build_kernel(
            kernel, gamma=gamma, degree=degree, coef0=coef0
        )
        k = k.resolved(X)
        if normalize:
            k = CosineKernel(k)
        return k(X, None if Y is X else Y)
    K = gram(X, Y, kernel, gamma, degree, coef0)
    if normalize:
        dx = kernel_diag(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        dy = dx if Y is X else kernel_diag(Y, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        denom = np.sqrt(np.abs(np.outer(dx, dy)))
        K = np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)
    return K


# ---------------------------------------------------------------------------------------------
# Kernel expressions: parsing (string or structured object) into a canonical tree


class Kernel:
    """A kernel function: ``K = k(X, Y)`` (``Y=None``: Gram matrix of X) and ``k.diag(X)``."""

    psd = True

    def __call__(self, X, Y=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def resolved(self, X):
        """A copy whose data-dependent parameters (gamma 'scale'/'auto') are fixed from X."""
        return self

    def prepare(self, Y):
        """Per-Y quantities reused by :meth:`cross` (e.g. squared norms of support vectors)."""
        return None

    def cross(self, X, Y, cache=None):
        """k(X, Y) using ``cache = self.prepare(Y)`` when given (fast repeated predictions)."""
        return self(X, Y)

    def __add__(self, other):
        return SumKernel([self, other])

    def __mul__(self, other):
        if isinstance(other, numbers.Real):
            return ScaledKernel(float(other), self)
        return ProductKernel([self, other])

    __rmul__ = __mul__

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return id(self)


class BaseKernel(Kernel):
    """One of linear, poly, rbf, sigmoid, laplacian with its own gamma, degree, coef0."""

    def __init__(self, name="rbf", gamma=1.0, degree=3, coef0=0.0):
        if name not in KERNELS:
            raise ValueError(f"unknown kernel {name!r}; expected one of {KERNELS}")
        self.name, self.gamma, self.degree, self.coef0 = name, gamma, degree, coef0
        self.psd = name in PSD_KERNELS and not (name == "poly" and coef0 < 0)

    def resolved(self, X):
        if self.name == "linear" or isinstance(self.gamma, numbers.Real):
            return self
        return BaseKernel(self.name, resolve_gamma(self.gamma, X), self.degree, self.coef0)

    def __call__(self, X, Y=None):
        Y = X if Y is None else Y
        return gram(X, Y, self.name, self.gamma, self.degree, self.coef0)

    def diag(self, X):
        return kernel_diag(X, kernel=self.name, gamma=self.gamma, degree=self.degree, coef0=self.coef0)

    def prepare(self, Y):
        if self.name == "rbf":
            return np.einsum("ij,ij->i", Y, Y) * self.gamma
        return None

    def cross(self, X, Y, cache=None):
        if self.name == "rbf" and cache is not None:
            return rbf_gram(X, Y, self.gamma, yy=cache)
        return self(X, Y)

    def row_kernel(self):
        """(name, gamma, degree, coef0) when this is a plain base kernel (fast row paths)."""
        return self.name, self.gamma, self.degree, self.coef0

    def __repr__(self):
        if self.name == "linear":
            return "linear"
        if self.name == "poly":
            return f"poly(gamma={self.gamma!r}, degree={self.degree}, coef0={self.coef0!r})"
        if self.name == "sigmoid":
            return f"sigmoid(gamma={self.gamma!r}, coef0={self.coef0!r})"
        return f"{self.name}(gamma={self.gamma!r})"


class SumKernel(Kernel):
    def __init__(self, parts):
        self.parts = list(parts)
        self.psd = all(p.psd for p in self.parts)

    def resolved(self, X):
        return SumKernel([p.resolved(X) for p in self.parts])

    def __call__(self, X, Y=None):
        K = self.parts[0](X, Y)
        for p in self.parts[1:]:
            K = K + p(X, Y)
        return K

    def diag(self, X):
        return sum((p.diag(X) for p in self.parts[1:]), self.parts[0].diag(X))

    def __repr__(self):
        return " + ".join(map(repr, self.parts))


class ProductKernel(Kernel):
    def __init__(self, parts):
        self.parts = list(parts)
        self.psd = all(p.psd for p in self.parts)

    def resolved(self, X):
        return ProductKernel([p.resolved(X) for p in self.parts])

    def __call__(self, X, Y=None):
        K = self.parts[0](X, Y)
        for p in self.parts[1:]:
            K = K * p(X, Y)
        return K

    def diag(self, X):
        d = self.parts[0].diag(X)
        for p in self.parts[1:]:
            d = d * p.diag(X)
        return d

    def __repr__(self):
        return " * ".join(f"({p!r})" if isinstance(p, SumKernel) else repr(p) for p in self.parts)


class ScaledKernel(Kernel):
    def __init__(self, scale, kernel):
        if not scale > 0:
            raise ValueError("kernel scale must be positive")
        self.scale, self.kernel = float(scale), kernel
        self.psd = kernel.psd

    def resolved(self, X):
        return ScaledKernel(self.scale, self.kernel.resolved(X))

    def __call__(self, X, Y=None):
        K = self.kernel(X, Y)
        K *= self.scale
        return K

    def diag(self, X):
        return self.scale * self.kernel.diag(X)

    def __repr__(self):
        return f"{self.scale:g}*({self.kernel!r})"


class CosineKernel(Kernel):
    """k~(x, x') = k(x, x') / sqrt(k(x, x) k(x', x')); k~(x, x) = 1 ([Passerini §12.4, eq. 12.15])."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.psd = kernel.psd

    def resolved(self, X):
        return CosineKernel(self.kernel.resolved(X))

    def __call__(self, X, Y=None):
        K = self.kernel(X, Y)
        dx = self.kernel.diag(X)
        dy = dx if Y is None else self.kernel.diag(Y)
        denom = np.sqrt(np.abs(np.outer(dx, dy)))
        return np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)

    def diag(self, X):
        d = self.kernel.diag(X)
        return (np.abs(d) > 0).astype(np.float64) * np.sign(d)

    def __repr__(self):
        return f"cosine({self.kernel!r})"


def build_kernel(spec, *, gamma="scale", degree=3, coef0=0.0) -> Kernel:
    """A :class:`Kernel` from a name, expression, object or canonical tree.

    ``gamma``, ``degree`` and ``coef0`` are the defaults for leaves that do not set
    their own (the estimator-level parameters, as in scikit-learn).
    """
    if isinstance(spec, Kernel):
        return spec
    tree = parse_kernel(spec) if not (isinstance(spec, Mapping) and _is_canonical(spec)) else spec
    return _build(tree, gamma, degree, coef0)


def _is_canonical(node) -> bool:
    return isinstance(node, Mapping) and bool(set(node) & {"name", "sum", "product", "scale", "cosine"})


def _build(node, gamma, degree, coef0) -> Kernel:
    if "name" in node:
        return BaseKernel(
            node["name"],
            node.get("gamma", gamma),
            int(node.get("degree", degree)),
            float(node.get("coef0", coef0)),
        )
    if "sum" in node:
        return SumKernel([_build(p, gamma, degree, coef0) for p in node["sum"]])
    if "product" in node:
        return ProductKernel([_build(p, gamma, degree, coef0) for p in node["product"]])
    if "scale" in node:
        return ScaledKernel(node["scale"], _build(node["kernel"], gamma, degree, coef0))
    return CosineKernel(_build(node["cosine"], gamma, degree, coef0))


# ---------------------------------------------------------------------------------------------
