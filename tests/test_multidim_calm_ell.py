"""CALM's choice of the collected marginals' size (CCS 2018, sec. 4.3) and their projections."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpkit import Stats
from ldpkit.multidim import CALM

SIZES = (3, 5, 2, 4)
PAIRS = [(0, 1), (1, 3), (2, 0), (3, 2), (0, 3), (1, 2)]


def population(n: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed)
    a = gen.choice(3, size=n, p=[0.6, 0.3, 0.1])
    b = (a + gen.choice(5, size=n, p=[0.5, 0.2, 0.15, 0.1, 0.05])) % 5
    c = (gen.random(n) < 0.2 + 0.2 * (a == 0)).astype(np.int64)
    e = (b + gen.integers(0, 2, n)) % 4
    return np.stack([a, b, c, e], axis=1)


def truth(x: np.ndarray, attrs: tuple[int, ...]) -> np.ndarray:
    bins = [np.arange(SIZES[a] + 1) for a in attrs]
    return np.histogramdd(x[:, list(attrs)], bins=bins)[0] / x.shape[0]


def grr_noise(eps: float, cells: int) -> float:
    """GRR's variance of one cell at f = 0 from one report: (e^eps + c - 2) / (e^eps - 1)^2."""
    return (math.exp(eps) + cells - 2) / (math.exp(eps) - 1) ** 2


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_expected_errors_by_hand_binary(eps):
    """Four binary attributes, 2-way requests, GRR: the model's three configurations."""
    got = CALM(epsilon=eps, domain_sizes=(2, 2, 2, 2), oracle="grr", ell=2).expected_errors()
    v = {c: c * grr_noise(eps, c) for c in (4, 8, 16)}
    # ell = 2: 6 groups, each pair from its own table; ell = 3: 4 groups, each pair in 2
    # tables of 8 cells (inverse-variance average of 2 equal errors: half); ell = 4: 1 group
    hand = {2: 6 * (v[4] + 0.75), 3: 4 * (v[8] + 0.75) / 2, 4: 1 * (v[16] + 0.75)}
    assert got.keys() == hand.keys()
    for ell in hand:
        assert got[ell] == pytest.approx(hand[ell], rel=1e-9)
    best = min(hand, key=hand.__getitem__)
    assert CALM(epsilon=eps, domain_sizes=(2, 2, 2, 2), oracle="grr").ell == best
    assert best == (2 if eps == 0.5 else 4)  # 212 vs 292 vs 595; 4.97 vs 1.84 vs 1.13


def test_expected_errors_by_hand_mixed_sizes():
    """Sizes (3, 2, 2): unequal covering tables are averaged by their inverse errors."""
    eps = 1.0
    got = CALM(epsilon=eps, domain_sizes=(3, 2, 2), oracle="grr", ell=2).expected_errors()
    v = {c: c * grr_noise(eps, c) for c in (4, 6, 12)}
    pairs = {(0, 1): 6, (0, 2): 6, (1, 2): 4}
    two = np.mean([3 * (v[c] + 1 - 1 / c) for c in pairs.values()])
    three = np.mean([1 * (v[12] + 1 - 1 / c) for c in pairs.values()])
    assert got[2] == pytest.approx(two, rel=1e-9) and got[3] == pytest.approx(three, rel=1e-9)
    assert CALM(epsilon=eps, domain_sizes=(3, 2, 2), oracle="grr").ell == min(got, key=got.get)


def test_choice_follows_the_model_and_is_resolved_in_the_spec():
    """OLH: larger tables of binary attributes pay (2^ell / C(ell, 2) falls to ell = 3, 4)."""
    spec = CALM(epsilon=1.0, domain_sizes=(2,) * 6)
    errors = spec.expected_errors()
    assert spec.ell == min(errors, key=errors.get) == 4
    assert spec.params()["ell"] == 4 and len(spec.marginal_sets) == math.comb(6, 4)
    # large domains: summing cells costs more than the groups' sampling saves
    assert CALM(epsilon=4.0, domain_sizes=(16, 3, 12, 20)).ell == 2
    assert CALM(epsilon=1.0, domain_sizes=(2,) * 6, ell=2).marginal_sets == tuple(
        (i, j) for i in range(6) for j in range(i + 1, 6)
    )


def test_the_plain_tables_stay_a_candidate_beyond_the_size_caps():
    """Pairs of 1024 x 1024 cells: ell = 3 is over the cap on collected cells, ell = 2 kept."""
    spec = CALM(epsilon=1.0, domain_sizes=(1024, 1024, 2))
    assert spec.ell == 2 and list(spec.expected_errors()) == [2]


def test_ell_validation():
    with pytest.raises(ValueError, match="ell must be"):
        CALM(epsilon=1.0, domain_sizes=(3, 4, 2), way=3, ell=2)
    with pytest.raises(ValueError, match="ell must be"):
        CALM(epsilon=1.0, domain_sizes=(3, 4, 2), ell=4)
    with pytest.raises(TypeError, match="ell must be"):
        CALM(epsilon=1.0, domain_sizes=(3, 4, 2), ell=2.5)


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_adjoint_variance_equals_the_closed_form_of_two_way_tables(oracle, monkeypatch):
    """The generic (adjoint) variance of a consistent table equals the 2-way closed form.

    The closed form clips each plug-in frequency and takes the groups as independent
    samples: equal to the generic one under both rules, within 2 % of it with the clipped
    plug-in and the partition's covariance across groups.
    """
    from ldpkit.multidim import calm as calm_module

    monkeypatch.setattr(calm_module, "PLUG_IN_UNCLIPPED", False)
    spec = CALM(epsilon=1.0, domain_sizes=SIZES, oracle=oracle, ell=2)
    stats = spec.aggregate(spec.randomize(population(20_000), rng=1))
    est, plain = spec.estimate(stats), spec.plain_tables(stats)
    null = [float(spec.marginal_oracle(m).variance(int(stats.sizes[m]))) for m in range(6)]
    for m, t in enumerate(est.tables):
        v = spec.projection_variance(plain, null, stats, t.attributes, {m: 1.0})
        np.testing.assert_allclose(v, t.variance, rtol=0.02, atol=0)
    monkeypatch.setattr(calm_module, "_partition_covariance", lambda s, f, n: np.zeros_like(s))
    for m, t in enumerate(est.tables):
        v = spec.projection_variance(plain, null, stats, t.attributes, {m: 1.0})
        np.testing.assert_allclose(v, t.variance, rtol=1e-9, atol=0)


def test_every_consistent_table_has_its_exact_variance():
    """ell > way: each table's variance is the adjoint's, and matches the spread over runs."""
    x = population(20_000)
    spec = CALM(epsilon=2.0, domain_sizes=SIZES, oracle="grr", ell=3)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    est, plain = spec.estimate(stats), spec.plain_tables(stats)
    null = [float(spec.marginal_oracle(m).variance(int(stats.sizes[m]))) for m in range(4)]
    for m, t in enumerate(est.tables):
        v = spec.projection_variance(plain, null, stats, t.attributes, {m: 1.0})
        np.testing.assert_allclose(t.variance, v, rtol=1e-9, atol=1e-15)
        assert float(t.variance.mean()) < float(plain[m].variance.mean())  # the step helps
    errs, var = [], []
    for rep in range(40):
        tables = spec.run(x, rng=200 + rep).tables
        errs.append(np.concatenate([(t.table - truth(x, t.attributes)).ravel() for t in tables]))
        var.append(np.concatenate([t.variance.ravel() for t in tables]))
    ratio = float((np.square(errs).mean(axis=0) / np.mean(var, axis=0)).mean())
    assert 0.85 <= ratio <= 1.15, ratio


def _max_z(est, x) -> float:
    out = 0.0
    for attrs in [*PAIRS, (1,)]:
        m = est.marginal(attrs)
        out = max(out, float(np.abs((m.table - truth(x, attrs)) / m.std_error).max()))
    return out


SPECS = {
    "olh-chosen": lambda eps: CALM(epsilon=eps, domain_sizes=SIZES),  # ell = 3 at eps 1
    "grr-3": lambda eps: CALM(epsilon=eps, domain_sizes=SIZES, oracle="grr", ell=3),
    "olh-4": lambda eps: CALM(epsilon=eps, domain_sizes=SIZES, ell=4),
}


@pytest.mark.parametrize("make", SPECS.values(), ids=SPECS.keys())
def test_projected_cells_unbiased_z(make):
    x = population(100_000)
    spec = make(1.0)
    assert spec.ell > spec.way
    assert _max_z(spec.run(x, rng=1), x) <= 5.0


@pytest.mark.parametrize("make", SPECS.values(), ids=SPECS.keys())
def test_projected_cells_z_fails_for_a_wrong_epsilon(make):
    x = population(100_000)
    spec, other = make(1.0), make(2.0).replace(ell=make(1.0).ell)
    stats = spec.aggregate(spec.randomize(x, rng=1))
    assert _max_z(other.estimate(Stats(other, stats.n, **stats.arrays)), x) > 6.0


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_projected_error_bars_match_the_spread_and_cover(oracle):
    """MSE over repetitions / reported variance within 15 %, 95 % intervals cover 93-97 %."""
    x = population(20_000)
    spec = CALM(epsilon=2.0, domain_sizes=SIZES, oracle=oracle, ell=3)
    errs, var, hits = [], [], []
    for rep in range(40):
        est = spec.run(x, rng=100 + rep)
        e, v, h = [], [], []
        for attrs in PAIRS:
            m, t = est.marginal(attrs), truth(x, attrs)
            lo, hi = m.confidence_interval(0.05)
            e.append((m.table - t).ravel())
            v.append(m.variance.ravel())
            h.append(((lo <= t) & (t <= hi)).ravel())
        errs.append(np.concatenate(e))
        var.append(np.concatenate(v))
        hits.append(np.concatenate(h))
    ratio = float((np.square(errs).mean(axis=0) / np.mean(var, axis=0)).mean())
    assert 0.85 <= ratio <= 1.15, ratio
    assert 0.93 <= float(np.mean(hits)) <= 0.97


@pytest.mark.parametrize("oracle", ["grr", "olh"])
def test_contract_with_larger_collected_tables(oracle):
    """The shared contract on a spec whose collected tables are larger than the requests."""
    from ldpkit.testing import check_mechanism

    spec = CALM(epsilon=1.0, domain_sizes=(2, 3, 2), oracle=oracle, ell=3)
    assert spec.ell == 3 and spec.marginal_sets == ((0, 1, 2),)
    check_mechanism(spec, rng=3)


def test_spec_dict_keeps_the_wire_identity_of_ell_equal_to_way():
    from ldpkit.spec import spec_from_dict

    chosen = CALM(epsilon=0.5, domain_sizes=(2,) * 8)  # binary attributes: a larger ell
    assert chosen.ell > chosen.way and chosen.to_dict()["params"]["ell"] == chosen.ell
    plain = CALM(epsilon=0.5, domain_sizes=(2,) * 8, ell=2)
    assert "ell" not in plain.to_dict()["params"]  # the dict (and fingerprint) of before
    for spec in (chosen, plain):
        assert spec_from_dict(spec.to_dict()) == spec
    legacy = chosen.to_dict()
    del legacy["params"]["ell"]  # a dict written before ell existed: its tables were way-way
    assert spec_from_dict(legacy) == plain
    legacy["params"]["ell"] = None  # an explicit null chooses, as the constructor does
    assert spec_from_dict(legacy) == chosen
