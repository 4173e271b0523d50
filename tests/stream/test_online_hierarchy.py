"""The online hierarchy: offline-equal consistency, tree sums, noise law, variance algebra."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldpkit.stream.online_hierarchy import (
    OnlineHierarchy,
    choose_leaf_exponent,
    hay_weights,
    subtree_root_variances,
)

# ---------------------------------------------------------------- independent offline reference


def offline_consistency(noisy: list[np.ndarray], b: int) -> list[np.ndarray]:
    """Hay et al. on every maximal complete subtree, written node by node (no vectorization)."""
    levels = len(noisy)
    counts = [len(a) for a in noisy]
    memo: dict[tuple[int, int], float] = {}

    def h(k: int, j: int) -> float:
        if (k, j) not in memo:
            if k == 0:
                memo[k, j] = float(noisy[0][j])
            else:
                lv = k + 1  # the paper's level
                a = (b**lv - b ** (lv - 1)) / (b**lv - 1)
                c = (b ** (lv - 1) - 1) / (b**lv - 1)
                memo[k, j] = a * float(noisy[k][j]) + c * sum(h(k - 1, j * b + i) for i in range(b))
        return memo[k, j]

    out = [np.full(c, np.nan) for c in counts]

    def down(k: int, j: int, value: float) -> None:
        out[k][j] = value
        if k == 0:
            return
        kids = [h(k - 1, j * b + i) for i in range(b)]
        for i, hk in enumerate(kids):
            down(k - 1, j * b + i, hk + (value - sum(kids)) / b)

    for k in range(levels):
        for j in range(counts[k]):
            is_root = k == levels - 1 or j // b >= counts[k + 1]
            if is_root:
                down(k, j, h(k, j))
    return out


def tree_arrays(tree: OnlineHierarchy, name: str) -> list[np.ndarray]:
    state = tree.state()
    return [state[f"tree_{name}_{k}"] for k in range(tree.levels)]


def true_node_sums(values: np.ndarray, g: int, b: int, levels: int) -> list[np.ndarray]:
    out = []
    for k in range(levels):
        span = g * b**k
        n = values.size // span
        out.append(values[: n * span].reshape(n, span).sum(axis=1))
    return out


# ---------------------------------------------------------------- consistency


@pytest.mark.parametrize(("b", "g", "levels", "n"), [(3, 2, 3, 80), (2, 1, 4, 40), (4, 3, 2, 70)])
def test_online_equals_offline_at_every_prefix(b: int, g: int, levels: int, n: int) -> None:
    rng = np.random.default_rng(11)
    values = rng.integers(0, 10, n).astype(float)
    tree = OnlineHierarchy(b, levels, g, scale=2.0)
    for t in range(n):  # one value at a time: every prefix
        tree.add(values[t : t + 1], rng)
        tree.refresh()
        online = tree_arrays(tree, "consistent")
        offline = offline_consistency(tree_arrays(tree, "noisy"), b)
        for k in range(levels):
            assert online[k].shape == offline[k].shape
            np.testing.assert_allclose(online[k], offline[k], rtol=0, atol=1e-9)


def test_online_equals_offline_random_batches_lazy_refresh() -> None:
    b, g, levels = 16, 4, 3
    rng = np.random.default_rng(5)
    values = rng.integers(0, 50, 9000).astype(float)
    tree = OnlineHierarchy(b, levels, g, scale=30.0)
    pos = 0
    step = 0
    while pos < values.size:
        size = int(rng.integers(1, 1500))
        tree.add(values[pos : pos + size], rng)
        pos += size
        step += 1
        if step % 3:  # refresh only sometimes: several new roots pile up between refreshes
            continue
        tree.refresh()
        offline = offline_consistency(tree_arrays(tree, "noisy"), b)
        for k, arr in enumerate(tree_arrays(tree, "consistent")):
            np.testing.assert_allclose(arr, offline[k], rtol=0, atol=1e-9)


def test_parents_equal_sum_of_children_after_consistency() -> None:
    b, g, levels = 3, 2, 4
    rng = np.random.default_rng(2)
    tree = OnlineHierarchy(b, levels, g, scale=5.0)
    tree.add(rng.integers(0, 9, 500).astype(float), rng)
    nbar = tree_arrays(tree, "consistent")
    for k in range(1, levels):
        kids = nbar[k - 1][: nbar[k].size * b].reshape(-1, b).sum(axis=1)
        np.testing.assert_allclose(nbar[k], kids, rtol=0, atol=1e-9)
    # and the leaf prefix sums agree with the consistent leaves
    lo, hi = np.array([0, 7, 30]), np.array([50, 8, 83])
    expect = [nbar[0][a:z].sum() for a, z in zip(lo, hi)]
    np.testing.assert_allclose(tree.leaf_range_sums(lo, hi), expect, rtol=0, atol=1e-9)


def test_zero_noise_reproduces_truth_and_root_is_bottom_up_estimate() -> None:
    b, g, levels = 4, 2, 3
    values = np.arange(300, dtype=float) % 7
    tree = OnlineHierarchy(b, levels, g, scale=0.0)
    tree.add(values, np.random.default_rng(0))
    truth = true_node_sums(values, g, b, levels)
    for k, arr in enumerate(tree_arrays(tree, "consistent")):
        np.testing.assert_allclose(arr, truth[k], atol=1e-12)


def test_batch_sizes_do_not_change_the_release() -> None:
    b, g, levels = 3, 2, 3
    values = np.random.default_rng(1).integers(0, 20, 1000).astype(float)
    one = OnlineHierarchy(b, levels, g, scale=3.0)
    one.add(values, np.random.default_rng(9))
    many = OnlineHierarchy(b, levels, g, scale=3.0)
    rng = np.random.default_rng(9)
    cuts = np.sort(np.random.default_rng(3).choice(np.arange(1, 1000), 40, replace=False))
    for part in np.split(values, cuts):
        many.add(part, rng)
    for name in ("noisy", "consistent"):
        for x, y in zip(tree_arrays(one, name), tree_arrays(many, name)):
            np.testing.assert_array_equal(x, y)


# ---------------------------------------------------------------- noise law


def _residuals(scale: float, b: int, g: int, levels: int, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 100, n).astype(float)
    tree = OnlineHierarchy(b, levels, g, scale=scale)
    tree.add(values, rng)
    truth = true_node_sums(values, g, b, levels)
    return [noisy - truth[k] for k, noisy in enumerate(tree_arrays(tree, "noisy"))]


def test_node_noise_is_laplace_with_the_stated_scale_and_fails_at_1_3x() -> None:
    scale = 7.5
    res = _residuals(scale, b=2, g=1, levels=3, n=40_000, seed=4)
    pooled = np.concatenate(res)
    assert stats.kstest(pooled, stats.laplace(scale=scale).cdf).pvalue > 1e-6
    for level in res:  # every level, on its own
        assert stats.kstest(level, stats.laplace(scale=scale).cdf).pvalue > 1e-6
    assert stats.kstest(pooled, stats.laplace(scale=1.3 * scale).cdf).pvalue < 1e-6
    assert stats.kstest(pooled, stats.laplace(scale=scale / 1.3).cdf).pvalue < 1e-6


# ---------------------------------------------------------------- variance algebra


def _linear_map(tree: OnlineHierarchy) -> np.ndarray:
    """Matrix from node noises (all levels, flattened) to consistent leaves, by unit impulses."""
    noisy = tree_arrays(tree, "noisy")
    sizes = [a.size for a in noisy]
    cols = []
    base = offline_consistency([np.zeros(s) for s in sizes], tree.branching)[0]
    for k, s in enumerate(sizes):
        for j in range(s):
            probe = [np.zeros(t) for t in sizes]
            probe[k][j] = 1.0
            cols.append(offline_consistency(probe, tree.branching)[0] - base)
    return np.array(cols).T  # (leaves, nodes)


def test_adjoint_variance_matches_explicit_linear_map() -> None:
    b, g, levels = 3, 1, 3
    tree = OnlineHierarchy(b, levels, g, scale=1.0)
    tree.add(np.zeros(2 * 27 + 9 + 3 + 2), np.random.default_rng(0))  # roots at every level
    m = _linear_map(tree)
    rng = np.random.default_rng(1)
    n_leaves = int(tree.counts[0])
    for _ in range(20):
        w = np.zeros(n_leaves)
        lo, hi = sorted(rng.integers(0, n_leaves + 1, 2))
        w[lo:hi] = 1.0
        w[rng.integers(0, n_leaves)] += rng.normal()
        expect = 2.0 * float(np.sum((w @ m) ** 2))
        assert tree.weights_variance(w) == pytest.approx(expect, rel=1e-9)
        # the same query given as a leaf range
        w2 = w.copy()
        w2[lo:hi] -= 1.0
        assert tree.weights_variance(w2, lo, hi) == pytest.approx(expect, rel=1e-9)


def test_root_variance_recursion_and_hay_weights() -> None:
    a, c = hay_weights(2, 3)
    np.testing.assert_allclose(a, [1.0, 2 / 3, 4 / 7])
    np.testing.assert_allclose(c, [0.0, 1 / 3, 3 / 7])
    v = subtree_root_variances(2, 3)
    # level 1: (2/3)^2 + (1/3)^2 * 2 = 2/3, the BLUE of a root and two leaves
    assert v[1] == pytest.approx(2 / 3)
    assert v[2] == pytest.approx((4 / 7) ** 2 + (3 / 7) ** 2 * 2 * (2 / 3))


def test_decomposition_variance_counts_nodes() -> None:
    tree = OnlineHierarchy(2, 4, 1, scale=1.0, consistency=False)
    tree.add(np.zeros(37), np.random.default_rng(0))
    # [1, 15) on a binary tree: 1 (leaf 1), [2,4), [4,8), [8,12), [12,14), leaf 14 -> 6 nodes
    assert tree.weights_variance(np.zeros(37), 1, 15) == pytest.approx(2.0 * 6)
    # the top level (8 leaves per node) answers [16, 32) with two nodes
    assert tree.weights_variance(np.zeros(37), 16, 32) == pytest.approx(2.0 * 2)
    # overlap of extra leaf weights with level-0 nodes of the decomposition
    w = np.zeros(37)
    w[1] = 0.5
    assert tree.weights_variance(w, 1, 15) == pytest.approx(2.0 * (6 + 0.25 + 2 * 0.5))


def test_choose_leaf_exponent_follows_the_objective() -> None:
    # eps = 1, r = 2^20, b = 16: s = 1 (cost 1927) beats s = 0 (3750) and s = 2 (2630)
    assert choose_leaf_exponent(16, 2**20, 1.0) == 1
    assert choose_leaf_exponent(16, 2**20, 0.1) == 2
    for eps in (0.05, 0.3, 2.0):
        costs = [
            2 * 15 * (np.log(2**20 / 16**s) / np.log(16)) ** 3 / eps**2 + 16 ** (2 * s) / 36
            for s in range(6)
        ]
        assert choose_leaf_exponent(16, 2**20, eps) == int(np.argmin(costs))
