"""Shared set-ups of the AutoDistribution tests (the HH node counts, a steep low end, an
end window to refit)."""

from __future__ import annotations

import numpy as np

from ldpkit.numeric import AutoDistribution
from ldpkit.numeric.auto import _hybrid_model


def node_counts(spec: AutoDistribution, theta: np.ndarray, users: float) -> np.ndarray:
    """Expected HH support counts of every node under ``theta`` (``users`` per level)."""
    md = _hybrid_model(spec)
    prefix = np.concatenate([[0.0], np.cumsum(theta)])
    out = []
    for size, rep, p, q in zip(md.sizes, md.reps, md.p, md.q, strict=True):
        lo = np.arange(size) * rep
        out.append(users * (q + (p - q) * (prefix[lo + rep] - prefix[lo])))
    return np.concatenate(out)


def pareto_body(n: int, seed: int) -> np.ndarray:
    """15 % at 0 and a Pareto(1.3) body, scaled by the sample's maximum: 99 % of the users
    in the first 3 % of the domain."""
    gen = np.random.default_rng([7, seed])
    body = gen.pareto(1.3, n)
    body[gen.random(n) < 0.15] = 0.0
    return body / body.max()


def window_shapes(d: int) -> tuple[np.ndarray, np.ndarray]:
    """A fit with 0.66 in bucket 0 and a decaying window, and the truth: bucket 0 at 0.62
    (a share of the window's total on the refit's grid), the rest of the window scaled up."""
    fit = np.full(d, 0.1 / d)
    fit[:16] += 0.9 * 0.5 ** np.arange(16)
    fit *= 1.0 / fit.sum()
    fit[0] += 0.66 - fit[0]
    fit *= 1.0 / fit.sum()
    total = float(fit[:16].sum())
    truth = fit.copy()
    share = round(400 * 0.62 / total) / 400  # on the grid of 401 shares
    truth[:16] *= (total - share * total) / (total - fit[0])
    truth[0] = share * total
    return fit, truth
