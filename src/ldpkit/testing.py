"""Statistical checks for randomized mechanisms, usable by ldpkit's tests and by auditors.

Each check returns a p-value or a z-score; callers compare against a stated alpha. They are
exact where the sampling law is exact (binomial marginals, multinomial histograms).
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

__all__ = ["chisquare_gof", "binomial_z", "bonferroni_z", "variance_ratio_bounds"]


def chisquare_gof(
    observed: np.ndarray, probabilities: np.ndarray, *, min_expected: float = 5.0
) -> float:
    """Pearson chi-square goodness-of-fit p-value of a histogram against probabilities.

    Bins with expected count below ``min_expected`` are pooled (smallest first) so the
    chi-square approximation holds. Bins with probability 0 must be empty, else p = 0.
    """
    obs = np.asarray(observed, dtype=np.float64).ravel()
    prob = np.asarray(probabilities, dtype=np.float64).ravel()
    if obs.shape != prob.shape:
        raise ValueError(
            f"observed and probabilities must have one shape, got {obs.shape}, {prob.shape}"
        )
    n = obs.sum()
    zero = prob <= 0
    if np.any(obs[zero] > 0):
        return 0.0
    obs, prob = obs[~zero], prob[~zero] / prob[~zero].sum()
    expected = n * prob
    order = np.argsort(expected)
    obs, expected = obs[order], expected[order]
    # Pool the small-expectation bins (sorted ascending) into one bin until it reaches
    # min_expected; the remaining bins already do.
    cum = np.cumsum(expected)
    k = int(np.searchsorted(cum, min_expected)) + 1 if expected[0] < min_expected else 0
    k = min(k, expected.size)
    if k > 0:
        obs = np.concatenate([[obs[:k].sum()], obs[k:]])
        expected = np.concatenate([[expected[:k].sum()], expected[k:]])
    if expected.size < 2:
        return 1.0
    stat = float(np.sum((obs - expected) ** 2 / expected))
    return float(sps.chi2.sf(stat, expected.size - 1))


def binomial_z(count: np.ndarray, n: int, prob: np.ndarray) -> np.ndarray:
    """z-scores of binomial counts against their success probabilities."""
    prob = np.asarray(prob, dtype=np.float64)
    return (np.asarray(count, dtype=np.float64) - n * prob) / np.sqrt(n * prob * (1.0 - prob))


def bonferroni_z(alpha: float, m: int) -> float:
    """Two-sided |z| threshold for m simultaneous tests at family-wise level alpha."""
    return float(sps.norm.isf(alpha / (2.0 * m)))


def variance_ratio_bounds(dof: int, alpha: float) -> tuple[float, float]:
    """Bounds for sample variance / true variance with ``dof`` degrees of freedom (normal data)."""
    return (
        float(sps.chi2.ppf(alpha / 2.0, dof) / dof),
        float(sps.chi2.isf(alpha / 2.0, dof) / dof),
    )
