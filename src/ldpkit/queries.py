"""Queries answered from a frequency estimate, and their error metrics (CON20 section V).

CON20 judges every consistency method (:mod:`ldpkit.consistency`) on the queries a user
asks of a frequency vector:

* **single values** (full domain): the frequency of each item;
* **set values**: the total frequency of a random subset covering ``rho`` of the domain
  (CON20 draws ``rho * d`` items uniformly without replacement, sec. V-D);
* **ranges** over an ordinal domain: the total frequency of items ``lo, ..., hi - 1``,
  answered from prefix sums (not studied by CON20; the natural query for ordinal data);
* **frequent values**: the frequencies of the ``k`` *truly* most frequent items
  (sec. V-E: neither the oracle nor the post-processing knows which items these are).

Each error metric is the mean squared difference between the estimated and the true
answers over the query set (CON20 sec. V-A); :func:`mse` is the one entry point.

Post-Pos (CON20 sec. IV-A) is a query-time method: it clamps each *answer* at 0 rather than
post-processing the frequencies. Every answer function here takes ``clamp``: ``None``
(the default) clamps exactly when the estimate was returned by
:func:`ldpkit.consistency.post_pos`, ``True``/``False`` force it. Raw arrays are not
clamped unless asked.

Estimates may be given as a :class:`~ldpkit.FrequencyEstimate` or as a plain 1-D array of
frequencies; true frequencies as a 1-D array of the same length.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import (
    MAX_ENTRIES,
    MAX_MAGNITUDE,
    check_integer,
    check_memory,
    check_not_masked,
    check_real,
)
from .estimate import FrequencyEstimate, IntervalWarning

__all__ = [
    "single_value_answers",
    "random_subsets",
    "set_answers",
    "random_ranges",
    "range_answers",
    "set_variances",
    "range_variances",
    "top_k_items",
    "mse",
]

#: Name of the Post-Pos step in ``FrequencyEstimate.postprocessing``.
POST_POS = "post_pos"

# Bound on the temporaries built when drawing subsets or gathering answers (elements).
_CHUNK_ELEMENTS = 1 << 22


def _frequencies(estimate: Any, name: str = "estimate") -> np.ndarray:
    """Return the frequency vector of an estimate or array, as finite float64 (validated)."""
    if isinstance(estimate, FrequencyEstimate):
        f = estimate.frequencies
    else:
        check_not_masked(estimate, name)
        try:
            f = np.asarray(estimate)
        except Exception as exc:  # pragma: no cover - exotic inputs
            raise TypeError(f"{name} must be a FrequencyEstimate or a 1-D array") from exc
        if f.dtype.kind not in "iuf" or f.dtype == np.bool_:
            raise TypeError(
                f"{name} must be a FrequencyEstimate or a 1-D array of real numbers, "
                f"got {type(estimate).__name__} of dtype {f.dtype}"
            )
        f = f.astype(np.float64, copy=False)
    if f.ndim != 1 or f.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {f.shape}")
    bad = ~np.isfinite(f)
    if bad.any():
        raise ValueError(
            f"{name} must hold finite frequencies, got {int(bad.sum())} NaN/inf value(s)"
        )
    # squared errors of larger magnitudes would overflow to inf
    big = np.abs(f) > MAX_MAGNITUDE
    if big.any():
        raise ValueError(
            f"{name} must hold frequencies in [{-MAX_MAGNITUDE:g}, {MAX_MAGNITUDE:g}], "
            f"got {float(f[big][0])!r}"
        )
    return f


def _pair(estimate: Any, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    f = _frequencies(estimate, "estimate")
    t = _frequencies(truth, "truth")
    if f.shape != t.shape:
        raise ValueError(f"truth must have one entry per item ({f.size}), got {t.size} entries")
    return f, t


def _clamp(estimate: Any, clamp: bool | None) -> bool:
    if clamp is None:
        return isinstance(estimate, FrequencyEstimate) and POST_POS in estimate.postprocessing
    if not isinstance(clamp, (bool, np.bool_)):
        raise TypeError(f"clamp must be True, False or None, got {clamp!r}")
    return bool(clamp)


def _finish(answers: np.ndarray, clamp: bool) -> np.ndarray:
    return np.maximum(answers, 0.0) if clamp else answers


def single_value_answers(
    estimate: Any, items: Any = None, *, clamp: bool | None = None
) -> np.ndarray:
    """Estimated frequency of each item (all items when ``items`` is None).

    Parameters
    ----------
    estimate : FrequencyEstimate or array_like
        The (possibly post-processed) frequencies.
    items : array_like of int, optional
        Items to answer for.
    clamp : bool or None
        Clamp answers at 0 (Post-Pos). None: only for estimates tagged by
        :func:`ldpkit.consistency.post_pos`.

    Examples
    --------
    >>> single_value_answers([0.5, -0.1, 0.6], [1, 2], clamp=True)
    array([0. , 0.6])
    """
    f = _frequencies(estimate)
    out = f if items is None else f[_items(items, f.size)]
    return _finish(out.copy(), _clamp(estimate, clamp))


def _items(items: Any, d: int, name: str = "items") -> np.ndarray:
    check_not_masked(items, "items")
    arr = np.asarray(items)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers in [0, {d}), got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= d):
        raise ValueError(f"{name} must be integers in [0, {d}), got values outside it")
    return arr.astype(np.int64, copy=False)


def random_subsets(
    domain_size: int, rho: float, n_queries: int = 100, *, rng: RNGLike = None
) -> np.ndarray:
    """Random set-value queries: ``n_queries`` uniform subsets of ``rho`` of the domain.

    Each row is a subset of ``s = max(1, round(rho * d))`` distinct items drawn uniformly
    without replacement (CON20 sec. V-D), independently across rows.

    Parameters
    ----------
    domain_size : int
        d (>= 1).
    rho : float
        Fraction of the domain each query covers, in (0, 1] (CON20's rho% / 100).
    n_queries : int
        Number of queries (>= 1).
    rng : Generator, SeedSequence, int or None
        Source of randomness.

    Returns
    -------
    ndarray of int64, shape (n_queries, s)
        Item indices, each row sorted.

    Examples
    --------
    >>> random_subsets(10, 0.3, 2, rng=0).shape
    (2, 3)
    """
    d = check_integer(domain_size, "domain_size", low=1, high=MAX_ENTRIES)
    rho = check_real(rho, "rho", low=0.0, high=1.0, low_inclusive=False)
    m = check_integer(n_queries, "n_queries", low=1, high=MAX_ENTRIES)
    check_memory(8.0 * m * min(d, max(1, round(rho * d))), "n_queries", "random_subsets")
    gen = as_generator(rng)
    s = min(d, max(1, round(rho * d)))
    out = np.empty((m, s), dtype=np.int64)
    rows = max(1, _CHUNK_ELEMENTS // d)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        # The s smallest of d i.i.d. uniform keys form a uniform random s-subset.
        keys = gen.random((stop - start, d))
        part = np.argpartition(keys, s - 1, axis=1)[:, :s] if s < d else np.argsort(keys, axis=1)
        out[start:stop] = np.sort(part, axis=1)
    return out


def set_answers(estimate: Any, subsets: Any, *, clamp: bool | None = None) -> np.ndarray:
    """Estimated total frequency of each set query.

    Parameters
    ----------
    estimate : FrequencyEstimate or array_like
        The frequencies.
    subsets : ndarray
        Either a boolean membership matrix of shape (m, d) (sets of any sizes, e.g. fixed
        categories) or an integer matrix of shape (m, s) whose rows list each set's items
        (as :func:`random_subsets` returns).
    clamp : bool or None
        Clamp each answer at 0 (Post-Pos); see the module notes.

    Examples
    --------
    >>> set_answers([0.1, 0.2, 0.7], [[0, 2], [1, 2]])
    array([0.8, 0.9])
    >>> set_answers([0.1, 0.2, 0.7], np.array([[True, False, True]]))
    array([0.8])
    """
    f = _frequencies(estimate)
    return _finish(_set_sums(f, subsets), _clamp(estimate, clamp))


def _set_sums(f: np.ndarray, subsets: Any) -> np.ndarray:
    check_not_masked(subsets, "subsets")
    sub = np.asarray(subsets)
    d = f.size
    if sub.ndim != 2:
        raise ValueError(f"subsets must be a 2-D array (one row per query), got shape {sub.shape}")
    if sub.dtype == np.bool_:
        if sub.shape[1] != d:
            raise ValueError(
                f"subsets must have one column per item ({d}) as a membership matrix, "
                f"got shape {sub.shape}"
            )
        out = np.empty(sub.shape[0])
        rows = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, sub.shape[0], rows):
            block = sub[start : start + rows]
            out[start : start + rows] = np.where(block, f, 0.0).sum(axis=1)
        return out
    idx = _items(sub, d, "subsets")
    out = np.empty(idx.shape[0])
    rows = max(1, _CHUNK_ELEMENTS // max(1, idx.shape[1]))
    for start in range(0, idx.shape[0], rows):
        out[start : start + rows] = f[idx[start : start + rows]].sum(axis=1)
    return out


def random_ranges(
    domain_size: int,
    n_queries: int = 100,
    *,
    length: int | None = None,
    rng: RNGLike = None,
) -> np.ndarray:
    """Random range queries ``[lo, hi)`` over an ordinal domain ``0..d-1``.

    With ``length=None`` each range is uniform over all ``d (d + 1) / 2`` non-empty ranges
    (two distinct cut points in ``0..d``); with an integer ``length`` the start is uniform
    and ``hi = lo + length``.

    Returns
    -------
    ndarray of int64, shape (n_queries, 2)
        Columns ``lo`` (inclusive) and ``hi`` (exclusive).

    Examples
    --------
    >>> r = random_ranges(100, 3, length=10, rng=0)
    >>> bool(np.all(r[:, 1] - r[:, 0] == 10))
    True
    """
    d = check_integer(domain_size, "domain_size", low=1, high=2**62)
    m = check_integer(n_queries, "n_queries", low=1, high=MAX_ENTRIES // 2)
    gen = as_generator(rng)
    if length is None:
        a = gen.integers(0, d + 1, size=m)
        b = gen.integers(0, d, size=m)
        b += b >= a  # b uniform over the d cut points other than a
        lo, hi = np.minimum(a, b), np.maximum(a, b)
    else:
        length = check_integer(length, "length", low=1, high=d)
        lo = gen.integers(0, d - length + 1, size=m)
        hi = lo + length
    return np.stack([lo, hi], axis=1).astype(np.int64)


def range_answers(estimate: Any, ranges: Any, *, clamp: bool | None = None) -> np.ndarray:
    """Estimated total frequency of each range ``[lo, hi)``, from prefix sums (O(d + m)).

    Examples
    --------
    >>> range_answers([0.1, 0.2, 0.3, 0.4], [[0, 2], [1, 4]])
    array([0.3, 0.9])
    """
    f = _frequencies(estimate)
    return _finish(_range_sums(f, ranges), _clamp(estimate, clamp))


def _range_sums(f: np.ndarray, ranges: Any) -> np.ndarray:
    check_not_masked(ranges, "ranges")
    r = np.asarray(ranges)
    d = f.size
    if r.ndim != 2 or r.shape[1] != 2 or r.dtype.kind not in "iu":
        raise ValueError(f"ranges must be an integer array of shape (m, 2), got {r.shape}")
    lo, hi = r[:, 0].astype(np.int64), r[:, 1].astype(np.int64)
    if r.size and (lo.min() < 0 or hi.max() > d or np.any(lo > hi)):
        raise ValueError(f"ranges must satisfy 0 <= lo <= hi <= {d}")
    prefix = np.concatenate([[0.0], np.cumsum(f)])
    return prefix[hi] - prefix[lo]


def range_variances(estimate: FrequencyEstimate, ranges: Any) -> np.ndarray:
    """Variance of each range answer ``sum_{lo <= v < hi} f~_v`` of a plain oracle estimate.

    The items' estimates are correlated when one report supports several of them, so a
    sum's variance is not the sum of :attr:`FrequencyEstimate.variance`: GRR's are
    negatively correlated (one item reported), and OLH/BLH over plain item indices
    positively on a range of adjacent items (its hash family is pairwise, not 3-wise,
    independent: ``ldpkit.frequency.hashing``, "Mixed item keys"), where the spread measured
    1.2-2.1x the summed variances at eps 2-4. This returns the exact variance under the
    oracle's own law, for the users behind the estimate, at the plug-in frequencies (the
    estimate clipped at 0 and normalized): ``sum_x f_x Var[u . s | x] / (n (p - q)^2)``
    with ``u`` the range's indicator and ``s`` a report's support (FO17 section 4; the
    local-hashing triple term in docs/design/METHODS.md, "Sums of plain local-hashing
    estimates"). A normal interval is ``answer +- z sqrt(variance)``.

    Parameters
    ----------
    estimate : FrequencyEstimate
        A plain (not post-processed) estimate of a pure frequency oracle that states its
        support law: GRR, SUE, OUE, BLH, OLH (also the oracles of ``cfo_oracle``).
    ranges : array_like of int, shape (m, 2)
        Rows ``[lo, hi)`` with ``0 <= lo <= hi <= d``.

    Returns
    -------
    ndarray, shape (m,)
        NaN for every range after post-processing (with an ``IntervalWarning``), as
        :meth:`FrequencyEstimate.confidence_interval`.

    Examples
    --------
    >>> from ldpkit import GRR
    >>> est = GRR(epsilon=2.0, domain_size=4).run([0, 1, 1, 2, 3] * 40, rng=0)
    >>> var = range_variances(est, [[0, 2], [0, 4]])
    >>> bool(var[0] > 0), bool(var[1] < 1e-12)  # the whole domain: always 1 under GRR
    (True, True)
    """
    f, spec = _plain_estimate(estimate)
    d = f.size
    check_not_masked(ranges, "ranges")
    r = np.asarray(ranges)
    _range_sums(f, r)  # the same checks as range_answers
    check_memory(8.0 * d * r.shape[0], "ranges", "range_variances")
    idx = np.arange(d)[:, None]
    u = ((idx >= r[:, 0]) & (idx < r[:, 1])).astype(np.float64)
    return _sum_variances(estimate, spec, u)


def set_variances(estimate: FrequencyEstimate, subsets: Any) -> np.ndarray:
    """Variance of each set answer ``sum_{v in S} f~_v`` of a plain oracle estimate.

    The exact variance under the oracle's law, covariances included (see
    :func:`range_variances`); ``subsets`` as in :func:`set_answers`.

    Examples
    --------
    >>> from ldpkit import OUE
    >>> est = OUE(epsilon=1.0, domain_size=4).run([0, 1, 1, 2, 3] * 40, rng=0)
    >>> var = set_variances(est, [[0, 2]])
    >>> bool(np.isclose(var[0], est.variance[[0, 2]].sum(), rtol=0.05))  # independent bits
    True
    """
    f, spec = _plain_estimate(estimate)
    d = f.size
    _set_sums(f, subsets)  # the same checks as set_answers
    sub = np.asarray(subsets)
    check_memory(8.0 * d * sub.shape[0], "subsets", "set_variances")
    if sub.dtype == np.bool_:
        u = sub.T.astype(np.float64)
    else:
        u = np.zeros((d, sub.shape[0]))
        cols = np.broadcast_to(np.arange(sub.shape[0])[:, None], sub.shape)
        np.add.at(u, (sub.astype(np.int64), cols), 1.0)  # a repeated item counts twice
    return _sum_variances(estimate, spec, u)


def _plain_estimate(estimate: Any) -> tuple[np.ndarray, Any]:
    """Return the frequencies and the oracle of an estimate whose sums have a known law."""
    if not isinstance(estimate, FrequencyEstimate):
        raise TypeError(
            "estimate must be a FrequencyEstimate of a frequency oracle (its spec gives the "
            f"law of the reports), got {type(estimate).__name__}"
        )
    spec = estimate.spec
    if spec is None or not callable(getattr(spec, "_support_variance", None)):
        name = "no spec" if spec is None else spec.name
        raise ValueError(
            "estimate must come from an oracle that states its support law (GRR, SUE, OUE, "
            f"BLH, OLH), got {name}"
        )
    if estimate.n < 1:
        raise ValueError(f"estimate must rest on n >= 1 reports, got n = {estimate.n}")
    return _frequencies(estimate), spec


def _sum_variances(estimate: FrequencyEstimate, spec: Any, u: np.ndarray) -> np.ndarray:
    """``sum_x f_x Var[u[:, i] . s | x] / (n (p - q)^2)`` at the plug-in frequencies."""
    if estimate.postprocessing:
        warnings.warn(
            f"sum variances are NaN: post-processing {list(estimate.postprocessing)} biases "
            "the estimate (use the plain estimate)",
            IntervalWarning,
            stacklevel=3,
        )
        return np.full(u.shape[1], np.nan)
    f = np.clip(estimate.frequencies, 0.0, None)
    total = f.sum()
    f = f / total if total > 0 else np.full(f.size, 1.0 / f.size)
    p, q = float(spec.p), float(spec.q)
    var_s = spec._support_variance(u)  # Var[u . s | x], rows x: the oracle's own law
    # users fixed, as FrequencyEstimate.variance (FO17 eq. 2): no sampling term
    return np.maximum(f @ var_s, 0.0) / (estimate.n * (p - q) ** 2)


def top_k_items(truth: Any, k: int) -> np.ndarray:
    """Return the k truly most frequent items, most frequent first (ties: smaller index first).

    Examples
    --------
    >>> top_k_items([0.1, 0.5, 0.1, 0.3], 2)
    array([1, 3])
    """
    t = _frequencies(truth, "truth")
    k = check_integer(k, "k", low=1, high=t.size)
    return np.argsort(-t, kind="stable")[:k]


QueryName = Literal["full", "set", "range", "topk"]


def mse(
    estimate: Any,
    truth: Any,
    query: QueryName = "full",
    *,
    items: Any = None,
    subsets: Any = None,
    rho: float = 0.1,
    ranges: Any = None,
    length: int | None = None,
    n_queries: int = 100,
    k: int = 10,
    clamp: bool | None = None,
    rng: RNGLike = None,
) -> float:
    """Mean squared error of an estimate's answers to a query set (CON20 sec. V-A).

    Parameters
    ----------
    estimate : FrequencyEstimate or array_like
        Estimated (possibly post-processed) frequencies.
    truth : array_like
        True frequencies, same length.
    query : {"full", "set", "range", "topk"}
        * ``"full"``: ``mean_v (f'_v - f_v)^2`` over the domain (or over ``items``);
        * ``"set"``: mean over set queries of ``(sum_S f' - sum_S f)^2``; the sets are
          ``subsets`` if given, else ``n_queries`` random subsets covering ``rho`` of the
          domain drawn with ``rng`` (pass the same ``subsets`` to compare methods on the
          same queries);
        * ``"range"``: the same over ranges ``[lo, hi)`` (``ranges`` or
          :func:`random_ranges` with ``length`` and ``n_queries``);
        * ``"topk"``: ``mean_{v in top-k} (f'_v - f_v)^2`` over the k truly most frequent
          items (CON20 sec. V-E).
    clamp : bool or None
        Clamp each estimated answer at 0 (Post-Pos); None follows the estimate's tag.
    rng : Generator, SeedSequence, int or None
        Draws the random queries when they are not given.

    Returns
    -------
    float

    Examples
    --------
    >>> truth = np.array([0.5, 0.3, 0.2, 0.0])
    >>> est = np.array([0.6, 0.3, 0.2, -0.1])
    >>> mse(est, truth)
    0.005
    >>> mse(est, truth, "topk", k=1)
    0.01
    >>> mse(est, truth, "set", subsets=[[0, 3]])
    0.0
    >>> mse(est, truth, "range", ranges=[[0, 4]])
    0.0
    """
    f, t = _pair(estimate, truth)
    do_clamp = _clamp(estimate, clamp)
    if query == "full":
        if items is not None:
            idx = _items(items, f.size)
            f, t = f[idx], t[idx]
        est_ans, true_ans = f, t
    elif query == "topk":
        idx = top_k_items(t, k)
        est_ans, true_ans = f[idx], t[idx]
    elif query == "set":
        if subsets is None:
            subsets = random_subsets(f.size, rho, n_queries, rng=rng)
        est_ans, true_ans = _set_sums(f, subsets), _set_sums(t, subsets)
    elif query == "range":
        if ranges is None:
            ranges = random_ranges(f.size, n_queries, length=length, rng=rng)
        est_ans, true_ans = _range_sums(f, ranges), _range_sums(t, ranges)
    else:
        raise ValueError(f"query must be one of 'full', 'set', 'range', 'topk', got {query!r}")
    if est_ans.size == 0:
        raise ValueError("the query set must not be empty")
    err = _finish(est_ans, do_clamp) - true_ans
    return float(np.mean(err * err))
