"""PaddingSampling: exact law and privacy, unbiasedness, variance, padding bias."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ldpkit import Encoder, Stats
from ldpkit.privacy import privacy_loss
from ldpkit.sets import PaddingSampling, SetFrequencyEstimate, UserSets
from ldpkit.testing import chisquare_gof, variance_ratio_bounds


def _zipf_sets(n: int, d: int, max_len: int, seed: int) -> UserSets:
    """Users with 0..max_len distinct items, Zipf-ish popularity (CSR, vectorized)."""
    gen = np.random.default_rng(seed)
    lengths = gen.integers(0, max_len + 1, n)
    weights = 1.0 / np.arange(1, d + 1)
    # per user: the first L items of a random order biased to popular items (Gumbel top-k)
    keys = np.log(weights)[None, :] + gen.gumbel(size=(n, d))
    order = np.argsort(-keys, axis=1)
    mask = np.arange(d)[None, :] < lengths[:, None]
    items = order[mask]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return UserSets(items, offsets)


def _padded_truth(sets: UserSets, d: int, ell: int) -> np.ndarray:
    lengths = sets.lengths
    weight = np.minimum(1.0, ell / np.maximum(lengths, 1))
    w = np.repeat(weight, lengths)
    return np.bincount(sets.items, weights=w, minlength=d) / len(sets)


def _law(spec: PaddingSampling, items: list[int]) -> np.ndarray:
    """Exact P[report | set] for the GRR oracle (mixture of GRR rows over the slots)."""
    d, ell = spec.domain_size, spec.padding
    slots = max(len(items), ell)
    picked = list(items) + [d + u for u in range(len(items), slots)]
    rows = spec.inner.transition_matrix()[picked]
    return rows.mean(axis=0)


def test_privacy_loss_is_the_exact_loss_over_all_sets():
    spec = PaddingSampling(epsilon=1.3, domain_size=4, padding=2, oracle="grr")
    sets = [list(c) for k in range(5) for c in itertools.combinations(range(4), k)]
    matrix = np.array([_law(spec, s) for s in sets])
    assert np.allclose(matrix.sum(axis=1), 1.0)
    assert privacy_loss(matrix) == pytest.approx(spec.privacy_loss(), rel=1e-12)
    assert spec.privacy_loss() < spec.epsilon and not spec.exact_epsilon
    # ell = 1 is GRR itself: tight
    one = PaddingSampling(epsilon=1.3, domain_size=4, padding=1, oracle="grr")
    assert one.privacy_loss() == pytest.approx(1.3, abs=1e-12) and one.exact_epsilon


def test_sampler_matches_the_law_and_fails_for_a_wrong_epsilon():
    spec = PaddingSampling(epsilon=1.0, domain_size=5, padding=3, oracle="grr")
    for items in ([0, 2], [1, 2, 3, 4], []):
        reports = spec.randomize([items] * 40_000, rng=7)
        observed = np.bincount(reports.values, minlength=8)
        assert chisquare_gof(observed, _law(spec, items)) > 1e-6
        wrong = spec.replace(epsilon=1.3)
        assert chisquare_gof(observed, _law(wrong, items)) < 1e-6


def _z_scores(spec: PaddingSampling, sets: UserSets, stats: Stats | None = None) -> np.ndarray:
    stats = spec.aggregate(spec.randomize(sets, rng=11)) if stats is None else stats
    est = spec.estimate(stats)
    truth = _padded_truth(sets, spec.domain_size, spec.padding)
    return (est.frequencies - truth) / np.sqrt(spec.variance(stats.n, truth))


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_unbiased_for_the_padded_frequency(oracle):
    sets = _zipf_sets(60_000, 12, 6, seed=1)  # sets longer than ell = 3 too
    spec = PaddingSampling(epsilon=2.0, domain_size=12, padding=3, oracle=oracle)
    z = _z_scores(spec, sets)
    assert np.max(np.abs(z)) <= 5.0, z


def test_unbiasedness_check_fails_for_a_wrong_epsilon():
    sets = _zipf_sets(60_000, 12, 6, seed=1)
    spec = PaddingSampling(epsilon=2.0, domain_size=12, padding=3, oracle="grr")
    stats = spec.aggregate(spec.randomize(sets, rng=11))
    wrong = spec.replace(epsilon=2.0 * 1.3)
    forged = Stats(wrong, stats.n, counts=stats.counts)
    assert np.max(np.abs(_z_scores(wrong, sets, forged))) > 5.0


def test_variance_within_ten_percent_of_the_formula():
    """4000 independent runs of n = 400 users at once (reports split by run)."""
    d, ell, n, runs = 6, 2, 400, 4000
    spec = PaddingSampling(epsilon=1.0, domain_size=d, padding=ell, oracle="grr")
    sets = _zipf_sets(n, d, 4, seed=3)
    many = UserSets(np.tile(sets.items, runs), _tile_offsets(sets.offsets, runs))
    values = spec.randomize(many, rng=5).values.astype(np.int64)
    run = np.repeat(np.arange(runs), n)
    counts = np.bincount(run * (d + ell) + values, minlength=runs * (d + ell))
    counts = counts.reshape(runs, d + ell)
    p, q = spec.inner.p, spec.inner.q
    est = ell * (counts[:, :d] / n - q) / (p - q)
    truth = _padded_truth(sets, d, ell)
    ratio = est.var(axis=0, ddof=1) / spec.variance(n, truth)
    lo, hi = variance_ratio_bounds(runs - 1, 1e-6)
    assert np.all((ratio > lo) & (ratio < hi)), ratio
    assert np.all(np.abs(ratio - 1.0) < 0.10), ratio
    # and the estimate's own plug-in variance is the formula at the estimate
    one = spec.estimate(Stats(spec, n, counts=counts[0]))
    assert np.allclose(one.variance, spec.variance(n, np.clip(one.frequencies, 0, 1)))


def _tile_offsets(offsets: np.ndarray, runs: int) -> np.ndarray:
    lengths = np.tile(np.diff(offsets), runs)
    return np.concatenate([[0], np.cumsum(lengths)])


def test_length_information_and_the_padding_bias_bound():
    d, ell = 10, 3
    sets = _zipf_sets(80_000, d, 6, seed=4)
    spec = PaddingSampling(epsilon=2.0, domain_size=d, padding=ell, oracle="grr")
    est = spec.run(sets, rng=2)
    assert isinstance(est, SetFrequencyEstimate)
    lengths = sets.lengths
    cdf_true = np.array([(lengths <= j).mean() for j in range(ell)])
    se = np.sqrt(spec.variance(len(sets), cdf_true))
    assert np.max(np.abs((est.length_cdf - cdf_true) / se)) <= 5.0
    long_true = (lengths >= ell).mean()
    assert abs(est.long_share - long_true) <= 5.0 * np.sqrt(est.long_share_variance)
    # the true frequencies lie in [padded - CI, padded + CI + bias bound]
    f_true = sets.frequencies(d)
    t = _padded_truth(sets, d, ell)
    assert np.all(f_true - t <= long_true + 1e-12)
    lo, hi = est.padded_interval(0.01)
    assert np.all((lo <= f_true) & (f_true <= hi))
    assert est.bias_bound(0.01) >= long_true
    frame = est.to_frame()
    assert list(frame.columns[-2:]) == ["ci_high_padded", "bias_bound"]


def test_csr_and_lists_give_the_same_reports_and_labels_work():
    lists = [[0, 3], [], [2, 1, 4], [4]]
    spec = PaddingSampling(epsilon=1.0, domain_size=5, padding=2)
    a = spec.randomize(lists, rng=3)
    b = spec.randomize(UserSets.from_lists(lists), rng=3)
    assert a.equals(b)
    enc = Encoder(["mail", "maps", "chat", "news", "game"])
    labelled = UserSets.from_lists([["mail", "news"], [], ["chat", "maps", "game"]], encoder=enc)
    assert labelled.items.tolist() == [0, 3, 2, 1, 4]
    est = enc.label(spec.run(labelled, rng=0))
    assert isinstance(est, SetFrequencyEstimate) and est.labels[0] == "mail"


def test_bad_inputs_name_the_parameter():
    spec = PaddingSampling(epsilon=1.0, domain_size=5, padding=2)
    with pytest.raises(ValueError, match="values must be items in"):
        spec.randomize([[0, 5]])
    with pytest.raises(ValueError, match="values must be distinct"):
        spec.randomize([[1, 1]])
    with pytest.raises(TypeError, match="values must be"):
        spec.randomize([0, 1, 2])
    with pytest.raises(TypeError, match="Encoder"):
        spec.randomize([["a"]])
    with pytest.raises(ValueError, match="padding must be"):
        PaddingSampling(epsilon=1.0, domain_size=5, padding=0)
    with pytest.raises(ValueError, match="oracle must be"):
        PaddingSampling(epsilon=1.0, domain_size=5, padding=2, oracle="oue")
    with pytest.raises(ValueError, match="items must be .* offsets"):
        UserSets(np.array([1, 2]), np.array([0, 3]))
    with pytest.raises(ValueError, match="offsets must be"):
        UserSets(np.array([1, 2]), np.array([1, 2]))


def test_oracle_choice_follows_fo17():
    assert PaddingSampling(epsilon=1.0, domain_size=6, padding=2).oracle_name == "grr"
    assert PaddingSampling(epsilon=1.0, domain_size=600, padding=2).oracle_name == "olh"
