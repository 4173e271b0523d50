"""Smoothers: the definitions of STR21 Appendix D, by brute force, and their linear weights."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.stream.smoothers import SMOOTHERS, ExponentialSmoother, make_smoother

LEAVES = np.array([4.0, 10.0, -2.0, 7.0, 7.5, 3.0, 12.0])
PRIOR = 5.0


def brute(name: str, t: int) -> float:
    """Appendix D with u_0 = prior and u_1..u_t = LEAVES[:t] (paper's 1-based leaves)."""
    u = [PRIOR, *LEAVES[:t].tolist()]
    if t == 0:
        return PRIOR
    if name == "recent":
        return u[t]
    if name == "mean":
        return float(np.mean(u[1 : t + 1]))
    if name == "median":
        return float(np.median(u[1 : t + 1]))
    if name == "moving_average":
        return float(np.mean(u[max(1, t - 3) : t + 1]))  # w = 4
    if name == "exponential":
        s = PRIOR
        for j in range(1, t + 1):
            s = 0.6 * u[j] + 0.4 * s
        return s
    raise AssertionError(name)


@pytest.mark.parametrize("name", sorted(SMOOTHERS))
def test_predictions_follow_the_appendix(name: str) -> None:
    smoother = make_smoother(name)
    blocks = np.arange(LEAVES.size + 1)
    got = smoother.predict(LEAVES, blocks, PRIOR)
    np.testing.assert_allclose(got, [brute(name, int(t)) for t in blocks], rtol=1e-12)
    if smoother.linear:
        for t in blocks.tolist():
            idx, coef, prior_coef = smoother.weights(t)
            assert coef @ LEAVES[idx] + prior_coef * PRIOR == pytest.approx(got[t], rel=1e-12)
    else:
        with pytest.raises(NotImplementedError):
            smoother.weights(3)


def test_round_trip_and_parameters() -> None:
    for name in SMOOTHERS:
        s = make_smoother(name)
        assert make_smoother(s.to_dict()) == s
    assert make_smoother({"name": "moving_average", "window": 2}).window == 2
    assert ExponentialSmoother(1.0).predict(LEAVES, [3], PRIOR)[0] == LEAVES[2]
    assert ExponentialSmoother(0.0).predict(LEAVES, [3], PRIOR)[0] == PRIOR
    with pytest.raises(ValueError, match="alpha must be"):
        ExponentialSmoother(1.5)
    with pytest.raises(ValueError, match="window must be"):
        make_smoother({"name": "moving_average", "window": 0})
    with pytest.raises(ValueError, match="blocks must be"):
        make_smoother("recent").predict(LEAVES, [LEAVES.size + 1], PRIOR)
