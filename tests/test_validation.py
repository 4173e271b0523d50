import math

import numpy as np
import pytest

from ldpkit._validation import (
    MIN_EPSILON,
    check_categorical_values,
    check_epsilon,
    check_integer,
    check_numeric_values,
    check_probability,
)


@pytest.mark.parametrize("bad", [0, -0.5, 1e-7, 9.99e-7, 1e-170, math.nan, math.inf])
def test_epsilon_values(bad):
    with pytest.raises(ValueError, match=r"^epsilon must be a finite number >= 1e-06, got "):
        check_epsilon(bad)


def test_epsilon_message_format():
    with pytest.raises(ValueError) as info:
        check_epsilon(-1)
    assert str(info.value) == "epsilon must be a finite number >= 1e-06, got -1"
    with pytest.raises(ValueError) as info:
        check_epsilon(31, high=30.0)
    assert str(info.value) == "epsilon must be a finite number >= 1e-06 and <= 30, got 31"
    assert check_epsilon(MIN_EPSILON) == 1e-6 and check_epsilon(30, high=30.0) == 30.0


def test_epsilon_accepts_numpy_scalars():
    assert check_epsilon(np.float32(0.5)) == 0.5 and check_epsilon(np.int64(2)) == 2.0


def test_integer_and_probability():
    assert check_integer(np.int32(3), "k", low=1) == 3
    with pytest.raises(TypeError, match=r"k must be an integer in \[1, 5\], got 2.0"):
        check_integer(2.0, "k", low=1, high=5)
    with pytest.raises(ValueError, match=r"k must be an integer in \[1, 5\], got 6"):
        check_integer(6, "k", low=1, high=5)
    with pytest.raises(ValueError, match="alpha must be a finite number > 0 and < 1"):
        check_probability(1.0)


def test_categorical_values():
    out = check_categorical_values(np.array([0, 3], dtype=np.uint8), 4)
    assert out.dtype == np.int64
    with pytest.raises(
        ValueError,
        match=r"values must be integers in \[0, 4\), got 1 value\(s\) outside it \(e.g. 4\)",
    ):
        check_categorical_values([0, 4], 4)
    with pytest.raises(TypeError, match="values must be integers"):
        check_categorical_values([True, False], 4)
    with pytest.raises(TypeError, match="Encoder"):
        check_categorical_values(np.array(["a"]), 4)


def test_numeric_values():
    assert check_numeric_values([0, 0.5, 1], 0, 1).dtype == np.float64
    with pytest.raises(
        ValueError,
        match=r"values must be real numbers in \[0, 1\], got 1 value\(s\) outside it \(e.g. nan\)",
    ):
        check_numeric_values([0.5, math.nan], 0, 1)
    with pytest.raises(ValueError, match="outside"):
        check_numeric_values([2.0], 0, 1)
    with pytest.raises(TypeError):
        check_numeric_values(["x"], 0, 1)


def test_from_dict_layouts_refuse_other_types_versions_and_keys():
    from ldpkit import Encoder, Question

    enc = Encoder(["a", "b"])
    assert Encoder.from_dict(enc.to_dict()).to_dict() == enc.to_dict()
    for cls in (Encoder, Question):
        with pytest.raises(TypeError, match=rf"data must be a mapping from {cls.__name__}"):
            cls.from_dict([1, 2])
        with pytest.raises(ValueError, match="format must be 1, got 2"):
            cls.from_dict({"format": 2})
    with pytest.raises(ValueError, match=r"keys format, categories, unknown, missing, got \['x'\]"):
        Encoder.from_dict({**enc.to_dict(), "x": 1})
    with pytest.raises(ValueError, match=r"keys format, name, description, spec, encoder, clip"):
        Question.from_dict({"name": "q", "spec": {}, "colour": 1})
