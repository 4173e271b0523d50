"""Post-processing shared by several families.

Simplex projection, isotonic regression, noisy leaves to a probability vector, and the
significance cutoff of frequency estimates. It sits below the families (it imports only
numpy, ``_validation`` and the result type ``estimate``) so that ``consistency``
(frequency estimates), ``frequency.significance``, ``numeric.hierarchy`` and the result
type ``numeric.distribution.Distribution`` use one copy without importing each other. The
public names are re-exported from where users import them:
:func:`ldpkit.consistency.simplex_projection`,
:func:`ldpkit.numeric.hierarchy.isotonic_regression`,
:func:`ldpkit.numeric.hierarchy.leaves_to_probabilities` and
:func:`ldpkit.frequency.significance.expected_false_positive_cutoff`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import check_array, check_real
from .estimate import FrequencyEstimate

__all__ = [
    "POSTPROCESSINGS",
    "check_estimate",
    "expected_false_positive_cutoff",
    "isotonic_regression",
    "leaves_to_probabilities",
    "simplex_projection",
]


def simplex_projection(values: Any) -> np.ndarray:
    """Exact Euclidean projection of a vector onto the probability simplex.

    Solves ``min ||x - v||_2`` subject to ``x >= 0, sum x = 1`` by sorting (O(d log d)): with
    ``u`` sorted descending and ``rho = max{j : u_j + (1 - sum_{i<=j} u_i) / j > 0}``, the
    solution is ``x = max(v + delta, 0)`` with ``delta = (1 - sum_{i<=rho} u_i) / rho``
    (the KKT conditions of CON20 Appendix A; Held, Wolfe & Crowder 1974; Duchi et al. 2008).

    Examples
    --------
    >>> simplex_projection([0.7, 0.5, -0.2, 0.0])
    array([0.6, 0.4, 0. , 0. ])
    """
    v = check_array(values, "values", ndim=(0, 1, 2))
    if v.size and np.abs(v).max() > 1e100:  # the sorted partial sums must stay exact enough
        raise ValueError(f"values must have magnitudes <= 1e100, got {np.abs(v).max()!r}")
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite numbers, got NaN/inf")
    u = -np.sort(-v)
    css = np.cumsum(u)
    j = np.arange(1, v.size + 1)
    delta_j = (1.0 - css) / j
    # u_j + delta_j > 0 holds for a prefix j = 1..rho (and j = 1 always).
    rho = int(np.flatnonzero(u + delta_j > 0)[-1])
    return np.maximum(v + delta_j[rho], 0.0)


#: Post-processings of noisy leaves accepted by :func:`leaves_to_probabilities`.
POSTPROCESSINGS = ("norm_sub", "norm_mul", "cdf")


def isotonic_regression(values: Any) -> np.ndarray:
    """Least-squares non-decreasing fit of a sequence (pool adjacent violators, O(n)).

    Examples
    --------
    >>> isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"values must be a 1-D array, got shape {y.shape}")
    # Blocks of pooled values as parallel stacks (sum, count); merging keeps block means
    # non-decreasing, and each value is pushed and merged at most once.
    sums: list[float] = []
    counts: list[int] = []
    for value in y.tolist():
        total, count = value, 1
        while sums and sums[-1] * count > total * counts[-1]:  # previous mean > this mean
            total += sums.pop()
            count += counts.pop()
        sums.append(total)
        counts.append(count)
    return np.repeat(np.asarray(sums) / np.asarray(counts), counts)


def leaves_to_probabilities(leaves: Any, postprocess: str = "norm_sub") -> np.ndarray:
    """Turn noisy leaf frequencies (which may be negative) into a probability vector.

    Parameters
    ----------
    leaves : array_like
        Leaf estimates, e.g. from constrained inference or an inverse Haar transform.
    postprocess : {"norm_sub", "norm_mul", "cdf"}
        * ``"norm_sub"``: the Euclidean projection onto the simplex (Norm-Sub, CON20).
        * ``"norm_mul"``: negatives to 0, then rescale to sum 1 (clip and renormalize).
        * ``"cdf"``: the cumulative sums (a noisy CDF) replaced by their least-squares
          non-decreasing fit (:func:`isotonic_regression`), clipped to [0, 1] with the last
          value 1; probabilities are its differences. Leaf-wise projections keep the
          positive noise of the many near-empty leaves and so move mass towards them; the
          CDF fit only pools neighbouring leaves, which is far kinder to W1 and KS.

    Examples
    --------
    >>> np.round(leaves_to_probabilities([0.6, -0.1, 0.3, 0.2], "norm_sub"), 4).tolist()
    [0.5667, 0.0, 0.2667, 0.1667]
    >>> np.round(leaves_to_probabilities([0.6, -0.1, 0.3, 0.2], "cdf"), 4).tolist()
    [0.55, 0.0, 0.25, 0.2]
    """
    x = np.asarray(leaves, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(
            f"leaves must be a non-empty 1-D array of finite numbers, got shape {x.shape}"
        )
    if postprocess == "norm_sub":
        return simplex_projection(x)
    if postprocess == "norm_mul":
        clipped = np.maximum(x, 0.0)
        total = clipped.sum()
        return clipped / total if total > 0 else np.full(x.size, 1.0 / x.size)
    if postprocess == "cdf":
        cdf = np.clip(isotonic_regression(np.cumsum(x)), 0.0, 1.0)
        cdf[-1] = 1.0  # clipping kept it non-decreasing; the total is 1
        return np.diff(cdf, prepend=0.0)
    raise ValueError(f"postprocess must be one of {list(POSTPROCESSINGS)}, got {postprocess!r}")


def check_estimate(estimate: FrequencyEstimate) -> FrequencyEstimate:
    """Return ``estimate`` after checking that it is a FrequencyEstimate."""
    if not isinstance(estimate, FrequencyEstimate):
        raise TypeError(f"estimate must be a FrequencyEstimate, got {type(estimate).__name__}")
    return estimate


def expected_false_positive_cutoff(estimate: FrequencyEstimate, alpha: float) -> np.ndarray:
    """Return the cutoff ``Phi^{-1}(1 - alpha/d) sqrt(Var*_v)`` for ``alpha`` false positives.

    ``alpha`` > 0 is the number of false positives expected over the d items (any number,
    e.g. CON20's Base-Cut, eq. 9, takes 2).

    When ``alpha >= d / 2`` the quantile is not positive and the cutoff is 0.

    Examples
    --------
    >>> est = FrequencyEstimate([0.5] * 4, 0.01, n=100)
    >>> float(expected_false_positive_cutoff(est, 2.0)[0])
    0.0
    """
    estimate = check_estimate(estimate)
    alpha = check_real(alpha, "alpha", low=0.0, low_inclusive=False)
    var = np.asarray(estimate.variance_null, dtype=np.float64)
    if not np.all(np.isfinite(var)) or np.any(var < 0):
        raise ValueError("estimate.variance_null must be finite and >= 0")
    from scipy import special  # server side: not loaded on the client path

    d = estimate.domain_size
    # Phi^-1(1 - a) = -Phi^-1(a), which stays accurate for tiny a = alpha / d.
    z = float(-special.ndtri(alpha / d)) if alpha < d else 0.0
    return max(z, 0.0) * np.sqrt(var)
