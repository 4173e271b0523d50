"""One vocabulary over every registered mechanism: transition matrices are
inputs x outputs with rows summing to 1, and their privacy loss is the spec's."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ldpkit.frequency.hashing import LocalHashing
from ldpkit.privacy import privacy_loss
from ldpkit.spec import Mechanism, mechanism_registry

#: Smallest required arguments per mechanism (everything else at its default); 16 buckets:
#: the waves' EMS warns at <= 8.
REQUIRED = {
    "domain_size": 5,
    "buckets": 16,
    "low": 0.0,
    "high": 1.0,
    "padding": 2,
    "domain_sizes": (3, 4),
}


def make(cls: type[Mechanism], epsilon: float) -> Mechanism:
    kwargs: dict[str, object] = {"epsilon": epsilon}
    for f in dataclasses.fields(cls):
        if f.name in REQUIRED and f.name != "epsilon":
            kwargs[f.name] = REQUIRED[f.name]
    if cls.__name__ == "HaarWavelet":
        kwargs["max_level"] = 2
    if cls.__name__ == "RAPPOR":
        kwargs.update(num_bits=4, num_hashes=1, num_cohorts=2)
    return cls(**kwargs)


NAMES = sorted(mechanism_registry())


def test_registry_lists_only_public_mechanisms():
    assert NAMES and not [n for n in NAMES if n.startswith("_")]
    assert len(NAMES) >= 24


def matrices(spec: Mechanism) -> list[np.ndarray]:
    """The spec's transition matrices: one, or one per hash function for hashing oracles."""
    if isinstance(spec, LocalHashing):
        return [spec.transition_matrix(seed=s) for s in range(8)]
    if not hasattr(spec, "transition_matrix"):
        return []
    try:
        return [spec.transition_matrix()]
    except NotImplementedError:
        return []


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_transition_matrix_orientation_and_privacy_loss(name, epsilon):
    spec = make(mechanism_registry()[name], epsilon)
    found = matrices(spec)
    if not found:
        # No finite law: the mechanism takes or sends real numbers (waves, SR/PM/HM) or
        # composes oracles over levels; it must still report its exact epsilon.
        assert hasattr(spec, "privacy_loss") or not hasattr(spec, "transition_matrix")
        return
    losses = []
    for m in found:
        m = np.asarray(m)
        n_inputs = getattr(spec, "domain_size", getattr(spec, "buckets", None))
        if name == "SignedSubsetSelection":
            n_inputs = 2 * spec.domain_size  # inputs are signed one-hot codes
        if n_inputs is not None:  # (grid mechanisms: rows are the input grid points)
            assert m.shape[0] == n_inputs, f"{name}: rows must be the {n_inputs} inputs"
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=0, atol=1e-9)
        losses.append(privacy_loss(m))
    assert max(losses) == pytest.approx(spec.privacy_loss(), rel=1e-9, abs=1e-12)
    # Power: the matrices of a 1.3x larger epsilon do not pass for this spec's loss.
    louder = max(privacy_loss(m) for m in matrices(spec.replace(epsilon=1.3 * epsilon)))
    assert louder != pytest.approx(spec.privacy_loss(), rel=1e-3)


def test_orientation_check_detects_a_transposed_matrix():
    """The same check fails on the outputs x inputs orientation the waves used to have."""
    from ldpkit.numeric import DiscreteSquareWave

    m = DiscreteSquareWave(epsilon=1.0, buckets=8).transition_matrix().T
    assert m.shape[0] != 8 or not np.allclose(m.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="rows that each sum to 1"):
        privacy_loss(m)


@pytest.mark.parametrize("name", NAMES)
def test_one_variance_signature(name):
    """``variance(n)`` is data-independent wherever it exists, and shrinks as 1/n."""
    spec = make(mechanism_registry()[name], 1.0)
    if not hasattr(spec, "variance"):
        return
    v1, v4 = np.asarray(spec.variance(100)), np.asarray(spec.variance(400))
    assert np.all(np.isfinite(v1)) and np.all(v1 > 0)
    np.testing.assert_allclose(v1 / v4, 4.0, rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_continuous_outputs_name_their_densities(name):
    """``p``/``q`` are probabilities; a mechanism with a density says ``density_*``."""
    spec = make(mechanism_registry()[name], 1.0)
    if hasattr(spec, "density_high"):
        assert not hasattr(spec, "p") and not hasattr(spec, "q")
        assert math.log(spec.density_high / spec.density_low) == pytest.approx(1.0, rel=1e-12)
    for attr in ("p", "q"):
        if hasattr(spec, attr) and isinstance(getattr(type(spec), attr, None), property):
            assert 0.0 <= getattr(spec, attr) <= 1.0


def sample_values(spec: Mechanism, n: int, rng: np.random.Generator) -> np.ndarray:
    """n valid inputs for the spec: items, bucket indices, codes or real values."""
    if hasattr(spec, "_contract_values"):  # sets, key-value pairs (ldpkit.sets)
        return spec._contract_values(n, rng)
    if hasattr(spec, "domain_size"):
        size = spec.domain_size * (2 if type(spec).__name__ == "SignedSubsetSelection" else 1)
        return rng.integers(0, size, n)
    if type(spec).__name__ == "DiscreteSquareWave":
        return rng.integers(0, spec.buckets, n)
    return spec.low + (spec.high - spec.low) * rng.beta(5.0, 2.0, n)


@pytest.mark.parametrize("name", NAMES)
def test_every_estimate_carries_n_and_spec_and_is_plain(name):
    """``estimate(stats)`` is the plain estimator: no post-processing by default, and the
    estimate says how many reports it rests on and which spec produced it."""
    spec = make(mechanism_registry()[name], 2.0)
    rng = np.random.default_rng(1)
    n = 3000
    est = spec.estimate(spec.aggregate(spec.randomize(sample_values(spec, n, rng), rng=rng)))
    assert est.n == n and est.spec == spec
    assert getattr(est, "postprocessing", ()) == ()
