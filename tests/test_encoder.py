import numpy as np
import pytest

from ldpkit import GRR, Encoder


def test_round_trip_and_unknown_policies():
    enc = Encoder(["a", "b", "c"])
    items = enc.encode(["c", "a", "a"])
    assert items.tolist() == [2, 0, 0] and enc.decode(items).tolist() == ["c", "a", "a"]
    with pytest.raises(
        ValueError,
        match=r"labels must be among the encoder's 3 categories, got 1 unknown label\(s\) \(e.g. 'z'\)",
    ):
        enc.encode(["a", "z"])
    other = Encoder(["a", "b", "c"], unknown="other")
    assert other.domain_size == 4 and other.encode(["z", "b"]).tolist() == [3, 1]
    assert other.decode([3]).tolist() == ["<other>"]


def test_validation():
    with pytest.raises(ValueError, match="categories must be distinct"):
        Encoder(["a", "a"])
    with pytest.raises(ValueError, match="unknown must be"):
        Encoder(["a", "b"], unknown="drop")
    with pytest.raises(ValueError, match="at least 2"):
        Encoder(["a"])
    with pytest.raises(ValueError, match=r"items must be integers in \[0, 2\)"):
        Encoder(["a", "b"]).decode([2])


def test_labels_attach_to_estimates():
    enc = Encoder.from_values(["x", "y", "y", "z", "z", "z"])
    assert enc.categories == ["z", "y", "x"]
    spec = GRR(epsilon=2.0, domain_size=enc.domain_size)
    est = enc.label(spec.run(enc.encode(["x", "y", "y", "z", "z", "z"] * 100), rng=0))
    assert est.labels == ("z", "y", "x")
    frame = est.to_frame()
    assert list(frame.index) == ["z", "y", "x"] and np.all(frame.ci_low < frame.ci_high)
