"""Per-window telemetry: WindowedStats merge laws, keys, and unbiased per-window answers."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from ldpkit import GRR, OLH
from ldpkit.numeric import HybridMechanism, PiecewiseMechanism
from ldpkit.stream import (
    WindowedStats,
    aggregate_windows,
    count_windows,
    window_frequencies,
    window_keys,
    window_means,
    window_sums,
)

HM = HybridMechanism(epsilon=1.0, low=0.0, high=60.0)


def _daily(seed: int = 0, days: int = 3, per_day: int = 4000):
    rng = np.random.default_rng(seed)
    means = np.array([10.0, 20.0, 28.0])[:days]
    values = np.concatenate([rng.uniform(0, 2 * m, per_day) for m in means])
    keys = np.repeat(np.arange(days), per_day)
    return values, keys, means


def test_window_keys_and_count_windows() -> None:
    t = np.array(["2026-11-23T08:15", "2026-11-23T23:59:59", "2026-11-24T00:00"], "datetime64[s]")
    assert window_keys(t).tolist() == ["2026-11-23", "2026-11-23", "2026-11-24"]
    assert window_keys(t, "h").tolist() == ["2026-11-23T08", "2026-11-23T23", "2026-11-24T00"]
    assert count_windows(7, 3).tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert count_windows(3, 3, start=5).tolist() == [1, 2, 2]
    with pytest.raises(ValueError, match="unit must be"):
        window_keys(t, "fortnight")
    with pytest.raises(ValueError, match="unit must be"):  # unhashable, once a TypeError
        window_keys(t, unit=np.array(["D"]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="times must be"):
        window_keys([1.5, 2.5])
    with pytest.raises(ValueError, match="size must be"):
        count_windows(3, 0)


def test_aggregate_windows_equals_aggregate_of_each_window() -> None:
    values, keys, _ = _daily()
    reports = HM.randomize(values, rng=1)
    ws = aggregate_windows(HM, reports, keys)
    assert ws.windows == [0, 1, 2] and ws.n == values.size and len(ws) == 3
    for k in range(3):
        assert ws[k] == HM.aggregate(reports[keys == k])
    assert ws.total().n == values.size
    # string keys keep time order
    days = np.array([f"2026-11-0{k + 1}" for k in keys])
    assert aggregate_windows(HM, reports, days).windows == [
        "2026-11-01",
        "2026-11-02",
        "2026-11-03",
    ]


def test_merge_laws_and_round_trips() -> None:
    g = GRR(epsilon=1.0, domain_size=3)
    x = np.random.default_rng(0).integers(0, 3, 3000)
    keys = np.random.default_rng(1).integers(0, 5, 3000)
    reports = g.randomize(x, rng=2)
    parts = [aggregate_windows(g, reports[i::3], keys[i::3]) for i in range(3)]
    whole = aggregate_windows(g, reports, keys)
    a, b, c = parts
    assert a.merge(b).merge(c) == a.merge(b.merge(c)) == whole  # counts: exact
    assert a.merge(b) == b.merge(a)
    assert a.merge(WindowedStats(g)) == a
    # windows only one part saw are kept
    only = aggregate_windows(g, reports[:1], np.array([9]))
    assert whole.merge(only).windows == [0, 1, 2, 3, 4, 9]
    assert WindowedStats.from_dict(json.loads(json.dumps(whole.to_dict()))) == whole
    assert pickle.loads(pickle.dumps(whole)) == whole
    # float sums: equal up to summation order
    values, keys2, _ = _daily()
    r = HM.randomize(values, rng=3)
    split = aggregate_windows(HM, r[:5000], keys2[:5000]) + aggregate_windows(
        HM, r[5000:], keys2[5000:]
    )
    joined = aggregate_windows(HM, r, keys2)
    for k in joined.windows:
        assert split[k].n == joined[k].n
        np.testing.assert_allclose(float(split[k].sum), float(joined[k].sum), rtol=1e-12)


def test_bad_input() -> None:
    reports = HM.randomize(np.ones(4), rng=0)
    with pytest.raises(ValueError, match="windows must hold one key per report"):
        aggregate_windows(HM, reports, [0, 1])
    with pytest.raises(TypeError, match="windows must be integer or string keys"):
        aggregate_windows(HM, reports, [0.5, 1, 2, 3])
    with pytest.raises(ValueError, match="reports"):
        aggregate_windows(PiecewiseMechanism(epsilon=1.0, low=0.0, high=60.0), reports, [0] * 4)
    ws = aggregate_windows(HM, reports, [0] * 4)
    with pytest.raises(ValueError, match="stats must come from"):
        ws.merge(WindowedStats(HM.replace(epsilon=2.0)))
    with pytest.raises(TypeError, match="frequency oracle"):
        window_frequencies(ws)
    g = GRR(epsilon=1.0, domain_size=2)
    with pytest.raises(TypeError, match="mean mechanism"):
        window_means(aggregate_windows(g, g.randomize([0, 1], rng=0), [0, 0]))
    with pytest.raises(KeyError, match="no reports in window 7"):
        ws[7]


@pytest.mark.slow
def test_window_means_are_unbiased_with_their_standard_error() -> None:
    """z-scores of every window's mean over repetitions, and the spread against the standard
    error (exact up to the report grid for HM at eps > 0.61: its variance does not depend on
    the value)."""
    values, keys, _ = _daily(days=3, per_day=2000)
    truth = np.array([values[keys == k].mean() for k in range(3)])
    reps = 300
    est = np.empty((reps, 3))
    se = np.zeros(3)
    for r in range(reps):
        out = window_means(aggregate_windows(HM, HM.randomize(values, rng=100 + r), keys))
        est[r], se = out.estimate, out.std_error
    z = (est.mean(axis=0) - truth) / (se / np.sqrt(reps))
    # pooled over the 3 windows (equal n, equal SE): the ratio's own sd is ~2.4%
    ratio = np.sqrt(np.mean(est.var(axis=0, ddof=1) / se**2))
    assert np.all(np.abs(z) < 5) and abs(ratio - 1) < 0.12


@pytest.mark.slow
def test_window_answers_fail_for_a_wrong_epsilon() -> None:
    """Reports made at 1.3 epsilon but filed as epsilon-HM: the spread check above fails
    (sd ratio sqrt(Var(1.3 eps) / Var(eps)) = 0.77), and on HM's report grid the reports do
    not even pass validation."""
    values, keys, _ = _daily(days=3, per_day=2000)
    made = HM.replace(epsilon=1.3 * HM.epsilon)
    est = np.array(
        [
            window_means(aggregate_windows(made, made.randomize(values, rng=r), keys)).estimate
            for r in range(300)
        ]
    )
    se = window_means(aggregate_windows(HM, HM.randomize(values, rng=0), keys)).std_error
    ratio = np.sqrt(np.mean(est.var(axis=0, ddof=1) / se**2))
    assert abs(ratio - 1) > 0.12
    wrong = made.randomize(values, rng=1)
    with pytest.raises(ValueError, match="reports"):
        aggregate_windows(HM, type(wrong)(HM, values=wrong.values), keys)


def test_window_sums_and_frequencies() -> None:
    values, keys, _ = _daily(days=2, per_day=3000)
    ws = aggregate_windows(HM, HM.randomize(values, rng=5), keys)
    means, sums = window_means(ws), window_sums(ws)
    np.testing.assert_allclose(sums.estimate, 3000 * means.estimate)
    np.testing.assert_allclose(sums.std_error, 3000 * means.std_error)
    scaled = window_sums(ws, population={0: 6000, 1: 3000})
    np.testing.assert_allclose(scaled.estimate, [6000, 3000] * means.estimate)
    olh = OLH(epsilon=2.0, domain_size=4)
    x = np.random.default_rng(6).integers(0, 4, 4000)
    k = np.repeat([0, 1], 2000)
    rep = olh.randomize(x, rng=7)
    freq = window_frequencies(aggregate_windows(olh, rep, k))
    cnt = window_frequencies(aggregate_windows(olh, rep, k), counts=True)
    assert freq.estimate.shape == (2, 4)
    for w in range(2):
        direct = olh.estimate(olh.aggregate(rep[k == w]))
        np.testing.assert_allclose(freq.estimate[w], direct.frequencies)
        np.testing.assert_allclose(cnt.std_error[w], 2000 * direct.std_error)


def test_window_sums_caps_the_population() -> None:
    spec = PiecewiseMechanism(epsilon=1.0, low=0.0, high=1e100)
    keys = np.repeat(np.arange(2), 20)
    ws = aggregate_windows(spec, spec.randomize(np.linspace(0.0, 1e100, 40), rng=0), keys)
    assert np.all(np.isfinite(window_sums(ws, population=1e100).estimate))
    with pytest.raises(ValueError, match=r"population must be .* <= 1e\+100, got 1e\+308"):
        window_sums(ws, population=1e308)  # used to overflow (RuntimeWarning, inf)
    with pytest.raises(ValueError, match="population must be"):
        window_sums(ws, population={0: 10.0, 1: 1e200})
