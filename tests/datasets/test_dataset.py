"""The Dataset object: validation, immutability and derived data sets."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ldpkit.datasets import Dataset

META = {"licence": "x", "source": "y", "citation": "z", "description": "w"}


def numerical(values, domain=(0.0, 10.0), **kw) -> Dataset:
    return Dataset(name="num", kind="numerical", values=values, domain=domain, **META, **kw)


def categorical(values, labels=("a", "b", "c", "d"), **kw) -> Dataset:
    return Dataset(name="cat", kind="categorical", values=values, labels=labels, **META, **kw)


def test_numerical_validation():
    data = numerical([1, 2, 3])
    assert data.values.dtype == np.float64 and data.n == 3 and len(data) == 3
    assert (data.low, data.high) == (0.0, 10.0)
    with pytest.raises(ValueError, match="domain"):
        numerical([11.0])
    with pytest.raises(ValueError, match="domain"):
        numerical([np.nan])
    with pytest.raises(ValueError, match="low < high"):
        numerical([1.0], domain=(5.0, 5.0))
    with pytest.raises(TypeError, match="numbers"):
        numerical(np.array(["a"]))
    with pytest.raises(ValueError, match="1-D"):
        numerical(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="kind must be"):
        Dataset(name="x", kind="ordinal", values=[1], **META)


def test_categorical_validation():
    data = categorical(np.array([0, 3, 3], dtype=np.uint8))
    assert data.values.dtype == np.int64 and data.domain_size == 4
    assert data.counts.tolist() == [1, 0, 0, 2]
    assert data.frequencies.tolist() == pytest.approx([1 / 3, 0, 0, 2 / 3])
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        categorical([4])
    with pytest.raises(TypeError, match="integer item indices"):
        categorical([0.0])
    with pytest.raises(ValueError, match="needs labels"):
        Dataset(name="x", kind="categorical", values=[0], domain=(0, 1), **META)
    with pytest.raises(AttributeError, match="numerical"):
        _ = categorical([0]).low
    with pytest.raises(AttributeError, match="categorical"):
        _ = numerical([0]).counts


def test_arrays_are_private_read_only_copies():
    source = np.array([1.0, 2.0])
    data = numerical(source)
    source[0] = 9.0
    assert data.values[0] == 1.0
    with pytest.raises(ValueError):
        data.values[0] = 5.0
    with pytest.raises(AttributeError):
        data.name = "other"  # type: ignore[misc]


def test_top_k_relabels_by_frequency():
    data = categorical([2, 2, 2, 0, 1, 1, 3, 2])
    top = data.top_k(2)
    assert top.labels == ("c", "b")
    assert top.values.tolist() == [0, 0, 0, 1, 1, 0]
    assert top.counts.tolist() == [4, 2]
    tied = categorical([3, 0, 3, 0, 1]).top_k(2)  # equal counts: lower index first
    assert tied.labels == ("a", "d") and tied.values.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="k must be"):
        data.top_k(5)


def test_sample_and_normalized():
    ts = np.arange("2020-01-01", "2020-01-11", dtype="datetime64[D]")
    data = numerical(np.arange(10.0), timestamps=ts)
    sub = data.sample(4, rng=0)
    assert sub.n == 4 and set(sub.values) <= set(data.values)
    assert (np.diff(sub.timestamps.astype(np.int64)) > 0).all()  # order kept
    assert np.array_equal(sub.values, data.sample(4, rng=0).values)
    boot = data.sample(25, replace=True, rng=1)
    assert boot.n == 25 and boot.timestamps is None
    with pytest.raises(ValueError, match="n must be"):
        data.sample(11)
    unit = data.normalized()
    assert unit.domain == (0.0, 1.0)
    assert unit.values.tolist() == pytest.approx([i / 10 for i in range(10)])
    # a domain whose width overflows to inf used to map every value to 0 silently
    huge = numerical([-1e307, 0.0, 1e307], domain=(-1e308, 1e308))
    with pytest.raises(ValueError, match="domain must have a finite width"):
        huge.normalized()


def test_repr_frame_and_pickle():
    data = categorical([0, 1])
    assert repr(data) == "Dataset(name='cat', kind='categorical', n=2, domain_size=4)"
    frame = data.to_frame()
    assert frame["label"].astype(str).tolist() == ["a", "b"]
    back = pickle.loads(pickle.dumps(data))
    assert np.array_equal(back.values, data.values) and back.labels == data.labels
    with pytest.raises(ValueError, match="timestamps"):
        numerical([1.0], timestamps=np.array([1]))
