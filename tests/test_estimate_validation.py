"""FrequencyEstimate and variance(n, f) validate their inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit import GRR, OUE, FrequencyEstimate, consistency
from ldpkit.frequency import RAPPOR, SHE
from ldpkit.numeric import SignedSubsetSelection

SPEC = GRR(epsilon=1.0, domain_size=3)


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        ({"frequencies": [0.5, np.nan, 0.5]}, ValueError, "frequencies must be finite"),
        ({"frequencies": [0.5, np.inf, 0.5]}, ValueError, "frequencies must be finite"),
        ({"frequencies": []}, ValueError, "frequencies must be a non-empty 1-D"),
        ({"frequencies": [[0.5, 0.5]]}, ValueError, "frequencies must be a non-empty 1-D"),
        ({"frequencies": ["a", "b", "c"]}, TypeError, "frequencies must be an array of real"),
        ({"variance": -0.01}, ValueError, "variance must be finite numbers >= 0"),
        ({"variance": [0.01, np.nan, 0.01]}, ValueError, "variance must be finite numbers >= 0"),
        ({"variance": [0.01, np.inf, 0.01]}, ValueError, "variance must be finite numbers >= 0"),
        ({"variance": [0.01, 0.01]}, ValueError, "variance must be a number or an array"),
        ({"spec": "OUE"}, TypeError, "spec must be an ldpkit mechanism"),
        ({"spec": OUE(epsilon=1.0, domain_size=4)}, ValueError, "spec must have domain_size 3"),
        ({"n": 2.5}, TypeError, "n must be"),
        ({"n": -1}, ValueError, "n must be"),
        ({"postprocessing": "norm"}, TypeError, "postprocessing must be a tuple"),
    ],
)
def test_frequency_estimate_refuses(kwargs, exc, words):
    base = {"frequencies": [0.5, 0.2, 0.3], "variance": 0.01, "n": 100, "spec": SPEC}
    with pytest.raises(exc, match=words):
        FrequencyEstimate(**{**base, **kwargs})


def test_frequency_estimate_accepts_valid():
    est = FrequencyEstimate([0.5, -0.2, 0.7], [0.01, 0.02, 0.0], n=100, spec=SPEC)
    assert est.variance.tolist() == [0.01, 0.02, 0.0]
    assert FrequencyEstimate([0.5, 0.5], 0.01, n=10).variance.shape == (2,)


@pytest.mark.parametrize("method", ["norm_mul", "norm_sub", "base_pos", "norm_cut"])
def test_consistency_never_sees_invalid_estimates(method):
    # Invalid input cannot be built, so every method gets finite, non-empty frequencies
    # with a variance >= 0; its output is again a valid estimate.
    est = FrequencyEstimate([0.6, 0.9, -0.1, 0.0], 0.01, n=100)
    out = getattr(consistency, method)(est)
    assert np.all(np.isfinite(out.frequencies)) and out.postprocessing == (method,)


@pytest.mark.parametrize(
    "spec",
    [
        GRR(epsilon=1.0, domain_size=4),
        OUE(epsilon=1.0, domain_size=4),
        SHE(epsilon=1.0, domain_size=4),
        RAPPOR(epsilon=2.0, domain_size=4, num_bits=16, num_cohorts=2),
        SignedSubsetSelection(epsilon=1.0, domain_size=4),
    ],
    ids=lambda s: s.name,
)
def test_variance_checks_f(spec):
    for bad in (1.5, -0.1, np.nan, [0.1, 0.2, 0.3, 2.0]):
        with pytest.raises(ValueError, match="f must be frequencies in"):
            spec.variance(100, bad)
    with pytest.raises(ValueError, match="f must be frequencies in .* got shape"):
        spec.variance(100, [0.1, 0.2])
    with pytest.raises(TypeError, match="f must be frequencies in"):
        spec.variance(100, "0.1")
    ok = spec.variance(100, np.full(4, 0.25))
    assert np.shape(ok) == (4,) and np.all(np.asarray(ok) >= 0)
    assert np.all(np.asarray(spec.variance(100, 0.25)) >= 0)


def test_split_budget_never_returns_zero_budgets():
    from ldpkit.privacy import split_budget

    with pytest.raises(ValueError, match="parts must give every part a budget >= 1e-06"):
        split_budget(1.0, [1e-300, 1.0])
    with pytest.raises(ValueError, match="parts must be an integer in"):
        split_budget(1.0, 10**7)
    with pytest.raises(TypeError, match="parts must be"):
        split_budget(1.0, "12")
    assert split_budget(1.0, [1, 3]) == [0.25, 0.75]
    assert split_budget(2.0, 4) == [0.5] * 4


def test_smooth_refuses_weights_it_cannot_normalize():
    from ldpkit.numeric.em import smooth

    for bad in (np.zeros(4), [], [0.5, np.nan], [0.5, -0.1, 0.6], np.ones((2, 2))):
        with pytest.raises(ValueError, match="theta must be a non-empty 1-D array"):
            smooth(bad)
    with pytest.raises(TypeError, match="theta must be"):
        smooth(["a", "b"])
    np.testing.assert_allclose(smooth([0.0, 1.0, 0.0]), [2 / 7, 3 / 7, 2 / 7], rtol=1e-15)
