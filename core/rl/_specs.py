"""Hyperparameter specs shared by the RL estimators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..params import Any_, Choice, Float, Int, ListOf, ParamError, Spec

GAMMA = Float(0.95, ge=0.0, le=1.0,
              doc="Discount factor in [0, 1]; 1 only with a finite horizon or terminal states.")
HORIZON = Int(None, ge=1, le=100_000, nullable=True,
              doc="Finite horizon T (number of decisions); null: infinite horizon.")
TERMINAL_STATES = ListOf(Any_(), None, nullable=True,
                         doc="Extra terminal states (value 0, no actions), also allowed as next_state only.")
TOL = Float(1e-8, gt=0.0, le=1.0, doc="Stop when the largest change of V in one sweep is below tol.")
MAX_ITER = Int(10_000, ge=1, le=10_000_000, doc="Maximum number of sweeps.")


class SimulateSpec(Spec):
    """``{"episodes": int, "max_steps": int, "start_states": [state, ...]?}`` or null (learn from logged data)."""

    type_name = "object"
    _KEYS = {"episodes": (1, 10_000_000), "max_steps": (1, 1_000_000)}

    def __init__(self, **kw):
        kw.setdefault("doc", "Simulate episodes on the transition table given as data: episodes, max_steps "
                             "(per episode) and optional start_states (default: every non-terminal state, "
                             "uniformly); null: learn from logged transitions.")
        super().__init__(None, nullable=True, **kw)

    def _validate(self, value, name):
        if not isinstance(value, Mapping):
            raise ParamError(name, f"must be an object with episodes and max_steps, got {value!r}")
        unknown = sorted(set(value) - {"episodes", "max_steps", "start_states"})
        if unknown:
            raise ParamError(name, f"unknown key {unknown[0]!r} (allowed: episodes, max_steps, start_states)")
        out = {}
        for key, (lo, hi) in self._KEYS.items():
            if key not in value:
                raise ParamError(name, f"needs {key!r}")
            v = value[key]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ParamError(name, f"{key} must be an integer in [{lo}, {hi}], got {value[key]!r}")
            out[key] = v
        starts = value.get("start_states")
        if starts is not None:
            if isinstance(starts, (str, bytes, Mapping)) or not isinstance(starts, Sequence) or not starts:
                raise ParamError(name, "start_states must be a non-empty list of states")
            out["start_states"] = list(starts)
        return out

    def _schema(self):
        return {"type": "object", "additionalProperties": False, "required": ["episodes", "max_steps"],
                "properties": {
                    "episodes": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
                    "max_steps": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                    "start_states": {"type": "array", "minItems": 1}}}

    def _invalid(self):
        return ["many", {"episodes": 0, "max_steps": 10}, {"episodes": 5}, {"episodes": 5, "max_steps": 5, "x": 1}]


EPSILON = Float(0.1, ge=0.0, le=1.0, doc="Exploration: probability of a uniformly random action (epsilon-greedy).")
EPSILON_DECAY = Float(1.0, gt=0.0, le=1.0,
                      doc="epsilon is multiplied by this after every episode (1: constant).")
EPSILON_MIN = Float(0.0, ge=0.0, le=1.0, doc="Floor of the decaying epsilon.")
ALPHA = Float(0.1, gt=0.0, le=1.0, doc="Learning rate (alpha_schedule='constant').")
ALPHA_SCHEDULE = Choice("constant", choices=("constant", "visits"),
                        doc="'constant': alpha; 'visits': 1 / n^alpha_power, n the visits of the (state, action).")
ALPHA_POWER = Float(1.0, gt=0.5, le=1.0, doc="Exponent of the visit-count learning rate 1/n^p.")
N_EPOCHS = Int(20, ge=1, le=100_000, doc="Logged data: sweeps over the transitions.")
BATCH_SIZE = Int(1, ge=1, le=1_000_000,
                 doc="Logged data: transitions per update (1: strictly sequential; more: vectorised, see docs).")
N_ENVS = Int(1, ge=1, le=100_000,
             doc="Simulation: episodes run side by side (NumPy-vectorised; pays off from ~100); 1: sequential.")
INITIAL_Q = Float(0.0, ge=-1e9, le=1e9, doc="Initial value of every Q(s, a) (optimistic when high).")
