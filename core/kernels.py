"""Kernel functions shared by SVMs, kernel ridge, the kernel perceptron,
Gaussian processes and kernel PCA.

k(x, x') for rows of X and Y, computed for whole matrices at once:

* linear      k = <x, x'>
* poly        k = (gamma <x, x'> + coef0)^degree      ([Passerini §12]: homogeneous coef0=0, inhomogeneous 1)
* rbf         k = exp(-gamma ||x - x'||^2)             (gamma = 1 / (2 sigma^2))
* sigmoid     k = tanh(gamma <x, x'> + coef0)          (not PSD in general)
* laplacian   k = exp(-gamma ||x - x'||_1)
* cosine normalisation k~(x, x') = k(x, x') / sqrt(k(x, x) k(x', x'))

Sums, products and positive scalings of valid kernels are valid kernels
([Passerini §12.4, §12.3.1]; [Colombo §5.1]).

Composite kernels
-----------------
Users ask for a kernel with one JSON value (``kernel`` parameter), either a
string expression or a structured object (docs/decisions/kernels.md)::

    "rbf"                       a base kernel (gamma/degree/coef0 from the estimator's params)
    "rbf+linear"  "rbf*poly"    sums and products ('*' binds tighter than '+')
    "0.5*rbf + 2*linear"        positive scalings
    "cosine(poly)"              cosine normalisation of any sub-expression
    {"name": "rbf", "gamma": 0.1}                 a base kernel with its own parameters
    {"sum": [k1, k2, ...]}  {"product": [k1, ...]}  {"scale": 2.0, "kernel": k}  {"cosine": k}

:func:`parse_kernel` turns either form into a canonical tree of plain dicts;
:func:`build_kernel` turns the tree into a picklable :class:`Kernel` object
(``K = kernel(X, Y)``, ``kernel.diag(X)``); :class:`KernelSpec` is the
hyperparameter spec that validates such values.  Gaussian processes use the
same syntax with their own leaf names (``core.kernel.gp_kernels``).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.spatial.distance import cdist

from .params import ParamError, Spec

__all__ = [
    "KERNELS",
    "PSD_KERNELS",
    "kernel_matrix",
    "kernel_diag",
    "squared_euclidean",
    "resolve_gamma",
    "parse_kernel",
    "kernel_to_string",
    "build_kernel",
    "KernelSpec",
    "Kernel",
    "BaseKernel",
    "SumKernel",
    "ProductKernel",
    "ScaledKernel",
    "CosineKernel",
    "GP_KERNELS",
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

KERNELS = ("linear", "poly", "rbf", "sigmoid", "laplacian")
PSD_KERNELS = ("linear", "poly", "rbf", "laplacian")  # poly: PSD for coef0 >= 0, gamma > 0


def squared_euclidean(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """||x - y||^2 for every pair, via the dot-product expansion, clipped at 0."""
    XX = np.einsum("ij,ij->i", X, X)[:, None]
    YY = np.einsum("ij,ij->i", Y, Y)[None, :]
    D = XX + YY - 2.0 * (X @ Y.T)
    np.maximum(D, 0.0, out=D)
    if X is Y:
        np.fill_diagonal(D, 0.0)
    return D


def resolve_gamma(gamma, X: np.ndarray) -> float:
    """``"scale"`` -> 1 / (n_features * Var(X)) as scikit-learn; ``"auto"`` (or None) -> 1 / n_features."""
    if gamma == "scale":
        var = float(X.var())
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    if gamma == "auto" or gamma is None:
        return 1.0 / X.shape[1]
    return float(gamma)


def _rbf(X, Y, gamma, block=512, yy=None):
    """exp(-gamma ||x - y||^2), computed in row blocks in place (cache-friendly, no big temporaries).

    ``yy`` = gamma * ||y||^2 may be given precomputed (prediction against fixed support vectors)."""
    same = X is Y
    xx = np.einsum("ij,ij->i", X, X) * gamma
    if yy is None:
        yy = xx if same else np.einsum("ij,ij->i", Y, Y) * gamma
    K = np.empty((X.shape[0], Y.shape[0]))
    for s in range(0, X.shape[0], block):
        e = min(s + block, X.shape[0])
        B = K[s:e]
        np.matmul(X[s:e], Y.T, out=B)
        B *= 2.0 * gamma
        B -= xx[s:e, None]
        B -= yy[None, :]
        np.minimum(B, 0.0, out=B)
        if same:
            B[np.arange(e - s), np.arange(s, e)] = 0.0
        np.exp(B, out=B)
    return K


def _base(X, Y, kernel, gamma, degree, coef0):
    if kernel == "linear":
        return X @ Y.T
    if kernel == "poly":
        K = X @ Y.T
        K *= gamma
        K += coef0
        return K**degree
    if kernel == "rbf":
        return _rbf(X, Y, gamma)
    if kernel == "sigmoid":
        K = X @ Y.T
        K *= gamma
        K += coef0
        return np.tanh(K, out=K)
    if kernel == "laplacian":
        return np.exp(-gamma * cdist(X, Y, "cityblock"))
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")


def kernel_diag(X, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0) -> np.ndarray:
    """k(x, x) for each row, without building the matrix."""
    if kernel in ("rbf", "laplacian"):
        return np.ones(X.shape[0])
    sq = np.einsum("ij,ij->i", X, X)
    if kernel == "linear":
        return sq
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * sq + coef0)
    raise ValueError(f"unknown kernel {kernel!r}")


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
    K = _base(X, Y, kernel, gamma, degree, coef0)
    if normalize:
        dx = kernel_diag(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        dy = dx if Y is X else kernel_diag(Y, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        denom = np.sqrt(np.abs(np.outer(dx, dy)))
        K = np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)
    return K


# ---------------------------------------------------------------------------------------------
# Kernel expressions: parsing (string or structured object) into a canonical tree
# ---------------------------------------------------------------------------------------------
# Canonical tree nodes (plain, JSON-ready dicts):
#   {"name": <leaf name>, **leaf params}
#   {"sum": [node, ...]}   {"product": [node, ...]}   {"scale": c, "kernel": node}   {"cosine": node}

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*)|(?P<op>[-+*()]))"
)


class KernelSyntaxError(ValueError):
    """A kernel expression that cannot be parsed."""


def _tokenize(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise KernelSyntaxError(f"unexpected character {text[pos:].strip()[:1]!r} in kernel {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


class _Parser:
    """Recursive descent: expr := term ('+' term)*; term := factor ('*' factor)*;
    factor := NUMBER | NAME | 'cosine' '(' expr ')' | '(' expr ')'."""

    def __init__(self, text: str, leaves: Sequence[str]):
        self.text = text
        self.toks = _tokenize(text)
        self.pos = 0
        self.leaves = tuple(leaves)

    def peek(self):
        return self.toks[self.pos] if self.pos < len(self.toks) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if tok[0] is None or (value is not None and tok[1] != value):
            want = repr(value) if value else "more input"
            raise KernelSyntaxError(f"expected {want} in kernel {self.text!r}")
        self.pos += 1
        return tok

    def parse(self):
        if not self.toks:
            raise KernelSyntaxError("empty kernel expression")
        node = self.expr()
        if self.pos != len(self.toks):
            raise KernelSyntaxError(f"unexpected {self.peek()[1]!r} in kernel {self.text!r}")
        return node

    def expr(self):
        parts = [self.term()]
        while self.peek() == ("op", "+"):
            self.take()
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else {"sum": parts}

    def term(self):
        scale = 1.0
        parts = []
        while True:
            f = self.factor()
            if isinstance(f, float):
                scale *= f
            else:
                parts.append(f)
            if self.peek() == ("op", "*"):
                self.take()
                continue
            break
        if not parts:
            raise KernelSyntaxError(
                f"a term of kernel {self.text!r} is a bare number; scale a kernel: '2*rbf'"
            )
        node = parts[0] if len(parts) == 1 else {"product": parts}
        return node if scale == 1.0 else {"scale": scale, "kernel": node}

    def factor(self):
        kind, val = self.take()
        if kind == "num":
            v = float(val)
            if not v > 0:
                raise KernelSyntaxError(f"kernel scalings must be positive, got {val} in {self.text!r}")
            return v
        if kind == "name":
            low = val.lower()
            if low in ("cosine", "normalize", "normalized"):
                self.take("(")
                inner = self.expr()
                self.take(")")
                return {"cosine": inner}
            if low not in self.leaves:
                raise KernelSyntaxError(
                    f"unknown kernel {val!r} in {self.text!r}; expected one of {', '.join(self.leaves)}"
                )
            return {"name": low}
        if val == "(":
            inner = self.expr()
            self.take(")")
            return inner
        raise KernelSyntaxError(f"unexpected {val!r} in kernel {self.text!r}")


def parse_kernel(
    value, leaves: Sequence[str] = KERNELS, leaf_params: Mapping[str, Sequence[str]] | None = None
):
    """A kernel given as a string expression or a structured object -> canonical tree.

    ``leaves`` are the allowed base names; ``leaf_params`` maps a leaf name to the
    parameter names an object leaf may carry.  Raises ``KernelSyntaxError``.
    """
    if leaf_params is None:
        leaf_params = _SVM_LEAF_PARAMS
    if isinstance(value, str):
        return _Parser(value, leaves).parse()
    if isinstance(value, Mapping):
        return _parse_obj(value, tuple(leaves), leaf_params)
    raise KernelSyntaxError(f"a kernel is a string expression or an object, got {value!r}")


_SVM_LEAF_PARAMS = {
    "linear": (),
    "poly": ("gamma", "degree", "coef0"),
    "rbf": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "laplacian": ("gamma",),
}


def _parse_obj(obj, leaves, leaf_params):
    keys = set(obj)
    if "name" in keys:
        name = obj["name"]
        if not isinstance(name, str) or name.lower() not in leaves:
            raise KernelSyntaxError(f"unknown kernel {name!r}; expected one of {', '.join(leaves)}")
        name = name.lower()
        allowed = set(leaf_params.get(name, ()))
        extra = sorted(keys - {"name"} - allowed)
        if extra:
            raise KernelSyntaxError(
                f"kernel {name!r} has no parameter(s) {extra}; allowed: {sorted(allowed) or 'none'}"
            )
        node = {"name": name}
        for k in sorted(keys - {"name"}):
            node[k] = _check_leaf_value(name, k, obj[k])
        return node
    if len(keys) == 1 and keys <= {"sum", "product"}:
        (op,) = keys
        parts = obj[op]
        if isinstance(parts, (str, bytes, Mapping)) or not isinstance(parts, Sequence) or len(parts) < 1:
            raise KernelSyntaxError(f"{op!r} needs a non-empty list of kernels")
        return {op: [parse_kernel(p, leaves, leaf_params) for p in parts]}
    if keys == {"scale", "kernel"}:
        c = obj["scale"]
        if not (isinstance(c, numbers.Real) and not isinstance(c, bool) and np.isfinite(c) and c > 0):
            raise KernelSyntaxError(f"'scale' must be a positive number, got {c!r}")
        return {"scale": float(c), "kernel": parse_kernel(obj["kernel"], leaves, leaf_params)}
    if keys == {"cosine"}:
        return {"cosine": parse_kernel(obj["cosine"], leaves, leaf_params)}
    raise KernelSyntaxError(
        f"cannot read kernel object with keys {sorted(keys)}; use 'name', 'sum', 'product', "
        "'scale'+'kernel' or 'cosine'"
    )


def _check_leaf_value(name, key, v):
    if key.endswith("_bounds"):
        if v == "fixed":
            return v
        if (
            isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2
            and all(isinstance(b, numbers.Real) and not isinstance(b, bool) and b > 0 for b in v)
            and v[0] <= v[1]
        ):
            return [float(v[0]), float(v[1])]
        raise KernelSyntaxError(f"{name}.{key} must be 'fixed' or [low, high] with 0 < low <= high")
    if key == "degree":
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise KernelSyntaxError(f"{name}.degree must be an integer >= 1, got {v!r}")
        return int(v)
    if key == "gamma" and v in ("scale", "auto"):
        return v
    if key == "length_scale" and isinstance(v, Sequence) and not isinstance(v, str):
        if len(v) >= 1 and all(isinstance(b, numbers.Real) and not isinstance(b, bool) and b > 0 for b in v):
            return [float(b) for b in v]
        raise KernelSyntaxError(f"{name}.length_scale must be positive")
    if not isinstance(v, numbers.Real) or isinstance(v, bool) or not np.isfinite(v):
        raise KernelSyntaxError(f"{name}.{key} must be a finite number, got {v!r}")
    if key in ("gamma", "length_scale", "constant_value", "noise_level") and not v > 0:
        raise KernelSyntaxError(f"{name}.{key} must be > 0, got {v!r}")
    if key == "sigma_0" and not v > 0:
        raise KernelSyntaxError(f"{name}.{key} must be > 0 (it is optimised in log space), got {v!r}")
    return float(v)


def kernel_to_string(node) -> str:
    """Readable form of a canonical tree (leaf parameters shown in brackets)."""
    if "name" in node:
        extra = {k: v for k, v in node.items() if k != "name"}
        return node["name"] + (f"{extra}" if extra else "")
    if "sum" in node:
        return " + ".join(kernel_to_string(p) for p in node["sum"])
    if "product" in node:
        return " * ".join(
            f"({kernel_to_string(p)})" if "sum" in p else kernel_to_string(p) for p in node["product"]
        )
    if "scale" in node:
        inner = node["kernel"]
        s = kernel_to_string(inner)
        return f"{node['scale']:g}*" + (f"({s})" if "sum" in inner else s)
    return f"cosine({kernel_to_string(node['cosine'])})"


class KernelSpec(Spec):
    """Hyperparameter spec of a (possibly composite) kernel: a string expression or an object.

    Validation parses the value (ParamError naming the parameter on failure) and returns
    it unchanged (strings stay strings; objects are returned in canonical form).
    """

    type_name = "kernel"

    def __init__(self, default="rbf", *, leaves: Sequence[str] = KERNELS, leaf_params=None, **kw):
        kw.setdefault(
            "doc",
            "Kernel: a name ("
            + ", ".join(leaves)
            + "), an expression such as 'rbf+linear', '0.5*rbf*poly', 'cosine(poly)', or an object "
            "{'name': 'rbf', 'gamma': 0.1} / {'sum': [...]} / {'product': [...]} / "
            "{'scale': c, 'kernel': ...} / {'cosine': ...}.",
        )
        super().__init__(default, **kw)
        self.leaves = tuple(leaves)
        self.leaf_params = dict(leaf_params) if leaf_params is not None else dict(_SVM_LEAF_PARAMS)

    def _validate(self, value, name):
        try:
            tree = parse_kernel(value, self.leaves, self.leaf_params)
        except KernelSyntaxError as exc:
            raise ParamError(name, str(exc)) from None
        return value if isinstance(value, str) else tree

    def parse(self, value):
        return parse_kernel(value, self.leaves, self.leaf_params)

    def _schema(self):
        return {
            "anyOf": [
                {"type": "string", "examples": list(self.leaves) + ["rbf+linear", "cosine(poly)"]},
                {"type": "object"},
            ]
        }

    def _invalid(self):
        return ["__not_a_kernel__", "rbf+", "2", 12345, {"sum": []}, {"name": "rbf", "nope": 1}]


# ---------------------------------------------------------------------------------------------
# Kernel objects (evaluation)
# ---------------------------------------------------------------------------------------------


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
        return _base(X, Y, self.name, self.gamma, self.degree, self.coef0)

    def diag(self, X):
        return kernel_diag(X, kernel=self.name, gamma=self.gamma, degree=self.degree, coef0=self.coef0)

    def prepare(self, Y):
        if self.name == "rbf":
            return np.einsum("ij,ij->i", Y, Y) * self.gamma
        return None

    def cross(self, X, Y, cache=None):
        if self.name == "rbf" and cache is not None:
            return _rbf(X, Y, self.gamma, yy=cache)
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
# Kernels with hyperparameters (Gaussian processes): theta = log(hyperparameters), analytic dK/dtheta
# ---------------------------------------------------------------------------------------------

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
