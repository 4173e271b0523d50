"""AutoDistribution's hybrid design (hh_share > 0): per user SW or HH by a value-blind coin,
one joint EM over the SW output counts and the HH levels' support counts."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from ldpkit.numeric import AutoDistribution, HierarchicalHistogram
from ldpkit.numeric.auto import _hybrid_model, _JointFitter, _split
from ldpkit.numeric.distribution import bucket_index
from ldpkit.privacy import privacy_loss
from ldpkit.spec import Reports, Stats, spec_from_dict
from ldpkit.testing import check_mechanism, chisquare_gof

ALPHA = 1e-6


def _smooth_ref(theta: np.ndarray, strength: float, window: int = 0) -> np.ndarray:
    """ceil(2 s) passes of (1 - w) theta + w S theta (S: EMS's kernel), renormalized; the
    first and last ``window`` buckets frozen (kept, receiving nothing; the passes see them
    holding their nearest free neighbour's value)."""
    if strength <= 0:
        return theta
    passes = math.ceil(2 * strength)
    w = 2 * strength / passes
    d = theta.size
    for _ in range(passes):
        src = theta.copy()
        if window:
            src[:window] = theta[window]
            src[d - window :] = theta[d - window - 1]
        s = np.empty_like(theta)
        s[1:-1] = 0.25 * src[:-2] + 0.5 * src[1:-1] + 0.25 * src[2:]
        s[0] = (2 * src[0] + src[1]) / 3
        s[-1] = (src[-2] + 2 * src[-1]) / 3
        new = (1 - w) * src + w * s
        if window:
            new[:window] = theta[:window]
            new[d - window :] = theta[d - window :]
        theta = new
    return theta / theta.sum()


def _joint_em_ref(spec: AutoDistribution, stats: Stats, strength: float, iters: int):
    """Numpy reference of the joint EM: SW's DLR update plus, per HH level, the signal
    hits' share (p - q) w C_v / pi_v of each node (pi_v = q + (p - q) a_v)."""
    model = _hybrid_model(spec)
    m = np.asarray(spec._outputs_by_inputs())
    c = np.asarray(stats.counts, dtype=np.float64)
    hk = np.asarray(stats.hh_counts, dtype=np.float64) * model.weights[m.shape[0] :]
    d = m.shape[1]
    theta = np.full(d, 1.0 / d)
    for _ in range(iters):
        grad = m.T @ (c / np.maximum(m @ theta, 1e-300))
        for off, size, rep, p, q in zip(model.offsets, model.sizes, model.reps, model.p, model.q):
            padded = np.zeros(size * rep)
            padded[:d] = theta
            a = padded.reshape(size, rep).sum(axis=1)
            ratio = hk[off : off + size] / np.maximum(q + (p - q) * a, 1e-300)
            grad += (p - q) * np.repeat(ratio, rep)[:d]
        theta = theta * grad
        theta = _smooth_ref(theta / theta.sum(), strength, model.window)
    return theta


# -- the client ------------------------------------------------------------------------------
def test_hybrid_honours_the_contract() -> None:
    check_mechanism(AutoDistribution(epsilon=1.0, buckets=16, hh_share=0.5))
    check_mechanism(AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.3), n=60)


def test_hh_share_zero_is_square_wave_alone() -> None:
    auto = AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.0)
    assert not auto.hybrid
    rep = auto.randomize(np.random.default_rng(0).random(100), rng=1)
    assert rep.fields == ("values",)
    assert tuple(auto.stats_schema()) == ("counts",)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"hh_share": -0.1}, ValueError, "hh_share"),
        ({"hh_share": 1.5}, ValueError, "hh_share"),
        ({"hh_share": float("nan")}, ValueError, "hh_share"),
        ({"hh_share": "0.2"}, TypeError, "hh_share"),
    ],
)
def test_bad_hh_share(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        AutoDistribution(epsilon=1.0, **kwargs)


def test_branch_coin_shares_and_fields() -> None:
    auto = AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.3)
    values = np.random.default_rng(2).random(40_000)
    rep = auto.randomize(values, rng=3)
    assert rep.fields == ("levels", "values", "items", "seeds")
    lv = np.asarray(rep.levels)
    n_hh = int((lv > 0).sum())
    # Binomial(n, 0.3): |z| <= 5
    assert abs(n_hh - 0.3 * values.size) <= 5 * math.sqrt(values.size * 0.3 * 0.7)
    # HH users are spread evenly over the 3 levels (at most 256 nodes each)
    per_level = np.bincount(lv[lv > 0], minlength=4)[1:]
    np.testing.assert_allclose(auto.hh_level_shares(), np.full(3, 1 / 3))
    assert chisquare_gof(per_level, np.full(3, 1 / 3)) > ALPHA
    st = auto.aggregate(rep)
    assert st.level_n.tolist() == [values.size - n_hh, *per_level.tolist()]
    assert int(np.asarray(st.counts).sum()) == values.size - n_hh
    # the same seed gives the same reports; the two halves merge to the whole
    assert auto.randomize(values, rng=3).equals(rep)
    assert auto.aggregate(rep[:15_000]).merge(auto.aggregate(rep[15_000:])) == st
    # pickle and JSON round trips of the spec and the stats
    assert pickle.loads(pickle.dumps(auto)) == auto
    assert spec_from_dict(auto.to_dict()) == auto
    assert Stats.from_dict(st.to_dict()) == st


def test_levels_field_is_checked() -> None:
    auto = AutoDistribution(epsilon=1.0, buckets=16, hh_share=0.5)
    rep = auto.randomize(np.linspace(0, 1, 10), rng=0)
    arrays = dict(rep.arrays)
    arrays["levels"] = np.full(10, 3, dtype=np.uint8)  # the tree has 2 levels
    with pytest.raises(ValueError, match="levels"):
        auto.aggregate(Reports(auto, **arrays))
    arrays.pop("levels")
    with pytest.raises(ValueError, match="levels"):
        auto.aggregate(Reports(auto, **arrays))


# -- privacy: the composed law ---------------------------------------------------------------
def _composed_rows(auto: AutoDistribution, seeds: np.ndarray, inputs: np.ndarray):
    """Exact law of one report for each SW grid input k in ``inputs`` (a row over all
    outputs): SW cells with probability 1 - r, then per level k with probability r times
    its share (``hh_level_shares``) its
    oracle's outputs (GRR items; OLH (seed, y) for each given seed, the seed uniform over
    them)."""
    wave, tree, r = auto.wave, auto.tree, float(auto.hh_share or 0)
    shares = auto.hh_level_shares()
    leaf = bucket_index(inputs / wave.input_steps, 0.0, 1.0, auto.buckets)
    hh_rows = {}
    for k_in, leaf_k in zip(inputs.tolist(), leaf.tolist(), strict=True):
        if leaf_k not in hh_rows:  # the HH part depends on the leaf only
            parts = []
            for level in range(1, tree.height + 1):
                oracle = tree.level_oracle(level)
                node = leaf_k // tree.branching ** (tree.height - level)
                if oracle.name == "GRR":
                    parts.append(r * shares[level - 1] * oracle.transition_matrix()[node])
                else:
                    hashed = oracle.hash_items(seeds, np.full(seeds.size, node))
                    law = np.full((seeds.size, oracle.range_size), oracle.other_probability)
                    law[np.arange(seeds.size), hashed] = oracle.p
                    parts.append(r * shares[level - 1] * law.ravel() / seeds.size)
            hh_rows[leaf_k] = np.concatenate(parts)
        yield np.concatenate([(1 - r) * wave.cell_probabilities(k_in), hh_rows[leaf_k]])


def _composed_loss(rows) -> float:
    """``privacy_loss`` of the matrix of ``rows`` without storing it (16k inputs x 30k
    outputs): the extremes of every output column over the inputs, streamed."""
    hi = lo = None
    for row in rows:
        assert abs(float(row.sum()) - 1.0) < 1e-12
        hi = row.copy() if hi is None else np.maximum(hi, row, out=hi)
        lo = row.copy() if lo is None else np.minimum(lo, row, out=lo)
    assert hi is not None and lo is not None
    used = hi > 0
    return float(np.max(np.log(hi[used]) - np.log(lo[used])))


@pytest.mark.slow  # 16k inputs x 20-30k outputs: 7-11 s each
@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_composed_law_is_exactly_eps_ldp(eps: float) -> None:
    auto = AutoDistribution(epsilon=eps, buckets=64, hh_share=0.4)
    seeds = np.arange(1, 9, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    every = np.arange(auto.wave.input_steps + 1)
    loss = _composed_loss(_composed_rows(auto, seeds, every))
    assert loss <= eps * (1 + 1e-9)
    assert loss == pytest.approx(auto.privacy_loss(), rel=1e-9)
    assert loss == pytest.approx(eps, rel=1e-6)  # tight: SW's and the oracles' own loss
    # the project's accounting on a subset of the inputs (the matrix fits in memory)
    some = np.union1d(every[:: max(1, every.size // 256)], [0, every[-1]])
    sub = np.asarray(list(_composed_rows(auto, seeds, some)))
    assert privacy_loss(sub) <= loss * (1 + 1e-12)
    # the same accounting catches a branch coin that looks at the value: r from 0.4 to 0.6
    # for the upper half of the inputs costs up to log(0.6 / 0.4) more in the HH outputs
    leaky = AutoDistribution(epsilon=eps, buckets=64, hh_share=0.6)
    half = every.size // 2
    mixed = [
        *_composed_rows(auto, seeds, every[:half]),
        *_composed_rows(leaky, seeds, every[half:]),
    ]
    assert _composed_loss(mixed) > eps + 0.1


def _report_categories(auto: AutoDistribution, rep: Reports, x: float) -> np.ndarray:
    """Each report's category: SW cell groups (32), then per level GRR items or OLH
    (support hit, miss) for the node of x."""
    wave, tree = auto.wave, auto.tree
    lv = np.asarray(rep.levels)
    out = np.empty(lv.size, dtype=np.int64)
    sw = lv == 0
    cells = wave.report_cells_of(Reports(wave, values=np.asarray(rep.values)[sw]))
    out[sw] = cells * 32 // wave.n_cells
    base = 32
    leaf = int(bucket_index(np.array([x]), 0.0, 1.0, auto.buckets)[0])
    for level in range(1, tree.height + 1):
        oracle = tree.level_oracle(level)
        m = lv == level
        node = leaf // tree.branching ** (tree.height - level)
        if oracle.name == "GRR":
            out[m] = base + np.asarray(rep.items)[m]
            base += oracle.domain_size
        else:
            hit = oracle.hash_items(np.asarray(rep.seeds)[m], np.full(int(m.sum()), node))
            out[m] = base + (hit != np.asarray(rep.items)[m])
            base += 2
    return out


def _category_law(auto: AutoDistribution, x: float, shares: np.ndarray | None = None) -> np.ndarray:
    wave, tree, r = auto.wave, auto.tree, float(auto.hh_share or 0)
    shares = auto.hh_level_shares() if shares is None else shares
    k_in = round(x * wave.input_steps)
    groups = np.arange(wave.n_cells) * 32 // wave.n_cells
    parts = [(1 - r) * np.bincount(groups, wave.cell_probabilities(k_in), minlength=32)]
    leaf = int(bucket_index(np.array([x]), 0.0, 1.0, auto.buckets)[0])
    for level in range(1, tree.height + 1):
        oracle = tree.level_oracle(level)
        node = leaf // tree.branching ** (tree.height - level)
        if oracle.name == "GRR":
            parts.append(r * shares[level - 1] * oracle.transition_matrix()[node])
        else:
            parts.append(r * shares[level - 1] * np.array([oracle.p, 1 - oracle.p]))
    return np.concatenate(parts)


def test_sampler_matches_the_composed_law_and_rejects_eps_times_1_3() -> None:
    eps = 1.0
    auto = AutoDistribution(epsilon=eps, buckets=1024, hh_share=0.4)
    x = 0.25  # on the SW input grid (a power of two steps)
    rep = auto.randomize(np.full(200_000, x), rng=11)
    cats = _report_categories(auto, rep, x)
    law = _category_law(auto, x)
    counts = np.bincount(cats, minlength=law.size)
    assert chisquare_gof(counts, law) > ALPHA
    wrong = AutoDistribution(epsilon=1.3 * eps, buckets=1024, hh_share=0.4)
    wrong_law = _category_law(wrong, x)
    assert wrong_law.size == law.size  # same oracles per level, same SW grid cells
    assert chisquare_gof(counts, wrong_law) < ALPHA
    # the levels: 1/5 each, the leaves (1024 nodes) included; the former allocation (level
    # 5's share at level 4) is rejected
    h = auto.tree.height
    assert h == 5
    np.testing.assert_allclose(auto.hh_level_shares(), np.full(h, 0.2))
    former = _category_law(auto, x, np.array([0.2, 0.2, 0.2, 0.4, 0.0]))
    used = former > 0
    assert chisquare_gof(counts[used], former[used] / former[used].sum()) < ALPHA


# -- the estimator ---------------------------------------------------------------------------
@pytest.mark.parametrize("eps, strength", [(4.0, 0.5), (1.0, 0.0), (1.0, 2.0)])
def test_joint_fit_is_the_numpy_reference(eps: float, strength: float) -> None:
    auto = AutoDistribution(epsilon=eps, buckets=64, hh_share=0.5)
    values = np.random.default_rng(5).beta(2, 5, 20_000)
    st = auto.aggregate(auto.randomize(values, rng=6))
    counts, wts, make = auto._model(st)
    fitter = make(counts * wts)
    assert isinstance(fitter, _JointFitter)
    # the end windows apply below eps 3 (the reference freezes them too)
    assert (_hybrid_model(auto).window > 0) == (eps < 3)
    theta, it = fitter.fit(strength, -1.0, 25, None)  # tol < 0: exactly 25 iterations
    assert it == 25
    np.testing.assert_allclose(theta, _joint_em_ref(auto, st, strength, 25), rtol=1e-9, atol=1e-13)
    # predict: SW rows M theta, then q + (p - q) a_v per node
    pred = fitter.predict(theta)
    rows = auto._outputs_by_inputs().shape[0]
    np.testing.assert_allclose(pred[:rows], auto._outputs_by_inputs() @ theta, atol=1e-15)
    md = _hybrid_model(auto)
    leaf_level = md.offsets[-1]
    np.testing.assert_allclose(pred[rows + leaf_level :], md.q[-1] + (md.p[-1] - md.q[-1]) * theta)


@pytest.mark.parametrize("window", [0, 1, 5])
def test_window_smoothing_freezes_the_end_buckets(window: int) -> None:
    """The end windows' smoothing: no frozen bucket is the plain smoothing to the bit; the
    frozen buckets keep their values (up to the one renormalization), the free ones are the
    passes over the flat continuation (the numpy reference)."""
    from ldpkit.numeric._kernels_auto import _smooth, _smooth_step

    d = 40
    theta = np.random.default_rng(3).random(d) ** 4
    theta /= theta.sum()
    frozen = np.zeros(d, dtype=np.bool_)
    frozen[:window] = True
    frozen[d - window :] = True
    for strength in (0.5, 2.0, 1.25):
        passes = math.ceil(2 * strength)
        weight = 2 * strength / passes
        got, tmp, smooth = theta.copy(), np.empty(d), np.empty(d)
        _smooth_step(got, frozen, 2, passes, weight, smooth, tmp)
        want = _smooth_ref(theta.copy(), strength, window)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-16)
        if window == 0:
            plain = theta.copy()
            _smooth(plain, np.empty(d), passes, weight)
            assert np.array_equal(got, plain)
        else:
            ratio = got[frozen] / theta[frozen]
            np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)


def test_level_one_masses_within_their_standard_error() -> None:
    # HH users only (r = 1), plain EM: the quarter masses of the joint fit are at least as
    # precise as level 1's GRR estimate alone, whose standard error bounds them (|z| <= 5);
    # the fit under a model of epsilon x 1.3 (same counts) misses by far more.
    n, eps = 200_000, 1.0
    gen = np.random.default_rng(7)
    values = gen.beta(2, 5, n)
    truth = np.bincount(np.minimum((values * 4).astype(int), 3), minlength=4) / n
    auto = AutoDistribution(epsilon=eps, buckets=64, hh_share=1.0)
    st = auto.aggregate(auto.randomize(values, rng=8))
    n1 = int(st.level_n[1])
    se = math.sqrt(auto.tree.level_oracle(1).variance(n1))

    def quarters(spec: AutoDistribution) -> np.ndarray:
        md = _hybrid_model(spec)
        rows = md.weights.size - np.asarray(st.hh_counts).size
        counts = np.concatenate([np.zeros(rows), np.asarray(st.hh_counts, dtype=np.float64)])
        theta, _ = _JointFitter(md, counts * md.weights).fit(0.0, 1e-6, 5000, None)
        return theta.reshape(4, -1).sum(axis=1)

    assert np.max(np.abs(quarters(auto) - truth)) / se <= 5
    wrong = AutoDistribution(epsilon=1.3 * eps, buckets=64, hh_share=1.0)
    assert np.max(np.abs(quarters(wrong) - truth)) / se > 6


def test_hybrid_estimate_is_deterministic_and_recovers_point_masses() -> None:
    gen = np.random.default_rng(9)
    n = 60_000
    values = np.where(gen.random(n) < 0.4, 0.0, gen.beta(2, 5, n))  # 40 % at 0
    auto = AutoDistribution(epsilon=2.0, expected_n=n, hh_share=0.25)
    st = auto.aggregate(auto.randomize(values, rng=10))
    dist, info = auto.estimate(st, return_info=True)
    again = auto.estimate(st)
    np.testing.assert_array_equal(dist.probabilities, again.probabilities)
    assert dist.n == n and abs(float(dist.probabilities.sum()) - 1.0) < 1e-9
    # the atom at 0: its mass within 5 standard errors of SW + HH level-1-sized noise
    # (a smeared fit holds < 0.3 in the first bucket)
    assert float(dist.probabilities[0]) == pytest.approx(0.4, abs=0.05)
    total = info.weights.sum() + info.budget_weights.sum() + info.end_weights.sum()
    assert total == pytest.approx(1.0)
    # splitting the counts (SW rows and HH nodes alike) into folds is a fair thinning
    counts, _, _ = auto._model(st)
    parts = _split(counts, 2, np.random.default_rng(0))
    np.testing.assert_array_equal(parts.sum(axis=0), counts)


def test_tree_of_the_hybrid_is_the_hh_spec() -> None:
    auto = AutoDistribution(epsilon=1.0, low=-2.0, high=3.0, buckets=128, hh_share=0.2)
    assert auto.tree == HierarchicalHistogram(
        epsilon=1.0, low=-2.0, high=3.0, buckets=128, branching=4
    )
    assert auto.privacy_loss() == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("strength", [0.0, 2.0])
def test_joint_fit_band_path_is_the_box_path(strength: float) -> None:
    auto = AutoDistribution(epsilon=1.0, buckets=128, hh_share=0.3)
    values = np.random.default_rng(12).beta(2, 5, 20_000)
    st = auto.aggregate(auto.randomize(values, rng=13))
    counts, wts, make = auto._model(st)
    fitter = make(counts * wts)
    assert fitter.sw.box is not None
    fast, it_fast = fitter.fit(strength, -1.0, 300, None)  # tol < 0: 300 plain updates
    box, fitter.sw.box = fitter.sw.box, None
    slow, it_slow = fitter.fit(strength, -1.0, 300, None)
    fitter.sw.box = box
    assert it_fast == it_slow == 300
    np.testing.assert_allclose(fast, slow, rtol=1e-9, atol=1e-15)
    # run to the stop (SQUAREM): its step lengths amplify rounding, not more
    fast, it_fast = fitter.fit(strength, 1e-3, 3000, None)
    fitter.sw.box = None
    slow, it_slow = fitter.fit(strength, 1e-3, 3000, None)
    fitter.sw.box = box
    assert abs(it_fast - it_slow) <= 30
    np.testing.assert_allclose(fast, slow, rtol=1e-3, atol=1e-9)


@pytest.mark.parametrize("strength", [0.0, 0.5, 8.0])
def test_accelerated_fit_reaches_the_plain_fits_stop(
    strength: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQUAREM changes the path, not the destination: a smoothed fit converges to the same
    # fixed point, plain EM to (about) where EM run to its stop ends, in far fewer updates
    import ldpkit.numeric.auto as auto_module

    auto = AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.3)
    values = np.random.default_rng(14).beta(2, 5, 50_000)
    st = auto.aggregate(auto.randomize(values, rng=15))
    counts, wts, make = auto._model(st)
    fitter = make(counts * wts)
    tol = 1e-3 * math.exp(1.0) if strength == 0 else 1e-3
    fast, it_fast = fitter.fit(strength, tol, 100_000, None)
    monkeypatch.setattr(auto_module, "_ACCELERATE", False)
    slow, it_slow = fitter.fit(strength, tol, 100_000, None)
    ref, _ = fitter.fit(strength, tol * 1e-4, 100_000, slow)  # the limit, closer
    assert it_fast < it_slow / 3
    gap = np.abs(np.cumsum(fast) - np.cumsum(slow)).max()
    # both are within their stopping error of the limit; plain EM stops earlier
    assert gap <= np.abs(np.cumsum(ref) - np.cumsum(slow)).max() + 1e-4
    if strength > 0:  # a fixed point: the accelerated fit about as close to it (both stop
        # on the same log-likelihood change; measured 0.45-1.15x plain EM's CDF gap)
        assert np.abs(np.cumsum(fast) - np.cumsum(ref)).max() <= 1.25 * max(
            np.abs(np.cumsum(slow) - np.cumsum(ref)).max(), 1e-6
        )


def test_accelerated_fit_respects_its_update_cap() -> None:
    # the cap counts every update (a SQUAREM cycle takes 3-4): never more than max_iter,
    # and a cap too small for a cycle still returns one EM update, not the start
    auto = AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.3)
    values = np.random.default_rng(16).beta(2, 5, 20_000)
    st = auto.aggregate(auto.randomize(values, rng=17))
    counts, wts, make = auto._model(st)
    fitter = make(counts * wts)
    for cap in (1, 2, 3, 4, 5, 9, 40):
        theta, it = fitter.fit(0.0, 1e-12, cap, None)
        assert 1 <= it <= cap
        assert abs(float(theta.sum()) - 1.0) < 1e-12
    one, _ = fitter.fit(0.0, -1.0, 1, None)  # exactly one plain update
    capped, it = fitter.fit(0.0, 1e-12, 3, None)
    assert it == 1
    np.testing.assert_allclose(capped, one, rtol=1e-12, atol=1e-15)
