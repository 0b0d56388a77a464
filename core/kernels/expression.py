"""The kernel expression language: a string expression or a structured object -> a canonical tree.

Canonical tree nodes (plain, JSON-ready dicts)::

    {"name": <leaf name>, **leaf params}
    {"sum": [node, ...]}   {"product": [node, ...]}   {"scale": c, "kernel": node}   {"cosine": node}

:class:`KernelSpec` is the hyperparameter spec that validates such values (docs/decisions/kernels.md).
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence

import numpy as np

from ..params import ParamError, Spec
from .functions import KERNELS

__all__ = ["KernelSyntaxError", "parse_kernel", "kernel_to_string", "KernelSpec"]

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
