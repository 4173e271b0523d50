"""Which estimated frequencies are significantly above zero (FO17 section 6.2, CON20 eq. 9)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._postprocess import check_estimate as _check
from .._postprocess import expected_false_positive_cutoff  # re-exported
from .._validation import check_probability
from ..estimate import FrequencyEstimate

__all__ = ["significance_cutoff", "heavy_hitters"]


def significance_cutoff(estimate: FrequencyEstimate, alpha: float = 0.05) -> np.ndarray:
    """Bonferroni cutoff ``T_v = Phi^{-1}(1 - alpha/d) sqrt(Var*_v)`` on the frequency scale.

    An item of true frequency 0 exceeds T with probability about ``alpha / d`` (one-sided
    z-test of f_v = 0 with the variance at f = 0, ``estimate.variance_null``), so about
    alpha false positives are expected over the d items, which bounds the family-wise
    error by alpha (FO17 section 6.2). CON20's Base-Cut (eq. 9) uses the same T with 2
    expected false positives (:func:`expected_false_positive_cutoff`, which takes any
    number). When ``alpha >= d / 2`` the quantile is not positive and T is 0.

    Parameters
    ----------
    estimate : FrequencyEstimate
    alpha : float
        Family-wise error rate, a probability in (0, 1).

    Returns
    -------
    ndarray, shape (d,)
        The cutoff for every item (constant for pure oracles).

    Examples
    --------
    >>> T = significance_cutoff(FrequencyEstimate([0.5] * 4, 0.01, n=100), alpha=0.2)
    >>> bool(np.isclose(T[0], 1.6448536 * 0.1))  # Phi^-1(1 - 0.2/4) * sqrt(0.01)
    True
    """
    estimate = _check(estimate)
    # A family-wise error rate is a probability: alpha >= 1 bounds nothing.
    return expected_false_positive_cutoff(estimate, check_probability(alpha, "alpha"))


def heavy_hitters(
    estimate: FrequencyEstimate,
    alpha: float = 0.05,
    *,
    method: Literal["bonferroni", "bh"] = "bonferroni",
    indices: bool = False,
) -> Any:
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
    indices : bool
        Return item indices even when the estimate has labels.

    Returns
    -------
    list or ndarray of int
        The items' labels (a list) when the estimate has labels (attached by
        :meth:`ldpkit.Encoder.label`) and ``indices`` is False; else item indices.
    """
    estimate = _check(estimate)
    alpha = check_probability(alpha, "alpha")
    f = estimate.frequencies
    if method == "bonferroni":
        selected = np.flatnonzero(f > significance_cutoff(estimate, alpha))
    elif method == "bh":
        from scipy import stats as sps

        pvalues = sps.norm.sf(f / np.sqrt(estimate.variance_null))
        order = np.argsort(pvalues, kind="stable")
        d = f.size
        passing = np.flatnonzero(pvalues[order] <= alpha * np.arange(1, d + 1) / d)
        selected = order[: passing[-1] + 1] if passing.size else np.array([], dtype=np.int64)
    else:
        raise ValueError(f"method must be 'bonferroni' or 'bh', got {method!r}")
    items = selected[np.argsort(-f[selected], kind="stable")].astype(np.int64)
    return items if (indices or estimate.labels is None) else estimate.labels_of(items)
