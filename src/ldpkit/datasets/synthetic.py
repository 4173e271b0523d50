"""Synthetic data sets used by the papers, reproducible under a seed."""

from __future__ import annotations

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import MAX_ENTRIES, check_integer, check_real
from ._dataset import Dataset

__all__ = ["beta", "zipf", "zipf_probabilities", "gaussian_items", "uniform_items"]

_LICENCE = "generated (no licence needed)"
_SOURCE = "ldpkit.datasets.synthetic"


def beta(a: float = 5.0, b: float = 2.0, n: int = 100_000, *, rng: RNGLike = None) -> Dataset:
    """``n`` i.i.d. draws from Beta(a, b) on [0, 1].

    The default Beta(5, 2) with 100,000 samples is SW20's synthetic data set (section 6.1)
    and the smooth example of WAV25.

    Returns
    -------
    Dataset
        Numerical, ``float64`` in ``[0, 1]``, domain ``(0, 1)``.

    Examples
    --------
    >>> data = beta(n=1000, rng=0)
    >>> data.n, data.domain
    (1000, (0.0, 1.0))
    >>> round(float(data.values.mean()), 1)  # E = a / (a + b) = 5/7
    0.7
    """
    a = check_real(a, "a", low=0.0, low_inclusive=False)
    b = check_real(b, "b", low=0.0, low_inclusive=False)
    n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
    values = as_generator(rng).beta(a, b, size=n)
    return Dataset(
        name="beta",
        kind="numerical",
        values=values,
        domain=(0.0, 1.0),
        citation=(
            "Z. Li, T. Wang, M. Lopuhaa-Zwakenberg, N. Li, B. Skoric. Estimating Numerical "
            "Distributions under Local Differential Privacy. SIGMOD 2020, section 6.1."
        ),
        description=f"{n} i.i.d. draws from Beta({a:g}, {b:g}).",
        licence=_LICENCE,
        source=_SOURCE,
    )


def zipf_probabilities(s: float, d: int) -> np.ndarray:
    """Return the truncated Zipf law on d items: ``P[i] = (i + 1)^-s / H(d, s)`` for ``i = 0..d-1``.

    Examples
    --------
    >>> zipf_probabilities(1.0, 3).round(4)
    array([0.5455, 0.2727, 0.1818])
    """
    s = check_real(s, "s", low=0.0, high=1e6)  # beyond, s * log(d) loses all precision
    d = check_integer(d, "d", low=1, high=MAX_ENTRIES)
    # computed in log space so that a large s cannot underflow every weight to zero
    logw = -s * np.log(np.arange(1, d + 1, dtype=np.float64))
    w = np.exp(logw - logw.max())
    return w / w.sum()


def zipf(s: float = 1.1, d: int = 1024, n: int = 10_000, *, rng: RNGLike = None) -> Dataset:
    """``n`` users each holding an item drawn from the Zipf law of :func:`zipf_probabilities`.

    FO17 section 6 uses ``s = 1.1`` with 10,000 users; CON20 (consistency) uses
    ``s = 1.5``, ``d = 1024`` and 1,000,000 users.

    Returns
    -------
    Dataset
        Categorical, ``int64`` values in ``[0, d)``, labels ``"0" .. "d-1"``; item 0 is the
        most likely. ``frequencies`` are the realized (empirical) frequencies, the target
        a frequency oracle estimates.

    Examples
    --------
    >>> data = zipf(s=1.5, d=16, n=1000, rng=0)
    >>> data.domain_size, int(data.counts.sum())
    (16, 1000)
    """
    probs = zipf_probabilities(s, d)
    n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
    values = as_generator(rng).choice(d, size=n, p=probs)
    return Dataset(
        name="zipf",
        kind="categorical",
        values=values,
        labels=tuple(str(i) for i in range(d)),
        citation=(
            "T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for "
            "Frequency Estimation. USENIX Security 2017, section 6."
        ),
        description=f"{n} users with items drawn from Zipf(s={s:g}) over {d} items.",
        licence=_LICENCE,
        source=_SOURCE,
    )


def gaussian_items(
    mean: float = 500.0, std: float = 10.0, d: int = 1024, n: int = 100_000, *, rng: RNGLike = None
) -> Dataset:
    """Items from a rounded Gaussian, clipped to ``[0, d)`` (FO17 appendix A.2).

    Each user's item is ``round(X)`` with ``X ~ N(mean, std^2)``, clipped to ``0..d-1``.

    Examples
    --------
    >>> data = gaussian_items(d=1024, n=1000, rng=0)
    >>> 450 < float(data.values.mean()) < 550
    True
    """
    mean = check_real(mean, "mean")
    std = check_real(std, "std", low=0.0, low_inclusive=False)
    d = check_integer(d, "d", low=2, high=MAX_ENTRIES)
    n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
    x = as_generator(rng).normal(mean, std, size=n)
    values = np.clip(np.rint(x), 0, d - 1).astype(np.int64)
    return Dataset(
        name="gaussian_items",
        kind="categorical",
        values=values,
        labels=tuple(str(i) for i in range(d)),
        citation="FO17 (USENIX Security 2017), appendix A.2.",
        description=f"{n} users with items round(N({mean:g}, {std:g}^2)) clipped to [0, {d}).",
        licence=_LICENCE,
        source=_SOURCE,
    )


def uniform_items(d: int = 1024, n: int = 100_000, *, rng: RNGLike = None) -> Dataset:
    """Items drawn uniformly from ``0..d-1`` (the flat worst case for post-processing).

    Examples
    --------
    >>> uniform_items(d=4, n=10, rng=0).n
    10
    """
    d = check_integer(d, "d", low=1, high=MAX_ENTRIES)
    n = check_integer(n, "n", low=0, high=MAX_ENTRIES)
    values = as_generator(rng).integers(0, d, size=n)
    return Dataset(
        name="uniform_items",
        kind="categorical",
        values=values,
        labels=tuple(str(i) for i in range(d)),
        citation="",
        description=f"{n} users with items uniform over {d} items.",
        licence=_LICENCE,
        source=_SOURCE,
    )
