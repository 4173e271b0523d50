"""SVIM top-k items against the naive single-item sampling."""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.sets import UserSets, restrict_sets, sample_one_item, svim


def _zipf_sets(n: int, d: int, max_len: int, seed: int) -> UserSets:
    gen = np.random.default_rng(seed)
    lengths = gen.integers(1, max_len + 1, n)
    keys = np.log(1.0 / np.arange(1, d + 1) ** 1.1)[None, :] + gen.gumbel(size=(n, d))
    order = np.argsort(-keys, axis=1)
    items = order[np.arange(d)[None, :] < lengths[:, None]]
    return UserSets(items, np.concatenate([[0], np.cumsum(lengths)]))


def _ncr(found: np.ndarray, truth: np.ndarray) -> float:
    k = truth.size
    score = {int(v): k - i for i, v in enumerate(truth)}
    return sum(score.get(int(v), 0) for v in found) / (k * (k + 1) / 2)


def test_restrict_sets_renumbers_in_the_order_of_keep():
    s = UserSets.from_lists([[0, 3, 5], [], [2, 5]])
    r = restrict_sets(s, [5, 0], 6)
    assert r.items.tolist() == [1, 0, 0] and r.offsets.tolist() == [0, 2, 2, 3]
    with pytest.raises(ValueError, match="keep must be"):
        restrict_sets(s, [5, 5], 6)


def _ranking_flip_sets(n: int, seed: int) -> UserSets:
    """Item 0 (true share 0.30) is held only by users with 3-item sets, so one sampled item
    per user ranks it below items 1, 2, 8 and 9; restricted to SVIM's candidates those sets
    hold one item, and the padded round ranks it first."""
    gen = np.random.default_rng(seed)
    kind = gen.choice(4, size=n, p=[0.30, 0.22, 0.18, 0.30])
    rows = []
    for t in kind.tolist():  # (building test data: a loop is fine here)
        if t == 0:
            rows.append([0, *(3 + gen.choice(5, size=2, replace=False)).tolist()])
        elif t == 3:
            rows.append([8 + int(gen.integers(0, 2))])
        else:
            rows.append([t])
    return UserSets.from_lists(rows)


def test_svim_ranks_by_frequency_where_single_item_sampling_does_not():
    d, k = 10, 3
    sets = _ranking_flip_sets(60_000, seed=1)
    truth = np.argsort(-sets.frequencies(d), kind="stable")[:k]
    assert sorted(truth.tolist()) == [0, 1, 2]
    for seed in range(3):
        top = svim(sets, epsilon=3.0, domain_size=d, k=k, rng=seed)
        naive = sample_one_item(sets, epsilon=3.0, domain_size=d, k=k, rng=seed)
        assert _ncr(top.items, truth) == 1.0, top.items
        assert 0 not in naive.items.tolist() and _ncr(naive.items, truth) < 1.0
        assert top.padding <= 2 and top.length_estimate is not None


def test_svim_and_naive_agree_when_lengths_do_not_depend_on_items():
    d, k = 60, 8
    sets = _zipf_sets(30_000, d, 20, seed=1)
    truth = np.argsort(-sets.frequencies(d), kind="stable")[:k]
    top = svim(sets, epsilon=3.0, domain_size=d, k=k, rng=0)
    assert _ncr(top.items, truth) > 0.8 and top.items.size == k
    with pytest.raises(ValueError, match="k must be"):
        svim(sets, epsilon=3.0, domain_size=d, k=31)


def test_svsm_finds_planted_itemsets():
    """Pairs {0, 1} (40%) and {0, 2} (30%) planted in noise: the product guess makes them
    candidates and the itemset round ranks them first, near their true shares."""
    from ldpkit.sets import svsm

    gen = np.random.default_rng(3)
    n, d = 60_000, 30
    kind = gen.choice(3, size=n, p=[0.40, 0.30, 0.30])
    base = {0: [0, 1], 1: [0, 2], 2: []}
    rows = []
    for t in kind.tolist():  # (test data)
        noise = (10 + gen.choice(20, size=int(gen.integers(0, 3)), replace=False)).tolist()
        rows.append(base[t] + noise)
    sets = UserSets.from_lists(rows)
    top = svsm(sets, epsilon=4.0, domain_size=d, k=2, rng=1)
    assert top.itemsets == [(0, 1), (0, 2)], top.itemsets
    assert len(top.candidates) == 4 and top.padding >= 1
    assert np.all(np.abs(top.frequencies - [0.40, 0.30]) < 0.06), top.frequencies
    with pytest.raises(ValueError, match="max_size must be"):
        svsm(sets, epsilon=4.0, domain_size=d, k=3, max_size=5)
