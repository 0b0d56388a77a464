"""Gaussian-process covariance kernels with hyperparameters: theta = log(hyperparameters), analytic dK/dtheta.

They use the kernel expression language of ``core.kernels`` with their own leaves (rbf, constant, white,
linear, poly); :class:`GPKernelSpec` validates such values, :func:`build_gp_kernel` builds the tree.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..kernels import KernelSpec, parse_kernel, squared_euclidean
from ..params import ParamError

__all__ = [
    "GP_KERNELS",
    "GP_LEAF_PARAMS",
    "GPKernelSpec",
    "HyperKernel",
    "GPConstant",
    "GPWhite",
    "GPRBF",
    "GPLinear",
    "GPPoly",
    "GPSum",
    "GPProduct",
    "build_gp_kernel",
]

GP_KERNELS = ("rbf", "constant", "white", "linear", "poly")
GP_LEAF_PARAMS = {
    "rbf": ("length_scale", "length_scale_bounds"),
    "constant": ("constant_value", "constant_value_bounds"),
    "white": ("noise_level", "noise_level_bounds"),
    "linear": ("sigma_0", "sigma_0_bounds"),
    "poly": ("sigma_0", "sigma_0_bounds", "degree"),
}
_DEFAULT_BOUNDS = (1e-5, 1e5)


class HyperKernel:
    """A kernel with positive hyperparameters optimised in log space.

    ``theta`` (log of the free hyperparameters), ``bounds`` (log bounds, shape (p, 2)),
    ``with_theta(theta)`` (a copy), ``k(X, Y=None, eval_gradient=False)`` returning ``K`` or
    ``(K, dK)`` with ``dK[:, :, q] = dK / dtheta_q`` (only when ``Y`` is None), ``diag(X)``.
    """

    def _free(self) -> list[tuple[str, float, tuple]]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def theta(self) -> np.ndarray:
        vals = [np.log(np.atleast_1d(v)) for _, v, _ in self._free()]
        return np.concatenate(vals) if vals else np.zeros(0)

    @property
    def bounds(self) -> np.ndarray:
        out = []
        for _, v, b in self._free():
            out.extend([np.log(b)] * np.atleast_1d(v).size)
        return np.array(out).reshape(-1, 2)

    @property
    def n_dims(self) -> int:
        return self.theta.size

    def __add__(self, other):
        return GPSum([self, other])

    def __mul__(self, other):
        if isinstance(other, numbers.Real):
            return GPProduct([GPConstant(float(other)), self])
        return GPProduct([self, other])

    __rmul__ = __mul__

    def __eq__(self, other):
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self):
        return id(self)


class _Leaf(HyperKernel):
    param = ""

    def __init__(self, value=1.0, bounds=_DEFAULT_BOUNDS):
        self.value = np.asarray(value, dtype=np.float64) if np.ndim(value) else float(value)
        self.fixed = bounds == "fixed"
        self.bounds_ = None if self.fixed else (float(bounds[0]), float(bounds[1]))

    def _free(self):
        return [] if self.fixed else [(self.param, self.value, self.bounds_)]

    def with_theta(self, theta):
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        if not self.fixed:
            v = np.exp(np.asarray(theta, dtype=np.float64))
            new.value = v if np.ndim(self.value) else float(v[0])
        return new

    def _grad_shape(self, n):
        return np.zeros((n, n, 0))

    def get_params(self) -> dict:
        v = self.value.tolist() if np.ndim(self.value) else self.value
        return {self.param: v}

    def __repr__(self):
        v = np.round(self.value, 4).tolist() if np.ndim(self.value) else float(f"{self.value:.4g}")
        return f"{self.name}({self.param}={v})"


class GPConstant(_Leaf):
    """k = c (an amplitude when multiplied with another kernel); theta = log c."""

    name, param = "constant", "constant_value"

    def __call__(self, X, Y=None, eval_gradient=False):
        ny = X.shape[0] if Y is None else Y.shape[0]
        K = np.full((X.shape[0], ny), self.value)
        if not eval_gradient:
            return K
        dK = K[:, :, None].copy() if not self.fixed else np.zeros((X.shape[0], ny, 0))
        return K, dK

    def diag(self, X):
        return np.full(X.shape[0], self.value)


class GPWhite(_Leaf):
    """k(x, x') = noise_level [x is x'] (only on the training Gram matrix and its diagonal)."""

    name, param = "white", "noise_level"

    def __call__(self, X, Y=None, eval_gradient=False):
        if Y is None:
            K = self.value * np.eye(X.shape[0])
        else:
            K = np.zeros((X.shape[0], Y.shape[0]))
        if not eval_gradient:
            return K
        dK = K[:, :, None].copy() if not self.fixed else np.zeros(K.shape + (0,))
        return K, dK

    def diag(self, X):
        return np.full(X.shape[0], self.value)


class GPRBF(_Leaf):
    """k = exp(-||x - x'||^2 / (2 l^2)); l scalar or one per feature (ARD).

    dK/dlog l = K * ||x - x'||^2 / l^2 (per feature for ARD: K * (x_d - x'_d)^2 / l_d^2).
    """

    name, param = "rbf", "length_scale"

    def __call__(self, X, Y=None, eval_gradient=False):
        ls = self.value
        Xs = X / ls
        Ys = Xs if Y is None else Y / ls
        D = squared_euclidean(Xs, Ys) if Y is not None else squared_euclidean(Xs, Xs)
        if Y is None:
            np.fill_diagonal(D, 0.0)
        K = np.exp(-0.5 * D)
        if not eval_gradient:
            return K
        if self.fixed:
            return K, np.zeros(K.shape + (0,))
        if np.ndim(ls) == 0:
            return K, (K * D)[:, :, None]
        diff2 = (Xs[:, None, :] - Xs[None, :, :]) ** 2
        return K, diff2 * K[:, :, None]

    def diag(self, X):
        return np.ones(X.shape[0])


class GPLinear(_Leaf):
    """Dot-product kernel k = sigma_0^2 + <x, x'>; dK/dlog sigma_0 = 2 sigma_0^2."""

    name, param = "linear", "sigma_0"

    def __call__(self, X, Y=None, eval_gradient=False):
        Y = X if Y is None else Y
        K = X @ Y.T + self.value**2
        if not eval_gradient:
            return K
        if self.fixed:
            return K, np.zeros(K.shape + (0,))
        return K, np.full(K.shape + (1,), 2.0 * self.value**2)

    def diag(self, X):
        return np.einsum("ij,ij->i", X, X) + self.value**2


class GPPoly(_Leaf):
    """k = (sigma_0^2 + <x, x'>)^degree; dK/dlog sigma_0 = degree (.)^(degree-1) 2 sigma_0^2."""

    name, param = "poly", "sigma_0"

    def __init__(self, value=1.0, bounds=_DEFAULT_BOUNDS, degree=2):
        super().__init__(value, bounds)
        self.degree = int(degree)

    def __call__(self, X, Y=None, eval_gradient=False):
        Y = X if Y is None else Y
        base = X @ Y.T + self.value**2
        K = base**self.degree
        if not eval_gradient:
            return K
        if self.fixed:
            return K, np.zeros(K.shape + (0,))
        g = self.degree * base ** (self.degree - 1) * (2.0 * self.value**2)
        return K, g[:, :, None]

    def diag(self, X):
        return (np.einsum("ij,ij->i", X, X) + self.value**2) ** self.degree

    def get_params(self):
        return {**super().get_params(), "degree": self.degree}

    def __repr__(self):
        return f"poly(sigma_0={self.value:.4g}, degree={self.degree})"


class _Combo(HyperKernel):
    def __init__(self, parts):
        self.parts = list(parts)

    def _free(self):
        return [f for p in self.parts for f in p._free()]

    def with_theta(self, theta):
        out, pos = [], 0
        for p in self.parts:
            k = p.n_dims
            out.append(p.with_theta(theta[pos : pos + k]))
            pos += k
        return type(self)(out)

    def get_params(self) -> dict:
        return {"op": self.op, "parts": [p.get_params() | {"name": p.name} if isinstance(p, _Leaf)
                                         else p.get_params() for p in self.parts]}


class GPSum(_Combo):
    op = "sum"

    def __call__(self, X, Y=None, eval_gradient=False):
        if not eval_gradient:
            K = self.parts[0](X, Y)
            for p in self.parts[1:]:
                K = K + p(X, Y)
            return K
        Ks, dKs = zip(*(p(X, Y, eval_gradient=True) for p in self.parts), strict=True)
        return sum(Ks[1:], Ks[0]), np.concatenate(dKs, axis=2)

    def diag(self, X):
        return sum((p.diag(X) for p in self.parts[1:]), self.parts[0].diag(X))

    def __repr__(self):
        return " + ".join(map(repr, self.parts))


class GPProduct(_Combo):
    op = "product"

    def __call__(self, X, Y=None, eval_gradient=False):
        if not eval_gradient:
            K = self.parts[0](X, Y)
            for p in self.parts[1:]:
                K = K * p(X, Y)
            return K
        Ks, dKs = zip(*(p(X, Y, eval_gradient=True) for p in self.parts), strict=True)
        K = Ks[0]
        for k in Ks[1:]:
            K = K * k
        grads = []
        for q, dK in enumerate(dKs):
            if dK.shape[2] == 0:
                continue
            other = np.ones_like(K)
            for r, k in enumerate(Ks):
                if r != q:
                    other = other * k
            grads.append(dK * other[:, :, None])
        dK = np.concatenate(grads, axis=2) if grads else np.zeros(K.shape + (0,))
        return K, dK

    def diag(self, X):
        d = self.parts[0].diag(X)
        for p in self.parts[1:]:
            d = d * p.diag(X)
        return d

    def __repr__(self):
        return " * ".join(f"({p!r})" if isinstance(p, GPSum) else repr(p) for p in self.parts)


class GPKernelSpec(KernelSpec):
    """Kernel spec of Gaussian processes: leaves rbf, constant, white, linear, poly."""

    def __init__(self, default="constant*rbf + white", **kw):
        kw.setdefault(
            "doc",
            "GP covariance: an expression over rbf, constant, white, linear, poly with '+', '*' and "
            "positive numbers (initial amplitudes), e.g. 'constant*rbf + white', or an object "
            "{'name': 'rbf', 'length_scale': 2.0, 'length_scale_bounds': [1e-2, 1e3] | 'fixed'}, "
            "{'sum': [...]}, {'product': [...]}.",
        )
        super().__init__(default, leaves=GP_KERNELS, leaf_params=GP_LEAF_PARAMS, **kw)

    def _validate(self, value, name):
        value = super()._validate(value, name)
        tree = self.parse(value)
        if _has_cosine(tree):
            raise ParamError(name, "cosine normalisation is not available for Gaussian-process kernels")
        return value

    def _invalid(self):
        return ["__not_a_kernel__", "rbf+", "sigmoid", 12345, {"name": "rbf", "gamma": 1.0}]


def _has_cosine(node) -> bool:
    if "cosine" in node:
        return True
    if "sum" in node or "product" in node:
        return any(_has_cosine(p) for p in node.get("sum", node.get("product", [])))
    if "scale" in node:
        return _has_cosine(node["kernel"])
    return False


def build_gp_kernel(spec, n_features: int | None = None) -> HyperKernel:
    """A :class:`HyperKernel` from a GP kernel expression / object (see :class:`GPKernelSpec`)."""
    if isinstance(spec, HyperKernel):
        return spec
    tree = parse_kernel(spec, GP_KERNELS, GP_LEAF_PARAMS)
    return _build_gp(tree, n_features)


def _build_gp(node, n_features):
    if "name" in node:
        name = node["name"]
        if name == "rbf":
            ls = node.get("length_scale", 1.0)
            if isinstance(ls, list) and n_features is not None and len(ls) != n_features:
                raise ValueError(f"rbf length_scale has {len(ls)} values but X has {n_features} features")
            return GPRBF(ls, node.get("length_scale_bounds", _DEFAULT_BOUNDS))
        if name == "constant":
            return GPConstant(
                node.get("constant_value", 1.0), node.get("constant_value_bounds", _DEFAULT_BOUNDS)
            )
        if name == "white":
            return GPWhite(
                node.get("noise_level", 1.0), node.get("noise_level_bounds", _DEFAULT_BOUNDS)
            )
        if name == "linear":
            return GPLinear(node.get("sigma_0", 1.0), node.get("sigma_0_bounds", _DEFAULT_BOUNDS))
        return GPPoly(node.get("sigma_0", 1.0), node.get("sigma_0_bounds", _DEFAULT_BOUNDS),
                      node.get("degree", 2))
    if "sum" in node:
        return GPSum([_build_gp(p, n_features) for p in node["sum"]])
    if "product" in node:
        return GPProduct([_build_gp(p, n_features) for p in node["product"]])
    if "scale" in node:
        return GPProduct([GPConstant(node["scale"]), _build_gp(node["kernel"], n_features)])
    raise ValueError("cosine normalisation is not available for Gaussian-process kernels")
