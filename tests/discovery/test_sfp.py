"""ldpkit.discovery.SFP: Apple's sequence fragment puzzle over two sketches."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ldpkit import SFP
from ldpkit.frequency._items import keys_of, row_hash
from ldpkit.spec import Reports

# --- the report law ------------------------------------------------------------------------


def _keep_z(spec: SFP, epsilon: float | None, n: int) -> tuple[float, float]:
    """z of the two sketches' kept signs for one string (one position: P = 1), against the
    keep probabilities of ``spec`` at ``epsilon`` (None: the spec's own)."""
    check = spec if epsilon is None else dataclasses.replace(spec, epsilon=epsilon)
    reports = spec.randomize(["ab"] * n, rng=7)
    grid = spec._grid(["ab"])
    words, hashes = spec._word_items(grid)
    frag = spec._fragment_item(0, hashes, spec._fragment_codes(grid, np.zeros(1, np.int64)))
    out = []
    for part, item, inner in (
        ("fragment", frag, check._fragment_spec()),
        ("word", words, check._word_spec()),
    ):
        rows = getattr(reports, f"{part}_rows").astype(np.int64)
        index = getattr(reports, f"{part}_index").astype(np.int64)
        bits = getattr(reports, f"{part}_bits")
        hashed = row_hash(rows, keys_of(item.tolist())[np.zeros(n, dtype=np.int64)], spec.width)
        plus = (np.bitwise_count(index & hashed) & 1) == 0
        kept = int(np.count_nonzero(plus == bits.astype(bool)))
        p = inner.p
        out.append((kept - n * p) / np.sqrt(n * p * (1 - p)))
    return out[0], out[1]


def test_report_law_given_position_and_rows():
    # max_length = fragment_length: one position, so each sign's law is known given (row, l)
    spec = SFP(epsilon=3.0, max_length=2, depth=16, width=64)
    z_frag, z_word = _keep_z(spec, None, 40_000)
    assert abs(z_frag) < 5 and abs(z_word) < 5, (z_frag, z_word)
    z_frag, z_word = _keep_z(spec, 3.0 * 1.3, 40_000)
    assert abs(z_frag) > 6 and abs(z_word) > 6, (z_frag, z_word)


def test_privacy_loss_is_the_sum_of_the_two_sketches():
    spec = SFP(epsilon=4.0, fragment_share=0.25)
    loss = spec._fragment_spec().privacy_loss() + spec._word_spec().privacy_loss()
    assert spec.privacy_loss() == loss
    assert spec.privacy_loss() <= 4.0 + 1e-12
    assert spec._fragment_spec().epsilon == 1.0
    cms = SFP(epsilon=4.0, sketch="cms", width=64)
    assert cms.privacy_loss() <= 4.0 + 1e-12


# --- unbiased sketch estimates ---------------------------------------------------------------

_TRUTH = {"pear": 0.5, "kiwi": 0.3, "fig": 0.2}


def _stats(epsilon: float, n: int):
    spec = SFP(epsilon=epsilon, max_length=4, depth=256, width=1024)
    values = np.repeat(list(_TRUTH), [int(n * f) for f in _TRUTH.values()])
    return spec, spec.aggregate(spec.randomize(values, rng=11))


def _word_z(spec: SFP, stats, check: SFP) -> np.ndarray:
    names = [*_TRUTH, "plum"]
    truth = np.array([*_TRUTH.values(), 0.0])
    f = check.word_frequencies(stats, names)
    var = check._word_spec().variance(stats.n, truth)
    return (f - truth) / np.sqrt(var)


def _fragment_z(spec: SFP, stats, check: SFP) -> np.ndarray:
    # position 0 of every planted string (its hash and its first two letters), and a null
    grid = spec._grid([*_TRUTH, "zz"])
    _, hashes = spec._word_items(grid)
    codes = spec._fragment_codes(grid, np.zeros(grid.shape[0], np.int64))
    table = check.fragment_frequencies(stats, 0)
    f = table[hashes, codes]
    truth = np.array([*_TRUTH.values(), 0.0])
    # the sketch estimates the share among all users; times P = 2 among those at position 0
    var = check.positions**2 * check._fragment_spec().variance(stats.n, truth / 2)
    return (f - truth) / np.sqrt(var)


def test_sketch_estimates_are_unbiased_with_the_documented_variance():
    spec, stats = _stats(4.0, 40_000)
    for z in (_word_z(spec, stats, spec), _fragment_z(spec, stats, spec)):
        assert np.all(np.abs(z) < 5), z


def test_sketch_check_fails_for_a_wrong_epsilon():
    spec, stats = _stats(4.0, 40_000)
    wrong = dataclasses.replace(spec, epsilon=4.0 * 1.3)
    for z in (_word_z(spec, stats, wrong), _fragment_z(spec, stats, wrong)):
        assert np.max(np.abs(z)) > 6, z


# --- discovery -------------------------------------------------------------------------------


def test_recovers_planted_heavy_hitters():
    words = np.array(["the", "and", "you", "that", "was", "for", "are", "with", "his", "they"])
    p = 1.0 / np.arange(1, 11)
    p /= p.sum()
    values = words[np.random.default_rng(1).choice(10, size=100_000, p=p)]
    found = SFP(epsilon=8.0, max_length=6, top_k=5).run(values, rng=0)
    assert set(found.items) == set(words[:5]), found.items
    truth = p[[list(words).index(s) for s in found.items]]
    z = (found.frequencies - truth) / found.std_error
    assert np.all(np.abs(z) < 5), z
    lo, hi = found.confidence_interval()
    assert np.all((lo <= found.frequencies) & (found.frequencies <= hi))


def test_stats_are_mergeable_and_independent_of_n():
    spec = SFP(epsilon=4.0, max_length=4, depth=8, width=64)
    values = ["pear", "kiwi", "fig"] * 50
    a = spec.aggregate(spec.randomize(values[:70], rng=1))
    b = spec.aggregate(spec.randomize(values[70:], rng=2))
    merged = a.merge(b)
    assert merged.n == 150
    for name in spec.stats_schema():
        assert getattr(merged, name).shape == getattr(a, name).shape


def test_control_keeps_only_significant_items():
    values = ["pear"] * 3000 + ["kiwi"] * 2000
    spec = SFP(epsilon=6.0, max_length=4, top_k=10, depth=16, control="fwer")
    found = spec.run(values, rng=3)
    assert set(found.items) == {"pear", "kiwi"}, found.items


def test_validation_messages():
    with pytest.raises(ValueError, match="alphabet, max_length"):
        SFP(epsilon=1.0, alphabet=None)
    assert SFP(epsilon=1.0, alphabet=None, fragment_length=1, max_length=4).positions == 4
    with pytest.raises(ValueError, match="fragment_share must"):
        SFP(epsilon=1.0, fragment_share=1e-300)
    with pytest.raises(ValueError, match="sketch must be"):
        SFP(epsilon=1.0, sketch="olh")
    with pytest.raises(ValueError, match="fragment_length must be"):
        SFP(epsilon=1.0, fragment_length=0)
    with pytest.raises(ValueError, match="values must use only"):
        SFP(epsilon=1.0).randomize(["ABC"], rng=0)
    spec = SFP(epsilon=1.0, depth=4, width=64)
    with pytest.raises(ValueError, match="reports"):
        spec.aggregate(Reports(spec, x=np.zeros(1, np.uint8)))
