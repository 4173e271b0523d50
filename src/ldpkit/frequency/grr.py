"""Generalized randomized response (GRR, a.k.a. direct encoding / k-RR), FO17 section 4.1."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .._rng import RNGLike, as_generator
from ..privacy import ratio_privacy_loss
from ..spec import Reports, StatsField
from ._base import PureFrequencyOracle, index_dtype

__all__ = ["GRR", "grr_perturb"]


def grr_perturb(
    values: np.ndarray, domain_size: int, p: float, rng: np.random.Generator
) -> np.ndarray:
    """Keep each value w.p. ``p``, else replace it by a uniform *other* value.

    One uniform per user: ``u < p`` keeps; otherwise ``(u - p) / (1 - p)`` is uniform on
    [0, 1) and picks one of the d - 1 other values. Shared by GRR and the hashing oracles.
    """
    u = rng.random(values.shape[0])
    scale = (domain_size - 1) / (1.0 - p) if p < 1.0 else 0.0
    other = np.maximum((u - p) * scale, 0.0).astype(np.int64)
    np.minimum(other, domain_size - 2, out=other)  # guard the u -> 1 rounding edge
    other += other >= values
    return np.where(u < p, values, other)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GRR(PureFrequencyOracle):
    """Generalized randomized response over d items.

    Each user reports her true item with probability ``p = e^eps / (e^eps + d - 1)`` and
    any other given item with probability ``q = 1 / (e^eps + d - 1)``.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    ``P[y | v] / P[y | v'] <= p / q = e^eps``, so GRR is eps-LDP, tightly. The estimator
    ``(C_v/n - q)/(p - q)`` has ``n Var* = (d - 2 + e^eps) / (e^eps - 1)^2`` (FO17 eq. 4-5).
    GRR beats OUE/OLH when ``d < 3 e^eps + 2`` (FO17 section 5).

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.1 ("Direct Encoding").

    Examples
    --------
    >>> grr = GRR(epsilon=1.0, domain_size=4)
    >>> reports = grr.randomize([0, 1, 2, 3, 3], rng=0)
    >>> len(reports), reports.values.dtype
    (5, dtype('uint8'))
    """

    @property
    def p(self) -> float:
        # e/(e+d-1) written with e^-eps so that huge epsilon neither overflows nor gives NaN
        return 1.0 / (1.0 + (self.domain_size - 1) * math.exp(-self.epsilon))

    @property
    def q(self) -> float:
        t = math.exp(-self.epsilon)
        return t / (1.0 + (self.domain_size - 1) * t)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Perturb each user's item; ``reports.values`` holds the reported items."""
        v = self.check_values(values)
        y = grr_perturb(v, self.domain_size, self.p, as_generator(rng))
        return Reports(self, values=y.astype(index_dtype(self.domain_size)))

    def stats_schema(self) -> dict[str, StatsField]:
        """``counts``: one supported item per report, so they sum to n."""
        return {"counts": StatsField((self.domain_size,), total=1)}

    def support_counts(self, reports: Reports) -> np.ndarray:
        y = reports.values
        if y.ndim != 1 or y.dtype.kind not in "iu" or (y.size and int(y.max()) >= self.domain_size):
            raise ValueError(f"reports.values must be items in [0, {self.domain_size})")
        return np.bincount(y, minlength=self.domain_size)

    def transition_matrix(self) -> np.ndarray:
        d = self.domain_size
        m = np.full((d, d), self.q)
        np.fill_diagonal(m, self.p)
        return m

    def output_index(self, reports: Reports) -> np.ndarray:
        return np.asarray(self.check_reports(reports).values, dtype=np.int64)

    def privacy_loss(self) -> float:
        # Every output column holds p once and q elsewhere: the ratio is p / q.
        return ratio_privacy_loss(self.p, self.q)
