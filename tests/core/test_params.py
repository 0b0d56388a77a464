import math

import pytest

from core.params import (
    Bool,
    Choice,
    DictOf,
    Float,
    Int,
    ListOf,
    OneOf,
    ParamError,
    Seed,
    params_json_schema,
    validate_params,
)


def test_int_bounds_and_coercion():
    spec = Int(3, ge=1, le=10)
    assert spec.validate(4.0, "k") == 4
    with pytest.raises(ParamError, match="'k'.*>= 1"):
        spec.validate(0, "k")
    with pytest.raises(ParamError, match="integer"):
        spec.validate(True, "k")
    with pytest.raises(ParamError, match="integer"):
        spec.validate(2.5, "k")
    assert spec.json_schema() == {"type": "integer", "minimum": 1, "maximum": 10, "default": 3}


def test_float_rejects_nan_and_bounds():
    spec = Float(1.0, gt=0)
    with pytest.raises(ParamError, match="finite"):
        spec.validate(math.nan, "C")
    with pytest.raises(ParamError, match="> 0"):
        spec.validate(0.0, "C")
    assert spec.validate(3, "C") == 3.0


def test_choice_oneof_list_dict_seed_bool():
    assert Choice("a", ["a", "b"]).validate("b", "x") == "b"
    with pytest.raises(ParamError, match="one of 'a', 'b'"):
        Choice("a", ["a", "b"]).validate("c", "x")
    mf = OneOf("sqrt", [Choice(None, ["sqrt", "log2"]), Int(None, ge=1), Float(None, gt=0, le=1)])
    assert mf.validate(3, "max_features") == 3
    assert mf.validate(0.5, "max_features") == 0.5
    with pytest.raises(ParamError):
        mf.validate(1.5, "max_features")
    assert ListOf(Int(None, ge=1), [100], min_items=1).validate((10, 5), "h") == [10, 5]
    with pytest.raises(ParamError, match=r"h\[1\]"):
        ListOf(Int(None, ge=1), [100]).validate([10, 0], "h")
    assert DictOf(Float(None, ge=0), {}).validate({"a": 1}, "w") == {"a": 1.0}
    assert Seed().validate(None, "random_state") is None
    with pytest.raises(ParamError):
        Seed().validate(-1, "random_state")
    with pytest.raises(ParamError):
        Bool(True).validate("yes", "b")


def test_validate_params_fills_defaults_and_rejects_unknown():
    specs = {"a": Int(1), "b": Float(0.5)}
    assert validate_params(specs, {"a": 2}) == {"a": 2, "b": 0.5}
    with pytest.raises(ParamError, match="unknown parameter"):
        validate_params(specs, {"c": 1})
    schema = params_json_schema(specs)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["b"]["default"] == 0.5


def test_invalid_examples_are_rejected_by_their_spec():
    for spec in [Int(1, ge=0), Float(0.1, gt=0, le=1), Bool(False), Choice("x", ["x", "y"]), Seed(),
                 ListOf(Int(None, ge=1), [1], min_items=1)]:
        for bad in spec.invalid_examples():
            assert not spec.accepts(bad), (spec, bad)
