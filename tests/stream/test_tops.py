"""ToPS as a streaming object: state size, resume, batching, answers and their standard errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from _streamhelpers import assert_same_dict, geometric_stream
from ldpkit.stream import NME, ToPS, evaluate_ranges, stream_from_dict


def _stream(n: int, seed: int = 0, bound: int = 200) -> np.ndarray:
    return geometric_stream(n, seed, bound, p=0.1)


# ---------------------------------------------------------------- state


def test_state_size_does_not_grow_apart_from_the_tree() -> None:
    m = 1000
    sizes = {}
    for n in (100_000, 1_000_000):
        tops = ToPS(1.0, 200, threshold_size=m, rng=0)
        for batch in np.array_split(_stream(m + n), 10):
            tops.update(batch)
        sizes[n] = tops.to_dict()
    small, large = sizes[100_000], sizes[1_000_000]
    assert small.keys() == large.keys() and small["state"].keys() == large["state"].keys()
    assert small["buffer"].size == large["buffer"].size == 0
    tree_keys = [k for k in small["state"] if k.startswith("tree_")]
    assert tree_keys
    tree_bytes = {n: sum(d["state"][k].nbytes for k in tree_keys) for n, d in sizes.items()}
    assert 9.5 <= tree_bytes[1_000_000] / tree_bytes[100_000] <= 10.5  # O(n / g)
    assert 9.9 <= large["state"]["tree_noisy_0"].size / small["state"]["tree_noisy_0"].size <= 10.1
    for key, value in small["state"].items():
        if key.startswith("tree_"):
            continue
        if isinstance(value, np.ndarray):
            assert value.shape == large["state"][key].shape, key
            assert value.nbytes == large["state"][key].nbytes, key
    for key in ("params", "rng", "threshold"):
        assert type(small[key]) is type(large[key])


@pytest.mark.parametrize("cut", [700, 5000, 23_456])  # inside phase 1, right after it, later
def test_resume_from_dict_and_pickle_gives_identical_answers(cut: int) -> None:
    values = _stream(60_000, seed=1)
    kwargs = dict(threshold_size=5000, length=50_000, smoother="exponential")
    live = ToPS(0.7, 200, rng=42, **kwargs).update(values[:cut])
    resumed = stream_from_dict(live.to_dict())
    unpickled = pickle.loads(pickle.dumps(live))
    batches = np.array_split(values[cut:], 7)
    for tops in (live, resumed, unpickled):
        tops.extend(batches)
    starts = np.arange(0, 50_000, 997)
    stops = np.minimum(starts + np.arange(starts.size) * 1009 + 1, 55_000)
    ref = live.range_sums(starts, stops)
    for other in (resumed, unpickled):
        got = other.range_sums(starts, stops)
        np.testing.assert_array_equal(ref[0], got[0])
        np.testing.assert_array_equal(ref[1], got[1])
        assert other.value_at() == live.value_at()
        assert_same_dict(live.to_dict(), other.to_dict())


def test_same_seed_same_output_and_batching_does_not_matter() -> None:
    values = _stream(30_000, seed=2)
    whole = ToPS(1.0, 200, threshold_size=4000, length=25_000, rng=5).update(values)
    cuts = np.sort(np.random.default_rng(0).choice(np.arange(1, 30_000), 60, replace=False))
    pieces = ToPS(1.0, 200, threshold_size=4000, length=25_000, rng=5).extend(
        np.split(values, cuts)
    )
    assert_same_dict(whole.to_dict(), pieces.to_dict())
    other_seed = ToPS(1.0, 200, threshold_size=4000, length=25_000, rng=6).update(values)
    assert not np.array_equal(
        other_seed.to_dict()["state"]["tree_noisy_0"], whole.to_dict()["state"]["tree_noisy_0"]
    )


def test_generator_argument_is_advanced_not_copied() -> None:
    gen = np.random.default_rng(0)
    before = gen.bit_generator.state["state"]["state"]
    ToPS(1.0, 10, threshold=5.0, threshold_size=0, rng=gen).update(np.ones(1000))
    assert gen.bit_generator.state["state"]["state"] != before


# ---------------------------------------------------------------- answers


def test_noise_free_answers_are_exact_on_leaf_aligned_ranges() -> None:
    values = _stream(5000, seed=3, bound=50)
    tops = ToPS(
        1e12, 50, threshold=50.0, threshold_size=0, leaf_size=4, branching=4, levels=3, rng=0
    )
    tops.update(values)
    prefix = np.concatenate([[0.0], np.cumsum(values)])
    starts = np.arange(0, 4000, 4 * 37)
    stops = starts + 4 * np.arange(1, starts.size + 1)
    est, _ = tops.range_sums(starts, stops)
    np.testing.assert_allclose(est, prefix[stops] - prefix[starts], atol=1e-6)
    # ranges cutting leaves: the uniform share of the cut leaf
    est = tops.range_sum(1, 7).estimate
    share = values[0:4].sum() * 3 / 4 + values[4:8].sum() * 3 / 4
    assert est == pytest.approx(share, abs=1e-6)
    # a value in a completed leaf, and the open leaf's prediction (recent: last leaf / g)
    assert tops.value_at(5) == pytest.approx(values[4:8].mean(), abs=1e-9)
    assert tops.value_at() == pytest.approx(values[4996:5000].mean(), abs=1e-9)


def test_clipping_and_metrics_use_the_unclipped_truth() -> None:
    values = np.full(2048, 10.0)
    tops = ToPS(1e12, 10, threshold=4.0, threshold_size=0, leaf_size=16, rng=0).update(values)
    errs = evaluate_ranges(tops, values, count=50, rng=1)
    assert errs["mmae"] == pytest.approx(6.0, abs=1e-6)  # each value loses 10 - 4
    assert errs["mmse"] == pytest.approx(36.0, abs=1e-5)


def _config(kind: str) -> dict:
    common = dict(threshold=10.0, threshold_size=0, branching=3, leaf_size=2, levels=3)
    if kind == "recent-uniform":
        return dict(common, smoother="recent")
    if kind == "mean-last":
        return dict(common, smoother="mean", block_correction="last")
    if kind == "exponential-uniform":
        return dict(common, smoother={"name": "exponential", "alpha": 0.6})
    if kind == "moving-last":
        return dict(common, smoother="moving_average", block_correction="last")
    if kind == "no-consistency":
        return dict(common, smoother="mean", consistency=False)
    raise AssertionError(kind)


QUERIES = (np.array([0, 3, 5, 20, 140, 150, 0, 33]), np.array([151, 40, 6, 38, 151, 151, 1, 34]))


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["recent-uniform", "mean-last", "exponential-uniform", "moving-last", "no-consistency"]
)
def test_standard_errors_match_monte_carlo_and_answers_are_unbiased(kind: str) -> None:
    values = (np.arange(151) * 7 % 11).astype(float)  # 151 values: an open leaf at the end
    cfg = _config(kind)
    center = ToPS(1e12, 10, **cfg, rng=0).update(values).range_sums(*QUERIES)[0]
    se = ToPS(1.0, 10, **cfg, rng=0).update(values).range_sums(*QUERIES)[1]
    reps = 2000
    draws = np.empty((reps, QUERIES[0].size))
    for r in range(reps):
        draws[r] = (
            ToPS(1.0, 10, **cfg, rng=1000 + r)
            .update(values)
            .range_sums(*QUERIES, std_error=False)[0]
        )
    err = draws - center
    fixed = se == 0  # e.g. "last" mode inside the first leaf: the prior, no noise at all
    np.testing.assert_allclose(err[:, fixed], 0.0, atol=1e-6)
    err, se = err[:, ~fixed], se[~fixed]
    # unbiased for the noise-free answer
    z_mean = err.mean(axis=0) / (se / np.sqrt(reps))
    assert np.all(np.abs(z_mean) <= 6), z_mean
    # variance: z-test of the sample variance with its own fourth-moment standard error
    s2 = err.var(axis=0)
    m4 = np.mean(err**4, axis=0)
    sd_s2 = np.sqrt((m4 - s2**2) / reps)
    z_var = (s2 - se**2) / sd_s2
    assert np.all(np.abs(z_var) <= 6), (z_var, s2, se**2)
    z_wrong = (s2 - 1.3**2 * se**2) / sd_s2
    assert np.all(z_wrong < -6), z_wrong


def test_median_smoother_has_no_standard_error_where_it_predicts() -> None:
    tops = ToPS(
        1.0,
        10,
        threshold=10.0,
        threshold_size=0,
        branching=3,
        leaf_size=2,
        levels=3,
        smoother="median",
        rng=0,
    ).update(np.ones(151))
    assert np.isfinite(tops.range_sum(0, 150).std_error)  # completed leaves only
    assert np.isnan(tops.range_sum(0, 151).std_error)  # includes the predicted open leaf


def test_answers_before_the_threshold_and_empty_ranges() -> None:
    tops = ToPS(1.0, 10, threshold_size=100, rng=0).update(np.ones(50))
    assert tops.threshold is None and tops.n_released == 0
    assert tops.range_sum(0, 0) == (0.0, 0.0)
    with pytest.raises(ValueError, match="n_released = 0"):
        tops.range_sum(0, 1)
    with pytest.raises(ValueError, match="threshold is chosen after 100 values"):
        _ = tops.tree
    with pytest.raises(ValueError, match="no value is released"):
        tops.value_at()


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (dict(epsilon=0.0), ValueError, "epsilon must be"),
        (dict(epsilon=float("nan")), ValueError, "epsilon must be"),
        (dict(bound=-1.0), ValueError, "bound must be"),
        (dict(branching=1), ValueError, "branching must be"),
        (dict(leaf_size=0), ValueError, "leaf_size must be"),
        (dict(threshold_size=0), ValueError, "threshold_size must be"),
        (dict(threshold=5.0, threshold_size=10), ValueError, "with a fixed threshold"),
        (dict(threshold=50.0), ValueError, "threshold must be"),
        (dict(smoother="loess"), ValueError, "smoother must be one of"),
        (dict(block_correction="middle"), ValueError, "block_correction must be"),
        (dict(threshold_method="svt"), ValueError, "threshold_method must be"),
        (dict(consistency="yes"), TypeError, "consistency must be"),
        (dict(length=2.5), TypeError, "length must be"),
    ],
)
def test_parameter_validation(kwargs: dict, exc: type, match: str) -> None:
    params = dict(epsilon=1.0, bound=10.0) | kwargs
    with pytest.raises(exc, match=match):
        ToPS(**params)


def test_value_and_range_validation() -> None:
    tops = ToPS(1.0, 10, threshold=10.0, threshold_size=0, rng=0)
    with pytest.raises(ValueError, match=r"values must be real numbers in \[0, 10\]"):
        tops.update([1.0, 11.0])
    with pytest.raises(ValueError, match="values must be"):
        tops.update([1.0, np.nan])
    with pytest.raises(TypeError, match="values must be"):
        tops.update(["a"])
    tops.update(np.ones(100))
    with pytest.raises(ValueError, match="0 <= start <= stop"):
        tops.range_sum(5, 4)
    with pytest.raises(ValueError, match="0 <= start <= stop"):
        tops.range_sum(0, 101)
    with pytest.raises(TypeError, match="starts must be"):
        tops.range_sums([0.5], [3])
    with pytest.raises(ValueError, match="position must be"):
        tops.value_at(100)


def test_real_pos_stream_smoke(streams: dict[str, np.ndarray]) -> None:
    pos = streams["pos"][:200_000].astype(float)
    m = 65_536
    tops = ToPS(1.0, 1638, threshold_size=m, length=pos.size - m, rng=0).update(pos)
    nme = NME(1.0, 1638, threshold_size=m, length=pos.size - m, rng=0).update(pos)
    # the threshold lands between the bulk and the public bound (values: median 5, p99.5 39)
    assert 10 <= tops.threshold <= 400
    ranges = (np.array([0, 1000, 50_000]), np.array([134_464, 2000, 120_000]))
    errs = evaluate_ranges(tops, pos[m:], ranges=ranges)
    assert errs["mmae"] < 1.0  # mean items per basket ~7.5: within one item
    assert evaluate_ranges(nme, pos[m:], ranges=ranges)["mse"] > 0
