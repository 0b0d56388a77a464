"""Hyperparameter specifications.

Each estimator declares its hyperparameters once, as a class attribute
``params = {"name": Spec(...), ...}``.  From that one place come:

* validation and coercion of user-supplied values (``Spec.validate``),
* the JSON Schema served by ``/v1/algorithms`` (``Spec.json_schema``),
* the invalid values the common tests feed to every estimator
  (``Spec.invalid_examples``).

Specs are plain Python (no pydantic) so that ``core`` stays free of service
concerns.  ``ParamError`` names the parameter and the reason, and the service
turns it into a 422.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ParamError",
    "Spec",
    "Int",
    "Float",
    "Bool",
    "Choice",
    "Seed",
    "Str",
    "OneOf",
    "ListOf",
    "DictOf",
    "Any_",
    "validate_params",
    "params_json_schema",
]

_MISSING = object()


class ParamError(ValueError):
    """An invalid hyperparameter value.  ``param`` names it, ``reason`` says why."""

    def __init__(self, param: str, reason: str):
        self.param = param
        self.reason = reason
        super().__init__(f"invalid value for parameter '{param}': {reason}")


class Spec:
    """Base class of hyperparameter specs.

    ``default`` is the value used when the parameter is not given;
    ``nullable`` admits ``None``; ``doc`` is a short description.
    """

    type_name = "any"

    def __init__(self, default: Any = _MISSING, *, nullable: bool = False, doc: str = ""):
        self.default = None if default is _MISSING else default
        self.nullable = nullable or (default is None and default is not _MISSING)
        self.doc = doc

    # -- validation -----------------------------------------------------------
    def validate(self, value: Any, name: str) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise ParamError(name, "must not be null")
        return self._validate(value, name)

    def _validate(self, value: Any, name: str) -> Any:  # pragma: no cover - overridden
        return value

    def accepts(self, value: Any) -> bool:
        try:
            self.validate(value, "_")
        except ParamError:
            return False
        return True

    # -- schema ---------------------------------------------------------------
    def _schema(self) -> dict:
        return {}

    def json_schema(self) -> dict:
        inner = self._schema()
        if self.nullable:
            inner = {"anyOf": [inner, {"type": "null"}]} if inner else {}
        schema = dict(inner)
        schema["default"] = _jsonable(self.default)
        if self.doc:
            schema["description"] = self.doc
        return schema

    def invalid_examples(self) -> list:
        """Values this spec must reject (used by the common tests)."""
        out = [] if self.nullable else [None]
        return out + self._invalid()

    def _invalid(self) -> list:
        return []


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class _Bounded(Spec):
    def __init__(self, default=_MISSING, *, ge=None, gt=None, le=None, lt=None, **kw):
        super().__init__(default, **kw)
        self.ge, self.gt, self.le, self.lt = ge, gt, le, lt

    def _check_bounds(self, value, name):
        if self.ge is not None and not value >= self.ge:
            raise ParamError(name, f"must be >= {self.ge}, got {value!r}")
        if self.gt is not None and not value > self.gt:
            raise ParamError(name, f"must be > {self.gt}, got {value!r}")
        if self.le is not None and not value <= self.le:
            raise ParamError(name, f"must be <= {self.le}, got {value!r}")
        if self.lt is not None and not value < self.lt:
            raise ParamError(name, f"must be < {self.lt}, got {value!r}")

    def _bound_schema(self) -> dict:
        s = {}
        if self.ge is not None:
            s["minimum"] = self.ge
        if self.gt is not None:
            s["exclusiveMinimum"] = self.gt
        if self.le is not None:
            s["maximum"] = self.le
        if self.lt is not None:
            s["exclusiveMaximum"] = self.lt
        return s

    def _out_of_bounds(self, step) -> list:
        out = []
        if self.ge is not None:
            out.append(self.ge - step)
        if self.gt is not None:
            out.append(self.gt)
        if self.le is not None:
            out.append(self.le + step)
        if self.lt is not None:
            out.append(self.lt)
        return out


class Int(_Bounded):
    """An integer, optionally bounded (``ge``, ``gt``, ``le``, ``lt``)."""

    type_name = "integer"

    def _validate(self, value, name):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not _is_int(value):
            raise ParamError(name, f"must be an integer, got {value!r}")
        value = int(value)
        self._check_bounds(value, name)
        return value

    def _schema(self):
        return {"type": "integer", **self._bound_schema()}

    def _invalid(self):
        return ["one", 1.5, True] + self._out_of_bounds(1)


class Float(_Bounded):
    """A finite real number, optionally bounded."""

    type_name = "number"

    def _validate(self, value, name):
        if not _is_real(value):
            raise ParamError(name, f"must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ParamError(name, f"must be finite, got {value!r}")
        self._check_bounds(value, name)
        return value

    def _schema(self):
        return {"type": "number", **self._bound_schema()}

    def _invalid(self):
        step = 1.0 if (self.ge is None or abs(self.ge) >= 1) else 1e-3
        return ["one", float("nan"), True] + self._out_of_bounds(step)


class Bool(Spec):
    """A boolean (``True``/``False``; no truthy coercion)."""

    type_name = "boolean"

    def _validate(self, value, name):
        if not isinstance(value, bool):
            raise ParamError(name, f"must be true or false, got {value!r}")
        return value

    def _schema(self):
        return {"type": "boolean"}

    def _invalid(self):
        return ["yes", 2]


class Choice(Spec):
    """One of a fixed set of values (strings, usually)."""

    type_name = "choice"

    def __init__(self, default=_MISSING, choices: Sequence = (), **kw):
        super().__init__(default, **kw)
        self.choices = tuple(choices)
        if not self.choices:
            raise ValueError("Choice needs at least one choice")

    def _validate(self, value, name):
        for c in self.choices:
            if value == c and type(value) is type(c):
                return c
        allowed = ", ".join(repr(c) for c in self.choices)
        raise ParamError(name, f"must be one of {allowed}; got {value!r}")

    def _schema(self):
        return {"enum": list(self.choices)}

    def _invalid(self):
        return ["__not_a_choice__", 12345]


class Str(Spec):
    """A free string (a name, say)."""

    type_name = "string"

    def __init__(self, default=_MISSING, *, min_length: int = 0, **kw):
        super().__init__(default, **kw)
        self.min_length = min_length

    def _validate(self, value, name):
        if not isinstance(value, str):
            raise ParamError(name, f"must be a string, got {value!r}")
        if len(value) < self.min_length:
            raise ParamError(name, f"must have at least {self.min_length} characters")
        return value

    def _schema(self):
        s = {"type": "string"}
        if self.min_length:
            s["minLength"] = self.min_length
        return s

    def _invalid(self):
        return [3]


class Seed(Spec):
    """A random seed: a non-negative integer, or null for fresh entropy."""

    type_name = "seed"

    def __init__(self, default=None, **kw):
        kw.setdefault("doc", "Seed of the random number generator (null: unpredictable).")
        super().__init__(default, nullable=True, **kw)

    def _validate(self, value, name):
        if not _is_int(value):
            raise ParamError(name, f"must be an integer seed or null, got {value!r}")
        if value < 0 or value >= 2**32:
            raise ParamError(name, f"must be in [0, 2**32), got {value!r}")
        return int(value)

    def _schema(self):
        return {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}

    def _invalid(self):
        return [-1, "seed", 1.5]


class OneOf(Spec):
    """The first of several specs that accepts the value (e.g. ``"sqrt"`` or a fraction)."""

    type_name = "oneOf"

    def __init__(self, default=_MISSING, options: Sequence[Spec] = (), **kw):
        super().__init__(default, **kw)
        self.options = tuple(options)

    def _validate(self, value, name):
        reasons = []
        # bool/int/float overlap: try specs in declared order, Int before Float is the usual intent
        for opt in self.options:
            try:
                return opt.validate(value, name)
            except ParamError as exc:
                reasons.append(exc.reason)
        raise ParamError(name, "; or ".join(reasons))

    def _schema(self):
        return {"anyOf": [o._schema() for o in self.options]}

    def _invalid(self):
        cands = []
        for opt in self.options:
            cands.extend(opt._invalid())
        return [c for c in cands if not self.accepts(c)][:6] or [object.__name__]


class ListOf(Spec):
    """A list of values of one spec, with optional length bounds."""

    type_name = "array"

    def __init__(self, item: Spec, default=_MISSING, *, min_items=0, max_items=None, **kw):
        super().__init__(default, **kw)
        self.item = item
        self.min_items = min_items
        self.max_items = max_items

    def _validate(self, value, name):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise ParamError(name, f"must be a list, got {value!r}")
        if len(value) < self.min_items:
            raise ParamError(name, f"must have at least {self.min_items} items")
        if self.max_items is not None and len(value) > self.max_items:
            raise ParamError(name, f"must have at most {self.max_items} items")
        return [self.item.validate(v, f"{name}[{i}]") for i, v in enumerate(value)]

    def _schema(self):
        s = {"type": "array", "items": self.item._schema(), "minItems": self.min_items}
        if self.max_items is not None:
            s["maxItems"] = self.max_items
        return s

    def _invalid(self):
        bad = ["notalist"]
        inv = [v for v in self.item._invalid() if v is not None][:1]
        if inv:
            bad.append(inv * max(1, self.min_items))
        return bad


class DictOf(Spec):
    """A mapping from string keys to values of one spec (e.g. class weights)."""

    type_name = "object"

    def __init__(self, value: Spec, default=_MISSING, **kw):
        super().__init__(default, **kw)
        self.value = value

    def _validate(self, value, name):
        if not isinstance(value, Mapping):
            raise ParamError(name, f"must be an object, got {value!r}")
        return {k: self.value.validate(v, f"{name}.{k}") for k, v in value.items()}

    def _schema(self):
        return {"type": "object", "additionalProperties": self.value._schema()}

    def _invalid(self):
        return ["notadict"]


class Any_(Spec):
    """Any JSON value; the estimator validates it itself (e.g. a nested estimator spec)."""

    type_name = "any"

    def _validate(self, value, name):
        return value


def validate_params(specs: Mapping[str, Spec], values: Mapping[str, Any]) -> dict:
    """Validate ``values`` against ``specs``; return all effective values, defaults filled."""
    unknown = sorted(set(values) - set(specs))
    if unknown:
        allowed = ", ".join(sorted(specs)) or "none"
        raise ParamError(unknown[0], f"unknown parameter (allowed: {allowed})")
    out = {}
    for key, spec in specs.items():
        out[key] = spec.validate(values[key], key) if key in values else spec.validate(spec.default, key)
    return out


def params_json_schema(specs: Mapping[str, Spec]) -> dict:
    """JSON Schema object of a parameter set (additionalProperties false)."""
    return {
        "type": "object",
        "properties": {k: s.json_schema() for k, s in specs.items()},
        "additionalProperties": False,
    }
