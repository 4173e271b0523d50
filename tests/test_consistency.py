"""Tests of ldpkit.consistency (CON20 section IV): exact solutions, properties, validation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from ldpkit import GRR, FrequencyEstimate
from ldpkit import consistency as C
from ldpkit.frequency import significance_cutoff
from ldpkit.frequency.significance import expected_false_positive_cutoff
from ldpkit.queries import mse, random_subsets, set_answers, single_value_answers

NAMES = [
    "base_pos",
    "post_pos",
    "base_cut",
    "norm",
    "norm_mul",
    "norm_cut",
    "norm_sub",
    "mle_apx",
    "power",
    "power_ns",
    "ibu",
]
# CON20 Table I: which outputs are non-negative and which sum to one.
NON_NEGATIVE = {
    "base_pos",
    "base_cut",
    "norm_mul",
    "norm_cut",
    "norm_sub",
    "mle_apx",
    "power",
    "power_ns",
    "ibu",
}
SUM_TO_ONE = {"norm", "norm_mul", "norm_sub", "mle_apx", "power_ns", "ibu"}


def make_est(freqs, *, epsilon=1.0, n=10_000, spec=True):
    freqs = np.asarray(freqs, dtype=float)
    s = GRR(epsilon=epsilon, domain_size=freqs.size) if spec else None
    var = s.variance(n) if s is not None else np.full(freqs.size, 1e-3)
    return FrequencyEstimate(freqs, var, n=n, spec=s)


def grr_estimate(d=64, n=20_000, epsilon=1.0, seed=0, s=1.5):
    w = 1.0 / np.arange(1, d + 1) ** s
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    values = np.repeat(np.arange(d), counts)
    grr = GRR(epsilon=epsilon, domain_size=d)
    est = grr.estimate(grr.aggregate(grr.randomize(values, rng=seed)))
    return est, counts / n


# ------------------------------------------------------------------------- registry


def test_registry_names_and_tags():
    assert list(C.METHODS) == NAMES
    est, _ = grr_estimate()
    for name, fn in C.METHODS.items():
        out = fn(est)
        assert isinstance(out, FrequencyEstimate)
        assert out is not est
        assert out.postprocessing == (name,)
        assert not out.unbiased
        assert out.n == est.n and out.spec == est.spec
        # the variance is carried over unchanged (documented as no longer unbiased)
        assert np.array_equal(out.variance, est.variance)
        assert out.frequencies.shape == est.frequencies.shape
        assert not np.shares_memory(out.frequencies, est.frequencies) or name == "post_pos"


def test_input_not_modified_and_chaining():
    est, _ = grr_estimate()
    before = est.frequencies.copy()
    out = C.norm_sub(C.base_cut(est))
    assert np.array_equal(est.frequencies, before)
    assert out.postprocessing == ("base_cut", "norm_sub")


@pytest.mark.parametrize("name", NAMES)
def test_validation(name):
    fn = C.METHODS[name]
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        fn([0.5, 0.5] if name != "post_pos" else "not numbers")
    with pytest.raises(TypeError, match="estimate must be a FrequencyEstimate"):
        fn(None)
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="must be finite"):
            fn(make_est([0.5, bad, 0.5]))


def test_mle_apx_needs_pure_oracle():
    with pytest.raises(ValueError, match="mle_apx needs an estimate from a pure frequency oracle"):
        C.mle_apx(make_est([0.6, 0.4], spec=False))


def test_power_needs_one_variance():
    est = FrequencyEstimate([0.6, 0.3, 0.1], [1e-3, 2e-3, 3e-3], n=100)
    with pytest.raises(ValueError, match="power needs one noise variance"):
        C.power(est)
    out = C.power(est, variance=1e-3)  # explicit Var* works without a spec
    assert np.all(out.frequencies > 0)
    with pytest.raises(ValueError, match="variance must be a finite number >= 0"):
        C.power(est, variance=-1.0)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        C.power(est, variance=1e-3, alpha=-1.0)


def test_base_cut_alpha_validation():
    est = make_est([0.5, 0.5])
    with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
        C.base_cut(est, alpha=0.0)
    with pytest.raises(TypeError, match="alpha must be a finite number"):
        C.base_cut(est, alpha="2")


# ------------------------------------------------------------------------- closed forms


def test_base_pos_norm_norm_mul_closed_forms():
    f = np.array([0.7, -0.2, 0.5, 0.0, -0.05])
    est = make_est(f)
    assert np.array_equal(C.base_pos(est).frequencies, np.maximum(f, 0))
    np.testing.assert_allclose(C.norm(est).frequencies, f + (1 - f.sum()) / 5, rtol=0, atol=1e-15)
    np.testing.assert_allclose(C.norm_mul(est).frequencies, np.maximum(f, 0) / 1.2, atol=1e-15)
    # no positive estimate: nothing to scale, uniform
    assert np.array_equal(C.norm_mul(make_est([-0.1, -0.2])).frequencies, [0.5, 0.5])


def test_norm_is_noop_for_grr():
    est, _ = grr_estimate()
    np.testing.assert_allclose(C.norm(est).frequencies, est.frequencies, rtol=0, atol=1e-14)


@pytest.mark.parametrize("alpha", [0.05, 2.0, 10.0])
def test_base_cut_cutoff_formula(alpha):
    est, _ = grr_estimate(d=64, n=20_000, epsilon=1.0)
    var_star = est.spec.variance(est.n)  # Var* = q(1-q) / (n (p-q)^2), FO17 eq. 3
    p, q = est.spec.p, est.spec.q
    assert var_star == pytest.approx(q * (1 - q) / (est.n * (p - q) ** 2), rel=1e-14)
    expected = stats.norm.ppf(1 - alpha / 64) * math.sqrt(var_star)
    threshold = expected_false_positive_cutoff(est, alpha)
    np.testing.assert_allclose(threshold, expected, rtol=1e-12)
    if alpha < 1:  # a family-wise error probability: the same cutoff
        np.testing.assert_array_equal(significance_cutoff(est, alpha), threshold)
    out = C.base_cut(est, alpha=alpha).frequencies
    f = est.frequencies
    assert np.array_equal(out, np.where(f >= expected, f, 0.0))
    assert np.all(out >= 0)


def test_base_cut_default_alpha_is_two():
    est, _ = grr_estimate()
    assert np.array_equal(C.base_cut(est).frequencies, C.base_cut(est, alpha=2.0).frequencies)
    # a larger alpha means a lower threshold: more items kept
    assert (C.base_cut(est, 20.0).frequencies > 0).sum() >= (
        C.base_cut(est, 0.05).frequencies > 0
    ).sum()


def test_base_cut_cutoff_edge_cases():
    est = make_est([0.5, 0.3, 0.2, 0.0])
    # alpha >= d/2: quantile <= 0, threshold 0 (Base-Pos)
    assert np.all(expected_false_positive_cutoff(est, 2.0) == 0)
    assert np.all(expected_false_positive_cutoff(est, 100.0) == 0)
    # tiny alpha/d stays accurate
    big = make_est(np.full(10, 0.1))
    t = significance_cutoff(big, 1e-12)[0]
    assert t == pytest.approx(stats.norm.isf(1e-13) * math.sqrt(big.variance_null[0]), rel=1e-12)
    # without a spec the estimate's own variance is used
    plain = FrequencyEstimate([0.5, 0.3, 0.2, 0.0, 0.0, 0.0], 0.01, n=100)
    assert significance_cutoff(plain, 0.6)[0] == pytest.approx(stats.norm.isf(0.1) * 0.1, rel=1e-12)


def brute_norm_cut(f):
    """Literal CON20 definition: smallest theta > 0 with sum_{f >= theta} f <= 1."""
    one = 1 + 4 * f.size * np.finfo(float).eps  # the documented rounding slack
    pos = np.maximum(f, 0)
    if pos.sum() <= one:
        return pos
    candidates = [*sorted({x for x in f if x > 0}), math.inf]
    for theta in candidates:
        if f[f >= theta].sum() <= one:
            return np.where(f >= theta, f, 0.0)
    raise AssertionError


def test_norm_cut_brute_force_and_ties():
    rng = np.random.default_rng(3)
    for _ in range(300):
        d = int(rng.integers(2, 12))
        f = np.round(rng.uniform(-0.4, 0.6, d), 1)  # coarse grid: many ties
        np.testing.assert_array_equal(C.norm_cut(make_est(f)).frequencies, brute_norm_cut(f))
    # negatives would pull the running total back under 1: they must not be kept
    f = np.array([0.5, 0.3, 0.15, 0.1, -0.05])
    assert np.array_equal(C.norm_cut(make_est(f)).frequencies, [0.5, 0.3, 0.15, 0, 0])
    # a tie straddling the boundary is dropped as a whole
    assert np.array_equal(C.norm_cut(make_est([0.6, 0.3, 0.3])).frequencies, [0.6, 0, 0])


# ------------------------------------------------------------------------- Norm-Sub


def brute_projection(v):
    """Exact simplex projection by enumerating every active set (small d)."""
    d = v.size
    best, best_dist = None, math.inf
    for k in range(1, d + 1):
        for active in itertools.combinations(range(d), k):
            idx = list(active)
            delta = (1 - v[idx].sum()) / k
            x = np.zeros(d)
            x[idx] = v[idx] + delta
            if np.all(x >= -1e-15):
                dist = np.sum((x - v) ** 2)
                if dist < best_dist:
                    best, best_dist = x, dist
    return best


def check_kkt_projection(v, x, tol=1e-12):
    """x = max(v + delta, 0) for one delta, and sum x = 1."""
    assert abs(x.sum() - 1) <= tol * max(1, v.size)
    active = x > 0
    assert active.any()
    delta = np.mean(x[active] - v[active])
    np.testing.assert_allclose(x, np.maximum(v + delta, 0), rtol=0, atol=tol * 10)


finite_floats = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite_floats, min_size=1, max_size=60))
def test_simplex_projection_kkt(values):
    v = np.array(values)
    check_kkt_projection(v, C.simplex_projection(v))


def test_simplex_projection_against_enumeration_and_qp():
    rng = np.random.default_rng(4)
    for trial in range(60):
        d = int(rng.integers(1, 8))
        v = rng.normal(0.1, 0.5, d) if trial % 3 else -rng.uniform(0.01, 1, d)
        x = C.simplex_projection(v)
        np.testing.assert_allclose(x, brute_projection(v), rtol=0, atol=1e-12)
        qp = optimize.minimize(
            lambda z, v=v: np.sum((z - v) ** 2),
            np.full(d, 1 / d),
            jac=lambda z, v=v: 2 * (z - v),
            method="SLSQP",
            bounds=[(0, None)] * d,
            constraints=[
                {"type": "eq", "fun": lambda z: z.sum() - 1, "jac": lambda z: np.ones_like(z)}
            ],
            options={"ftol": 1e-15, "maxiter": 500},
        )
        assert qp.success
        np.testing.assert_allclose(x, qp.x, rtol=0, atol=1e-6)
        # exact: never worse than the generic solver
        assert np.sum((x - v) ** 2) <= np.sum((qp.x - v) ** 2) + 1e-12


def test_simplex_projection_special_inputs():
    assert np.array_equal(C.simplex_projection([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(C.simplex_projection([-1.0, -1.0, -1.0, -1.0]), [0.25] * 4)
    np.testing.assert_allclose(C.simplex_projection([-0.5, -0.1, -0.3]), [2 / 15, 8 / 15, 5 / 15])
    np.testing.assert_allclose(C.simplex_projection([-5.0, -0.1, -0.3]), [0, 0.6, 0.4])
    assert np.array_equal(C.simplex_projection([7.0]), [1.0])
    np.testing.assert_allclose(C.simplex_projection(np.full(5, 1e6)), np.full(5, 0.2))


def test_norm_sub_matches_projection_at_scale():
    est, _ = grr_estimate(d=4096, n=50_000, epsilon=2.0)
    out = C.norm_sub(est).frequencies
    check_kkt_projection(est.frequencies, out, tol=1e-12)


# ------------------------------------------------------------------------- MLE-Apx


def mle_objective(f, ft, p, q):
    a, b = q * (1 - q), (p - q) * (1 - p - q)
    return np.sum((f - ft) ** 2 * (p - q) ** 2 / (a + b * f))


def solve_mle_numerically(ft, p, q):
    d = ft.size
    res = optimize.minimize(
        mle_objective,
        np.full(d, 1 / d),
        args=(ft, p, q),
        method="SLSQP",
        bounds=[(0, 1)] * d,
        constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert res.success, res.message
    return res.x


@pytest.mark.parametrize("seed", range(12))
def test_mle_apx_matches_numeric_maximisation(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 8))
    eps = float(rng.uniform(0.3, 3.0))
    n = int(rng.integers(200, 5000))
    spec = GRR(epsilon=eps, domain_size=d)
    truth = rng.dirichlet(np.full(d, 0.4))
    counts = rng.multinomial(n, truth @ spec.transition_matrix())
    est = spec.estimate(type(spec.empty_stats())(spec, n, counts=counts))
    p, q = spec.p, spec.q
    ours = C.mle_apx(est).frequencies
    numeric = solve_mle_numerically(est.frequencies, p, q)
    assert abs(ours.sum() - 1) < 1e-12 and ours.min() >= 0
    np.testing.assert_allclose(ours, numeric, rtol=0, atol=2e-5)
    assert (
        mle_objective(ours, est.frequencies, p, q)
        <= mle_objective(numeric, est.frequencies, p, q) + 1e-12
    )


def check_mle_kkt(ft, f, p, q, tol=1e-9):
    """Stationarity with one multiplier on the active set, dual feasibility off it."""
    a, b = q * (1 - q), (p - q) * (1 - p - q)

    def grad(z):  # d/df of (f - ft)^2 (p-q)^2 / (a + b f)
        return (p - q) ** 2 * (2 * (z - ft) / (a + b * z) - b * (z - ft) ** 2 / (a + b * z) ** 2)

    g = grad(f)
    active = f > 0
    mu = -g[active].mean()
    np.testing.assert_allclose(g[active], -mu, rtol=0, atol=tol * max(1, abs(mu)))
    assert np.all(g[~active] >= -mu - tol * max(1, abs(mu)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 40),
    st.floats(0.1, 6.0),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["noisy", "negative", "consistent"]),
)
def test_mle_apx_kkt(d, eps, seed, kind):
    rng = np.random.default_rng(seed)
    spec = GRR(epsilon=eps, domain_size=d)
    p, q = spec.p, spec.q
    if kind == "noisy":
        y = rng.uniform(0, 1, d) ** 2  # arbitrary fractions of supporting reports
    elif kind == "negative":
        y = rng.uniform(0, q, d)  # every estimate negative
    else:
        f = rng.dirichlet(np.ones(d))
        y = q + f * (p - q)
    ft = (y - q) / (p - q)
    est = FrequencyEstimate(ft, spec.variance(1000), n=1000, spec=spec)
    out = C.mle_apx(est).frequencies
    assert out.min() >= 0 and abs(out.sum() - 1) < 1e-12
    check_mle_kkt(ft, out, p, q)
    if kind == "consistent":
        np.testing.assert_allclose(out, ft, rtol=0, atol=1e-12)


def test_mle_apx_equals_norm_sub_when_variance_is_flat():
    # GRR with d = 2 has p + q = 1, so the f-term of the variance vanishes (CON20 IV-F).
    rng = np.random.default_rng(1)
    for _ in range(50):
        est = make_est(rng.normal(0.5, 0.8, 2), epsilon=float(rng.uniform(0.2, 4)))
        np.testing.assert_allclose(
            C.mle_apx(est).frequencies, C.norm_sub(est).frequencies, rtol=0, atol=1e-14
        )


def test_mle_apx_close_to_norm_sub_in_practice():
    # CON20 V-C: the two give almost the same full-domain MSE.
    ests = [grr_estimate(d=256, n=100_000, epsilon=1.0, seed=s) for s in range(5)]
    truth = ests[0][1]
    res = C.compare(
        [e for e, _ in ests],
        truth,
        methods=["mle_apx", "norm_sub"],
        queries={"full": {"query": "full"}},
    )
    assert 0.8 < res["mle_apx"]["full"] / res["norm_sub"]["full"] < 1.25


def test_mle_apx_rejects_impossible_estimates():
    spec = GRR(epsilon=2.0, domain_size=50)
    p, q = spec.p, spec.q
    floor = -q * (1 - q) / ((p - q) * (1 - p - q))
    est = FrequencyEstimate(np.full(50, 2 * floor), 0.01, n=100, spec=spec)
    with pytest.raises(ValueError, match="too negative for mle_apx"):
        C.mle_apx(est)


# ------------------------------------------------------------------------- Power


@pytest.mark.parametrize("n", [1000, 10**6, 10**9])
def test_power_sum_closed_form(n):
    x = np.arange(1, min(n, 10**6) + 1, dtype=float)
    for s in (-1.0, 0.0, 0.5, 1.0, 1.5, 3.0):
        if n <= 10**6:
            assert C._power_sum(s, n) == pytest.approx(np.sum(x**-s), rel=1e-12)
    if n == 10**9:  # closed forms: sum x = n(n+1)/2, sum 1 = n; zeta(2) - tail ~ 1/n
        assert C._power_sum(-1.0, n) == pytest.approx(n * (n + 1) / 2, rel=1e-13)
        assert C._power_sum(0.0, n) == pytest.approx(n, rel=1e-13)
        assert C._power_sum(2.0, n) == pytest.approx(math.pi**2 / 6 - 1 / n, rel=1e-13)
        harmonic = math.log(n) + np.euler_gamma + 1 / (2 * n)
        assert C._power_sum(1.0, n) == pytest.approx(harmonic, rel=1e-13)


@pytest.mark.parametrize("alpha", [0.3, 1.0, 1.5, 2.5, 4.0])
@pytest.mark.parametrize("n", [1000, 10**6, 10**9])
def test_fit_power_law_exact_recovery(alpha, n):
    mean = C._power_sum(alpha - 1, n) / C._power_sum(alpha, n)
    counts = np.full(7, mean)
    assert C.fit_power_law(counts, n) == pytest.approx(alpha, abs=1e-8)


def sample_power_law(alpha, n, size, rng):
    x = np.arange(1, n + 1, dtype=float)
    cdf = np.cumsum(x**-alpha)
    cdf /= cdf[-1]
    return np.searchsorted(cdf, rng.random(size), side="right") + 1.0


def test_fit_power_law_from_clean_counts():
    # Counts drawn from a known power law; the fit must land within 6 standard errors
    # (delta method: se(alpha) = se(mean) / |d mean / d alpha|), and must reject a wrong one.
    n, d, alpha0 = 100_000, 100_000, 3.0
    rng = np.random.default_rng(2024)
    x = np.arange(1, n + 1, dtype=float)

    def moments(a):
        w = x**-a
        w /= w.sum()
        m = (w * x).sum()
        return m, (w * x * x).sum() - m * m

    _, var0 = moments(alpha0)
    slope = (moments(alpha0 + 1e-5)[0] - moments(alpha0 - 1e-5)[0]) / 2e-5
    se = math.sqrt(var0 / d) / abs(slope)
    fitted = C.fit_power_law(sample_power_law(alpha0, n, d, rng), n)
    assert abs(fitted - alpha0) <= 6 * se, (fitted, se)
    wrong = C.fit_power_law(sample_power_law(alpha0 + 0.3, n, d, rng), n)
    assert abs(wrong - alpha0) > 6 * se


def test_fit_power_law_limits():
    assert C.fit_power_law([0.5, -3.0], 100) == C._POWER_ALPHA_MAX
    assert C.fit_power_law([80.0], 100) == 0.0
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        C.fit_power_law([1.0], 0)


def brute_posterior_mean(c, sigma, alpha, n):
    """CON20 eq. 13 over every integer count 1..n (no window, no quadrature)."""
    x = np.arange(1, n + 1, dtype=float)
    out = []
    for ci in np.atleast_1d(c):
        lw = -alpha * np.log(x) - (x - ci) ** 2 / (2 * sigma**2)
        w = np.exp(lw - lw.max())
        out.append((w * x).sum() / w.sum())
    return np.array(out)


@pytest.mark.parametrize(
    ("n", "sigma", "alpha"),
    [
        (3000, 25.0, 1.5),  # window summed term by term
        (3000, 0.3, 2.0),  # nearly noiseless
        (400_000, 2500.0, 1.2),  # quadrature with exact small counts
        (400_000, 900.0, 2.8),
        pytest.param(2_000_000, 60_000.0, 0.7, marks=pytest.mark.slow),  # window > small counts
    ],
)
def test_posterior_mean_matches_brute_force(n, sigma, alpha):
    c = np.concatenate(
        [
            np.linspace(-6 * sigma, 12 * sigma, 25),
            [
                0.0,
                1.0,
                0.3 * n,
                n - 300.0,
                n - 1.0,
                n + 3 * sigma,
                n + 40 * sigma,
                3.0 * n,
                -10.0 * n,
            ],
        ]
    )
    got, slope = C._posterior_moments(c, sigma, alpha, n)
    want = brute_posterior_mean(c, sigma, alpha, n)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * sigma)
    # the slope is the posterior variance over sigma^2 (checked by finite differences)
    h = 1e-3 * sigma
    fd = (
        brute_posterior_mean(c[:8] + h, sigma, alpha, n)
        - brute_posterior_mean(c[:8] - h, sigma, alpha, n)
    ) / (2 * h)
    np.testing.assert_allclose(slope[:8], fd, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    ("n", "alpha"),
    [
        pytest.param(100_000, 50.0, marks=pytest.mark.slow),
        (100_000, 1.8),
        pytest.param(10**7, 1.6, marks=pytest.mark.slow),
    ],
)
def test_power_interpolation_matches_direct_evaluation(n, alpha):
    # Many distinct estimates take the adaptive-grid path; it must agree with direct
    # evaluation at every value (a steep prior makes the mean turn fast: alpha = 50).
    rng = np.random.default_rng(7)
    spec = GRR(epsilon=8.0 if n == 100_000 else 5.0, domain_size=20_000)
    sigma = math.sqrt(spec.variance(n)) * n
    c = np.concatenate([rng.normal(0, sigma, 19_000), rng.uniform(0, 0.05 * n, 1000)])
    fast = C._posterior_mean(c, sigma, alpha, n)
    exact = C._posterior_mean(c, sigma, alpha, n, exact=True)
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-6 * sigma)


def test_power_end_to_end():
    est, _ = grr_estimate(d=128, n=50_000, epsilon=1.0)
    out = C.power(est)
    f = out.frequencies
    assert np.all(f >= 1 / est.n)
    c = est.frequencies * est.n
    sigma = math.sqrt(est.variance_null[0]) * est.n
    alpha = C.fit_power_law(c, est.n)
    want = brute_posterior_mean(c, sigma, alpha, est.n) / est.n
    np.testing.assert_allclose(f, want, rtol=1e-9, atol=1e-12)
    # a given alpha is used as is
    np.testing.assert_allclose(
        C.power(est, alpha=1.0).frequencies,
        brute_posterior_mean(c, sigma, 1.0, est.n) / est.n,
        rtol=1e-9,
        atol=1e-12,
    )
    # PowerNS is Norm-Sub of Power
    np.testing.assert_allclose(
        C.power_ns(est).frequencies, C.simplex_projection(f), rtol=0, atol=1e-15
    )


# ------------------------------------------------------------------------- properties


@st.composite
def estimates(draw):
    d = draw(st.integers(2, 50))
    eps = draw(st.floats(0.2, 6.0))
    n = draw(st.integers(1, 10**6))
    kind = draw(st.sampled_from(["noisy", "negative", "consistent", "arbitrary"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    spec = GRR(epsilon=eps, domain_size=d)
    p, q = spec.p, spec.q
    if kind == "noisy":  # any fractions of supporting reports: reachable estimates
        f = (rng.uniform(0, 1, d) ** 3 - q) / (p - q)
    elif kind == "negative":
        f = (rng.uniform(0, q, d) - q) / (p - q)
    elif kind == "consistent":
        f = rng.dirichlet(np.full(d, 0.5))
    else:
        f = rng.normal(0, draw(st.floats(0.01, 3.0)), d)
    return FrequencyEstimate(f, spec.variance(n), n=n, spec=spec), kind


def reachable(est):
    p, q = est.spec.p, est.spec.q
    return np.all(est.frequencies >= -q / (p - q) - 1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(estimates(), st.sampled_from(NAMES))
def test_methods_consistency_properties(case, name):
    est, kind = case
    if name in ("mle_apx", "ibu"):
        assume(reachable(est))  # the Gaussian model needs estimates real counts can give
    out = C.METHODS[name](est)
    f = out.frequencies
    assert np.all(np.isfinite(f))
    if name in NON_NEGATIVE:
        assert f.min() >= 0, name
    if name in SUM_TO_ONE:
        assert abs(f.sum() - 1) <= 1e-10, (name, f.sum())
    if name == "norm_cut":
        assert f.sum() <= 1 + 1e-12
    if name == "post_pos":
        assert single_value_answers(out).min() >= 0
        assert set_answers(out, random_subsets(f.size, 0.5, 5, rng=0)).min() >= 0
    # CON20 IV-F: every method preserves the order of the estimates (weakly)
    order = np.argsort(est.frequencies, kind="stable")
    assert np.all(np.diff(f[order]) >= -1e-12 * max(1.0, np.abs(f).max())), name
    if kind == "consistent" and name in {
        "base_pos",
        "norm",
        "norm_mul",
        "norm_sub",
        "mle_apx",
        "norm_cut",
    }:
        np.testing.assert_allclose(f, est.frequencies, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------- compare


def test_compare_matches_direct_mse_and_shares_queries():
    est, truth = grr_estimate(d=64, n=20_000, epsilon=1.0)
    est2, _ = grr_estimate(d=64, n=20_000, epsilon=1.0, seed=1)
    res = C.compare(
        [est, est2], truth, methods=["base", "norm_sub", "post_pos"], n_queries=50, rng=3
    )
    gen = np.random.default_rng(3)
    subsets = {rho: random_subsets(64, rho, 50, rng=gen) for rho in (0.1, 0.5, 0.9)}
    for name, fn in [("base", lambda e: e), ("norm_sub", C.norm_sub), ("post_pos", C.post_pos)]:
        a, b = fn(est), fn(est2)
        assert res[name]["full"] == pytest.approx((mse(a, truth) + mse(b, truth)) / 2, rel=1e-12)
        assert res[name]["top_10"] == pytest.approx(
            (mse(a, truth, "topk", k=10) + mse(b, truth, "topk", k=10)) / 2, rel=1e-12
        )
        for rho, key in [(0.1, "set_10"), (0.5, "set_50"), (0.9, "set_90")]:
            want = (
                mse(a, truth, "set", subsets=subsets[rho])
                + mse(b, truth, "set", subsets=subsets[rho])
            ) / 2
            assert res[name][key] == pytest.approx(want, rel=1e-12)


def test_compare_custom_queries_and_validation():
    est, truth = grr_estimate(d=32, n=5000)
    res = C.compare(
        est, truth, methods=["norm"], queries={"r": {"query": "range", "length": 4}}, rng=0
    )
    assert set(res["norm"]) == {"r"} and res["norm"]["r"] > 0
    with pytest.raises(ValueError, match="methods must be names from"):
        C.compare(est, truth, methods=["nope"])
    with pytest.raises(ValueError, match="estimates must hold at least one"):
        C.compare([], truth)


def test_norm_sub_beats_base_on_skewed_data():
    # A sanity check of the paper's headline (CON20 Fig. 4): on a skewed distribution with
    # many near-zero items, Norm-Sub's full-domain MSE is far below the unbiased estimate's.
    ests = [grr_estimate(d=128, n=100_000, epsilon=1.0, seed=s) for s in range(5)]
    truth = ests[0][1]
    res = C.compare(
        [e for e, _ in ests],
        truth,
        methods=["base", "norm_sub", "base_pos"],
        queries={"full": {"query": "full"}},
    )
    assert res["norm_sub"]["full"] < 0.5 * res["base"]["full"]
    assert res["base_pos"]["full"] < res["base"]["full"]
