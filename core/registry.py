"""The algorithm registry: registry name -> estimator class.

A leaf module: it imports no algorithm.  ``core.algorithms`` imports every
family once, which fills the registry; ``core/__init__`` imports that, so
``from core import registry; registry.get(name)`` always sees everything.
"""

from __future__ import annotations

from .params import params_json_schema

__all__ = ["register", "get", "all", "names", "describe", "UnknownAlgorithm"]

_REGISTRY: dict[str, type] = {}


class UnknownAlgorithm(KeyError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown algorithm {self.name!r}"


def register(cls: type) -> type:
    """Class decorator: add ``cls`` under its ``name`` attribute."""
    name = getattr(cls, "name", None)
    if not name or not isinstance(name, str):
        raise TypeError(f"{cls.__name__} needs a string class attribute 'name' to be registered")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"algorithm name {name!r} is registered twice")
    _REGISTRY[name] = cls
    return cls


def get(name: str) -> type:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownAlgorithm(name) from None


def all() -> dict[str, type]:  # noqa: A001 - the brief names it so
    return dict(sorted(_REGISTRY.items()))


def names() -> list[str]:
    return sorted(_REGISTRY)


def describe(name: str) -> dict:
    """JSON-ready description: name, task, summary, params_schema, capabilities."""
    cls = get(name)
    return {
        "name": cls.name,
        "task": cls.task,
        "summary": cls.summary,
        "params_schema": params_json_schema(cls.params),
        "capabilities": cls.capabilities(),
    }


def create(name: str, params: dict | None = None):
    """Instantiate a registered estimator from its name and (validated) params.

    Used by meta-estimators (bagging, stacking, AdaBoost bases) whose base
    learner is given as ``{"name": ..., "params": {...}}``.
    """
    from .params import validate_params

    cls = get(name)
    return cls(**validate_params(cls.params, params or {}))
