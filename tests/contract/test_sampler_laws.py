"""Every sampler against its transition matrix, on every mechanism whose law is a finite matrix.

``transition_matrix()`` (inputs x outputs) is what ``privacy_loss()`` is computed from, so
the sampler must draw exactly from it: a chi-square goodness-of-fit test per input row at
level 1e-6, which must also reject the sampler of epsilon x 1.3.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ldpkit.spec import mechanism_registry
from ldpkit.testing import check_mechanism, chisquare_gof, small_spec

ALPHA = 1e-6


def _spec(name: str, epsilon: float, d: int):
    """The mechanism with d items (``domain_size``, or ``buckets`` of a discrete one).

    RAPPOR gets 4-bit filters: 2 cohorts x 2^4 outputs keep the chi-square test powerful.
    """
    cls = mechanism_registry()[name]
    fields = {f.name for f in dataclasses.fields(cls)}
    params = {"domain_size" if "domain_size" in fields else "buckets": d}
    if "num_bits" in fields:
        params["num_bits"] = 4
    return small_spec(cls, epsilon=epsilon, **params)


def _enumerable(name: str) -> bool:
    """Has a transition matrix (a finite law) and indexes its reports by output."""
    spec = small_spec(name)
    if not (hasattr(spec, "transition_matrix") and hasattr(spec, "output_index")):
        return False
    try:
        _spec(name, 1.0, 4).transition_matrix()
    except NotImplementedError:  # e.g. too many outputs to enumerate
        return False
    return True


NAMES = sorted(n for n in mechanism_registry() if _enumerable(n))


def test_the_discrete_families_are_here():
    expected = {"GRR", "OUE", "SUE", "RAPPOR", "DiscreteSquareWave", "SignedSubsetSelection"}
    assert expected <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("epsilon", "d"), [(1.0, 4), (0.7, 2), (2.5, 5)])
def test_sampler_matches_transition_matrix(name, epsilon, d):
    spec = _spec(name, epsilon, d)
    # rows sum to 1, privacy_loss(matrix) == spec.privacy_loss() <= epsilon (tight if exact)
    check_mechanism(spec, checks=["privacy", "transition_matrix"])
    matrix = spec.transition_matrix()
    n = 60_000
    for u in range(matrix.shape[0]):
        hist = np.bincount(
            spec.output_index(spec.randomize(np.full(n, u), rng=u)), minlength=matrix.shape[1]
        )
        p = chisquare_gof(hist, matrix[u])
        assert p > ALPHA, f"input {u}: chi-square p = {p:.2e} < {ALPHA}"
    wrong = spec.replace(epsilon=epsilon * 1.3)
    hist = np.bincount(
        wrong.output_index(wrong.randomize(np.full(n, 0), rng=99)), minlength=matrix.shape[1]
    )
    assert chisquare_gof(hist, matrix[0]) < ALPHA, "the sampler of epsilon x 1.3 passed"
