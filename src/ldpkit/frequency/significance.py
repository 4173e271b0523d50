"""Which estimated frequencies are significantly above zero (FO17 section 6.2, CON20 eq. 9)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy import stats as sps

from .._validation import check_probability
from ..estimate import FrequencyEstimate

__all__ = ["significance_threshold", "heavy_hitters"]


def _check(estimate: FrequencyEstimate) -> FrequencyEstimate:
    if not isinstance(estimate, FrequencyEstimate):
        raise TypeError(f"estimate must be a FrequencyEstimate, got {type(estimate).__name__}")
    return estimate


def significance_threshold(estimate: FrequencyEstimate, alpha: float = 0.05) -> np.ndarray:
    """Bonferroni threshold ``T_v = Phi^{-1}(1 - alpha/d) sqrt(Var*_v)`` on the frequency scale.

    An item whose estimate exceeds T has true frequency > 0 with family-wise error at most
    alpha over all d items (one-sided z-test of f_v = 0 using the variance at f = 0).
    CON20 (eq. 9) uses the same T with a larger alpha inside Base-Cut.
    """
    estimate = _check(estimate)
    alpha = check_probability(alpha, "alpha")
    z = sps.norm.isf(alpha / estimate.domain_size)
    return z * np.sqrt(estimate.variance_null)


def heavy_hitters(
    estimate: FrequencyEstimate,
    alpha: float = 0.05,
    *,
    method: Literal["bonferroni", "bh"] = "bonferroni",
) -> np.ndarray:
    """Items whose frequency is significantly above zero, largest estimate first.

    Parameters
    ----------
    estimate : FrequencyEstimate
        An unbiased estimate (its spec gives Var* through ``variance_null``).
    alpha : float
        Family-wise error rate (``"bonferroni"``, FO17) or false discovery rate
        (``"bh"``, Benjamini-Hochberg step-up, which finds more items at the price of
        controlling only the expected share of false discoveries).
    method : {"bonferroni", "bh"}

    Returns
    -------
    ndarray of int
        Item indices.
    """
    estimate = _check(estimate)
    alpha = check_probability(alpha, "alpha")
    f = estimate.frequencies
    if method == "bonferroni":
        selected = np.flatnonzero(f > significance_threshold(estimate, alpha))
    elif method == "bh":
        pvalues = sps.norm.sf(f / np.sqrt(estimate.variance_null))
        order = np.argsort(pvalues, kind="stable")
        d = f.size
        passing = np.flatnonzero(pvalues[order] <= alpha * np.arange(1, d + 1) / d)
        selected = order[: passing[-1] + 1] if passing.size else np.array([], dtype=np.int64)
    else:
        raise ValueError(f"method must be 'bonferroni' or 'bh', got {method!r}")
    return selected[np.argsort(-f[selected], kind="stable")].astype(np.int64)
