"""Top-k frequent items of set-valued users: SVIM (Wang, Li, Jha, IEEE S&P 2018, section V).

SVIM is interactive: three disjoint groups of users answer three questions, each on the
contract (:class:`PaddingSampling`, :class:`ldpkit.GRR`), the later questions depending on the
earlier answers. :func:`svim` simulates the rounds on given users (the server's side of
each round is ``spec.aggregate`` + ``spec.estimate``; nothing else sees a raw set):

1. group 1 reports one sampled item (padding-and-sampling with ``ell = 1``) over the whole
   domain; the ``2k`` largest estimates are the candidates;
2. group 2 reports ``min(|S & C|, 2k)``, the size of its set restricted to the candidates,
   with GRR; ``ell`` is the 90th percentile of the estimated distribution;
3. group 3 reports one sampled candidate with padding ``ell`` over the ``2k`` candidates;
   the ``k`` largest estimates are the answer.

:func:`sample_one_item` is the naive baseline the paper compares with: every user reports
one sampled item (``ell = 1``) over the whole domain, one round.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_array, check_epsilon, check_integer, check_real
from ..estimate import FrequencyEstimate
from ._input import UserSets, as_user_sets
from .padding import PaddingSampling, SetFrequencyEstimate

__all__ = ["TopItems", "TopItemsets", "restrict_sets", "sample_one_item", "svim", "svsm"]


@dataclasses.dataclass(frozen=True)
class TopItems:
    """The answer of :func:`svim` or :func:`sample_one_item`.

    Attributes
    ----------
    items : ndarray
        The k items found, most frequent first.
    frequencies : ndarray
        Their estimated (padded) frequencies, in the same order.
    candidates : ndarray
        The candidate items of round 1 (SVIM) or the whole domain's ranking (baseline).
    padding : int
        The padding length used in the final round.
    length_estimate : ndarray or None
        SVIM round 2: the estimated distribution of ``|S & C|`` (0 .. 2k).
    estimate : SetFrequencyEstimate
        The final round's estimate (over the candidates for SVIM).
    """

    items: np.ndarray
    frequencies: np.ndarray
    candidates: np.ndarray
    padding: int
    length_estimate: np.ndarray | None
    estimate: SetFrequencyEstimate


def restrict_sets(sets: UserSets, keep: Any, domain_size: int) -> UserSets:
    """Restrict each user's set to the items ``keep``, renumbered ``0 .. len(keep) - 1``.

    In the order of ``keep``; vectorized.
    """
    domain_size = check_integer(domain_size, "domain_size", low=1)
    if not isinstance(sets, UserSets):
        raise TypeError(f"sets must be ldpkit.sets.UserSets, got {type(sets).__name__}")
    keep = check_array(keep, "keep", integer=True, low=0, high=domain_size - 1)
    if np.unique(keep).size != keep.size:
        raise ValueError("keep must be distinct items, got a repeated one")
    if sets.items.size and int(sets.items.max()) >= domain_size:
        raise ValueError(f"domain_size must exceed every item, got {domain_size}")
    # a sorted lookup, not a table of domain_size entries (the domain may be huge)
    order = np.argsort(keep, kind="stable")
    sorted_keep = keep[order]
    at = np.minimum(np.searchsorted(sorted_keep, sets.items), max(keep.size - 1, 0))
    kept = sorted_keep[at] == sets.items if keep.size else np.zeros(sets.items.size, bool)
    mapped = order[at] if keep.size else at
    rows = np.repeat(np.arange(len(sets)), sets.lengths)[kept]
    lengths = np.bincount(rows, minlength=len(sets))
    return UserSets(mapped[kept], np.concatenate([[0], np.cumsum(lengths)]))


def _top(est: FrequencyEstimate, k: int) -> np.ndarray:
    return np.asarray(est.top(min(k, est.domain_size), indices=True), dtype=np.int64)


def _take(sets: UserSets, users: np.ndarray) -> UserSets:
    """Return the sets of some users (vectorized gather in CSR)."""
    lengths = sets.lengths[users]
    starts = sets.offsets[:-1][users]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    return UserSets(sets.items[pos], offsets)


def svim(
    users: Any,
    *,
    epsilon: float,
    domain_size: int,
    k: int,
    percentile: float = 0.9,
    rng: RNGLike = None,
) -> TopItems:
    """Simulate SVIM's three rounds on ``users`` (lists of item ids or :class:`UserSets`).

    Users are split uniformly at random into three groups of (nearly) equal size; each
    user answers one question at the full budget ``epsilon``.

    Parameters
    ----------
    users : list of item lists or UserSets
    epsilon : float
        Every report's budget.
    domain_size : int
        Number of items d.
    k : int
        Number of items to find (``2k`` candidates; ``1 <= k``, ``2k <= d``).
    percentile : float
        The padding length of round 3 is this percentile of the estimated lengths (0.9 in
        the paper).
    rng : Generator, int or None

    Returns
    -------
    TopItems

    References
    ----------
    T. Wang, N. Li, S. Jha. Locally Differentially Private Frequent Itemset Mining. IEEE
    S&P 2018, section V (SVIM).

    Examples
    --------
    >>> users = [[0, 1], [1, 2], [1], [0, 1, 3]] * 300
    >>> top = svim(users, epsilon=3.0, domain_size=6, k=2, rng=0)
    >>> sorted(top.items.tolist())
    [0, 1]
    """
    from ..frequency.grr import GRR

    epsilon = check_epsilon(epsilon)
    domain_size = check_integer(domain_size, "domain_size", low=2)
    k = check_integer(k, "k", low=1, high=domain_size // 2)
    percentile = check_real(percentile, "percentile", low=0.0, high=1.0, low_inclusive=False)
    sets = as_user_sets(users, domain_size)
    if len(sets) < 3:
        raise ValueError(f"users must hold at least 3 users (one per round), got {len(sets)}")
    gen = as_generator(rng)
    groups = np.array_split(gen.permutation(len(sets)), 3)
    # round 1: candidates
    first = PaddingSampling(epsilon=epsilon, domain_size=domain_size, padding=1)
    est1 = first.run(_take(sets, groups[0]), rng=gen)
    candidates = _top(est1, 2 * k)
    c = candidates.size
    # round 2: the lengths of the sets restricted to the candidates
    second = restrict_sets(_take(sets, groups[1]), candidates, domain_size)
    lengths = np.minimum(second.lengths, c)
    grr = GRR(epsilon=epsilon, domain_size=c + 1)
    dist = np.clip(grr.run(lengths, rng=gen).frequencies, 0.0, None)
    dist = dist / dist.sum() if dist.sum() > 0 else np.full(c + 1, 1.0 / (c + 1))
    ell = int(np.searchsorted(np.cumsum(dist), percentile - 1e-12) or 1)
    ell = max(1, min(ell, c))
    # round 3: frequencies of the candidates with padding ell
    third = PaddingSampling(epsilon=epsilon, domain_size=max(c, 2), padding=ell)
    est3 = third.run(restrict_sets(_take(sets, groups[2]), candidates, domain_size), rng=gen)
    order = _top(est3, k)
    return TopItems(
        items=candidates[order],
        frequencies=est3.frequencies[order],
        candidates=candidates,
        padding=ell,
        length_estimate=dist,
        estimate=est3,
    )


def sample_one_item(
    users: Any, *, epsilon: float, domain_size: int, k: int, rng: RNGLike = None
) -> TopItems:
    """Estimate the top k items by the naive baseline.

    Every user reports one sampled item of her set (padding 1) over the whole domain; the k
    largest estimates.

    Examples
    --------
    >>> users = [[0, 1], [1, 2], [1], [0, 1, 3]] * 300
    >>> top = sample_one_item(users, epsilon=3.0, domain_size=6, k=2, rng=0)
    >>> top.items.size
    2
    """
    epsilon = check_epsilon(epsilon)
    domain_size = check_integer(domain_size, "domain_size", low=2)
    k = check_integer(k, "k", low=1, high=domain_size)
    spec = PaddingSampling(epsilon=epsilon, domain_size=domain_size, padding=1)
    est = spec.run(as_user_sets(users, domain_size), rng=rng)
    order = _top(est, k)
    return TopItems(
        items=order,
        frequencies=est.frequencies[order],
        candidates=_top(est, domain_size),
        padding=1,
        length_estimate=None,
        estimate=est,
    )


@dataclasses.dataclass(frozen=True)
class TopItemsets:
    """The answer of :func:`svsm`.

    Attributes
    ----------
    itemsets : list of tuple of int
        The k itemsets found (each of 2 or more items, ascending), most frequent first.
    frequencies : ndarray
        Their estimated (padded) frequencies, in the same order.
    candidates : list of tuple of int
        The candidate itemsets (``2k``), built from the frequent items.
    items : TopItems
        The SVIM answer on the first half of the users (the items the itemsets draw on).
    padding : int
        The padding length of the itemset round.
    estimate : SetFrequencyEstimate
        The itemset round's estimate over the candidates (in their order).
    """

    itemsets: list[tuple[int, ...]]
    frequencies: np.ndarray
    candidates: list[tuple[int, ...]]
    items: TopItems
    padding: int
    estimate: SetFrequencyEstimate


def _candidate_itemsets(
    items: np.ndarray, freq: np.ndarray, count: int, max_size: int
) -> list[tuple[int, ...]]:
    """Return the ``count`` itemsets (2..max_size of ``items``) of largest guessed frequency.

    The product of the items' estimated frequencies cut to [1e-6, 1] (an independence
    guess).
    """
    from itertools import combinations

    p = dict(zip(items.tolist(), np.clip(freq, 1e-6, 1.0).tolist()))
    scored = [
        (float(np.prod([p[i] for i in combo])), tuple(sorted(combo)))
        for size in range(2, max_size + 1)
        for combo in combinations(items.tolist(), size)
    ]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [combo for _, combo in scored[:count]]


def _holdings(sets: UserSets, candidates: list[tuple[int, ...]], items: np.ndarray) -> UserSets:
    """Return each user's set of the candidate itemsets she holds in full.

    Indices into ``candidates``, found by bit masks over ``items`` (at most 62 of them).
    """
    bit = {int(v): 1 << j for j, v in enumerate(items.tolist())}
    restricted = restrict_sets(sets, items, int(max(items.max(), sets.items.max(initial=0))) + 1)
    rows = np.repeat(np.arange(len(sets)), restricted.lengths)
    masks = np.zeros(len(sets), dtype=np.int64)
    np.bitwise_or.at(masks, rows, np.left_shift(1, restricted.items).astype(np.int64))
    want = np.array([sum(bit[i] for i in c) for c in candidates], dtype=np.int64)
    held = (masks[:, None] & want[None, :]) == want[None, :]
    user, cand = np.nonzero(held)
    lengths = np.bincount(user, minlength=len(sets))
    return UserSets(cand.astype(np.int64), np.concatenate([[0], np.cumsum(lengths)]))


def svsm(
    users: Any,
    *,
    epsilon: float,
    domain_size: int,
    k: int,
    max_size: int = 3,
    percentile: float = 0.9,
    rng: RNGLike = None,
) -> TopItemsets:
    """Simulate SVSM: the top-k frequent itemsets (of 2 to ``max_size`` items).

    Half of the users run :func:`svim` (its own three rounds) for the ``2k`` most frequent
    items; from them, ``2k`` candidate itemsets are guessed (largest product of the items'
    estimated frequencies). The other half splits in two: one quarter reports how many
    candidates it holds (GRR over ``0..2k``), giving the padding length (the
    ``percentile`` of that distribution); the last quarter reports one held candidate with
    padding-and-sampling over the ``2k`` candidates. Every user answers one question at the
    full budget.

    References
    ----------
    T. Wang, N. Li, S. Jha. Locally Differentially Private Frequent Itemset Mining. IEEE
    S&P 2018, section VI (SVSM). The candidate guess is the product of the item
    frequencies (ldpkit's reading of the paper's guessing step).

    Examples
    --------
    >>> users = [[0, 1], [0, 1, 2], [1, 2], [0, 1, 3], [4]] * 400
    >>> top = svsm(users, epsilon=4.0, domain_size=6, k=2, rng=0)
    >>> top.itemsets[0]
    (0, 1)
    """
    from ..frequency.grr import GRR

    epsilon = check_epsilon(epsilon)
    domain_size = check_integer(domain_size, "domain_size", low=4)
    k = check_integer(k, "k", low=1, high=min(domain_size // 2, 31))
    max_size = check_integer(max_size, "max_size", low=2, high=4)
    percentile = check_real(percentile, "percentile", low=0.0, high=1.0, low_inclusive=False)
    sets = as_user_sets(users, domain_size)
    if len(sets) < 6:
        raise ValueError(f"users must hold at least 6 users (one per round), got {len(sets)}")
    gen = as_generator(rng)
    order = gen.permutation(len(sets))
    half = len(sets) // 2
    k_items = min(2 * k, domain_size // 2, 62)  # the frequent items itemsets draw on
    items = svim(
        _take(sets, order[:half]), epsilon=epsilon, domain_size=domain_size, k=k_items, rng=gen
    )
    top_items, freq = items.items, items.frequencies
    candidates = _candidate_itemsets(top_items, freq, 2 * k, min(max_size, top_items.size))
    c = len(candidates)
    rest = order[half:]
    lengths_group, sample_group = rest[: rest.size // 2], rest[rest.size // 2 :]
    held = _holdings(_take(sets, lengths_group), candidates, top_items)
    grr = GRR(epsilon=epsilon, domain_size=c + 1)
    dist = np.clip(grr.run(np.minimum(held.lengths, c), rng=gen).frequencies, 0.0, None)
    dist = dist / dist.sum() if dist.sum() > 0 else np.full(c + 1, 1.0 / (c + 1))
    ell = max(1, min(int(np.searchsorted(np.cumsum(dist), percentile - 1e-12)), c))
    spec = PaddingSampling(epsilon=epsilon, domain_size=max(c, 2), padding=ell)
    est = spec.run(_holdings(_take(sets, sample_group), candidates, top_items), rng=gen)
    best = _top(est, min(k, c))
    best = best[best < c]
    return TopItemsets(
        itemsets=[candidates[i] for i in best.tolist()],
        frequencies=est.frequencies[best],
        candidates=candidates,
        items=items,
        padding=ell,
        estimate=est,
    )
