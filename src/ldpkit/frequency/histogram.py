"""Histogram encoding: summation (SHE) and thresholding (THE), FO17 section 4.2.

The user's item becomes a one-hot vector of d reals and every coordinate gets independent
Laplace noise of scale 2/epsilon (two inputs' vectors are at L1 distance 2). SHE sends the
noisy vector and the server sums it; THE keeps only the bits ``B_v > theta``, which makes
the protocol pure and, for a well chosen theta, more accurate than SHE.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar

import numpy as np

from .._rng import RNGLike, as_generator
from .._validation import check_integer, check_real
from ..estimate import FrequencyEstimate
from ..spec import Reports, Stats
from ._base import FrequencyOracle
from .unary import UnaryEncoding

__all__ = ["SHE", "THE", "the_probabilities", "the_variance_star", "optimal_cutoff"]

# SHE reports are rounded to multiples of 2^-GRID_BITS, so that the server can sum them
# exactly in int64 fixed point (merges are then exactly associative and commutative).
_GRID_BITS = 20
_GRID = float(2**_GRID_BITS)
# |report coordinate| is clipped here: then value * 2^20 <= 2^51 is an exact integer.
_CLIP = float(2**31)
# Rows per aggregation chunk times d stays near this many elements (bounded temporaries).
_CHUNK_ELEMENTS = 1 << 20
_INT64_SAFE = float(2**62)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SHE(FrequencyOracle):
    """Summation with histogram encoding: one-hot vector plus Laplace(2/epsilon) noise.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    domain_size : int
        Number of items d (>= 2).

    Notes
    -----
    Two inputs' one-hot vectors are at L1 distance 2, so Laplace noise of scale
    ``2 / eps`` on every coordinate gives eps-LDP (FO17 Theorem 4); ``privacy_loss()``
    returns ``2 / noise_scale``. The report (``reports.values``, float64, shape (n, d))
    is summed by the server; the estimate is the mean, unbiased with
    ``Var = (8 / eps^2 + f (1 - f)) / n`` (FO17 Theorem 5; ``n Var* = 8 / eps^2``). SHE is
    not pure and is dominated by THE and OUE (FO17 section 5); it is here as a baseline.

    Each coordinate is clipped to +-2^31 and rounded to a multiple of 2^-20, both
    post-processing. The rounding lets the server sum reports exactly in int64 fixed
    point (``stats.sums`` counts units of 2^-20), so merging statistics is exactly
    associative; it adds a variance of about 2^-40 / 12 per coordinate, negligible
    (< 1e-13) and left out of ``variance``. The clipping matters only when the noise
    scale approaches 2^31 (epsilon below ~1e-8).

    Floating-point side channel: the Laplace noise comes from numpy's floating-point
    sampler, and Mironov (2012) showed that the low-order bits of ``x + Lap`` computed in
    floating point can reveal x, so textbook floating-point Laplace is not exactly
    eps-DP. Rounding to the coarse 2^-20 grid discards those low-order bits, which defeats
    that attack in practice, but we do not claim a proof (Mironov's snapping mechanism
    rounds to a grid as coarse as the noise scale, with a slightly larger epsilon). For
    deployments prefer THE or OUE: their reports are exact Bernoulli bits from integer
    comparisons, with no floating-point noise at all.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.2 (SHE), Theorems 4-5.
    I. Mironov. On Significance of the Least Significant Bits for Differential Privacy.
    CCS 2012.

    Examples
    --------
    >>> she = SHE(epsilon=2.0, domain_size=4)
    >>> reports = she.randomize([0, 1, 1, 3], rng=0)
    >>> reports.values.shape, reports.values.dtype
    ((4, 4), dtype('float64'))
    >>> she.noise_scale, she.privacy_loss()
    (1.0, 2.0)
    """

    @property
    def noise_scale(self) -> float:
        """Scale b of the Laplace noise on each coordinate: ``2 / epsilon``."""
        return 2.0 / self.epsilon

    def privacy_loss(self) -> float:
        """``L1 sensitivity / noise_scale`` with L1 sensitivity 2 (real-arithmetic loss)."""
        return 2.0 / self.noise_scale

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Noisy one-hot vectors; ``reports.values`` is float64 of shape (n, d)."""
        v = self.check_values(values)
        gen = as_generator(rng)
        noisy = gen.laplace(0.0, self.noise_scale, size=(v.shape[0], self.domain_size))
        noisy[np.arange(v.shape[0]), v] += 1.0
        np.clip(noisy, -_CLIP, _CLIP, out=noisy)
        noisy *= _GRID  # exact (power of two); rint then rounds to the 2^-20 grid
        np.rint(noisy, out=noisy)
        noisy /= _GRID
        return Reports(self, values=noisy)

    def empty_stats(self) -> Stats:
        return Stats(self, 0, sums=np.zeros(self.domain_size, dtype=np.int64))

    def aggregate(self, reports: Reports) -> Stats:
        """Per-coordinate sums, exact, in units of 2^-20 (``stats.sums``, int64)."""
        reports = self.check_reports(reports)
        x = reports.values
        d = self.domain_size
        if x.dtype != np.float64 or x.ndim != 2 or x.shape[1] != d:
            raise ValueError(
                f"reports.values must be a float64 array of shape (n, {d}), "
                f"got dtype {x.dtype} and shape {x.shape}"
            )
        sums = np.zeros(d, dtype=np.int64)
        bound = 0.0  # running bound on |sums| in units, to rule out int64 overflow
        step = max(1, _CHUNK_ELEMENTS // d)
        for start in range(0, x.shape[0], step):
            units = x[start : start + step] * _GRID
            if not np.all(np.abs(units) <= _CLIP * _GRID) or not np.array_equal(
                units, np.rint(units)
            ):
                raise ValueError(
                    "reports.values must be finite multiples of 2^-20 within +-2^31 "
                    "(as SHE.randomize makes them)"
                )
            bound += float(np.abs(units).max(initial=0.0)) * units.shape[0]
            if bound > _INT64_SAFE:
                raise ValueError(
                    "reports must be aggregated in smaller batches: their sums could "
                    "overflow the int64 fixed-point accumulator"
                )
            sums += units.astype(np.int64).sum(axis=0)
        return Stats(self, x.shape[0], sums=sums)

    def estimate(self, stats: Stats) -> FrequencyEstimate:
        """Mean noisy count per item: unbiased (FO17 Theorem 5)."""
        stats = self.check_stats(stats, nonempty=True)
        freq = stats.sums / _GRID / stats.n
        var = self.variance(stats.n, np.clip(freq, 0.0, 1.0))
        return FrequencyEstimate(freq, var, stats.n, spec=self)

    def variance(self, n: int, f: Any = None) -> Any:
        """``(2 b^2 + f (1 - f)) / n`` with b = 2/eps, i.e. ``(8/eps^2 + f(1-f)) / n``.

        With ``f=None`` only the noise term (FO17's Var*) is returned.
        """
        n = check_integer(n, "n", low=1)
        base = 2.0 * self.noise_scale**2
        if f is not None:
            f = np.asarray(f, dtype=np.float64)
            base = base + f * (1.0 - f)
        return base / n


def the_probabilities(epsilon: float, cutoff: float) -> tuple[float, float]:
    """THE's ``(p*, q*) = (P[1 + Lap > theta], P[Lap > theta])`` for 0 <= theta <= 1.

    With Lap of scale 2/eps: ``p* = 1 - e^(eps (theta - 1) / 2) / 2`` and
    ``q* = e^(-eps theta / 2) / 2`` (FO17 section 4.2).
    """
    p = 1.0 - 0.5 * math.exp(0.5 * epsilon * (cutoff - 1.0))
    q = 0.5 * math.exp(-0.5 * epsilon * cutoff)
    return p, q


def the_variance_star(epsilon: float, cutoff: float) -> float:
    """THE's per-user ``n Var* = q*(1 - q*) / (p* - q*)^2`` at nominal p*, q*.

    Equal to ``(2 e^(eps theta/2) - 1) / (1 + e^(eps (theta - 1/2)) - 2 e^(eps theta/2))^2``
    (FO17 section 4.2).
    """
    p, q = the_probabilities(epsilon, cutoff)
    return q * (1.0 - q) / (p - q) ** 2


@functools.lru_cache(maxsize=256)
def optimal_cutoff(epsilon: float) -> float:
    """The theta in (1/2, 1) minimizing THE's Var* at this epsilon (bounded Brent search).

    FO17 section 4.2 shows numerically that the optimum lies in (1/2, 1) and tends to 1
    as epsilon grows.
    """
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda t: the_variance_star(epsilon, t),
        bounds=(0.5, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(res.x)


@dataclasses.dataclass(frozen=True, kw_only=True)
class THE(UnaryEncoding):
    """Thresholding with histogram encoding: support ``{v : B_v > theta}``.

    Parameters
    ----------
    epsilon : float
        Privacy budget of the underlying histogram encoding (> 0).
    domain_size : int
        Number of items d (>= 2).
    cutoff : float or None
        FO17's threshold theta in [0, 1] (named ``cutoff`` in ldpkit, where ``threshold``
        is the clipping threshold of a stream release). None (default) picks the theta in (1/2, 1) that minimizes the
        variance (:func:`optimal_cutoff`); FO17 Table 2 uses theta = 1.

    Notes
    -----
    The client adds Laplace(2/eps) noise to its one-hot vector (as SHE) and thresholds it
    on the device, which is post-processing. The reported bits are then independent, bit v
    being 1 with ``p* = P[1 + Lap > theta]`` and the others with ``q* = P[Lap > theta]``,
    so THE is a pure protocol and ``reports.bits`` is bit-packed exactly like OUE's. We
    sample those Bernoulli bits directly with the exact 32-bit-threshold kernel of
    :class:`UnaryEncoding` (equal in law, faster, and free of floating-point noise);
    ``p`` and ``q`` are the realized probabilities (p* rounded down, q* up, to multiples of
    2^-64), ``nominal_p``/``nominal_q`` the exact ones.

    ``n Var* = q*(1-q*)/(p*-q*)^2`` (FO17 section 4.2). The report's true privacy loss,
    ``log(p*(1 - q*) / (q*(1 - p*)))``, is *strictly below* epsilon: the noise protects
    the whole real vector, and the threshold discards part of it. ``privacy_loss()``
    returns that honest value (``exact_epsilon`` is False); to spend exactly epsilon on
    bits, use OUE, which is also more accurate.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha. Locally Differentially Private Protocols for
    Frequency Estimation. USENIX Security 2017, section 4.2 (THE).

    Examples
    --------
    >>> the = THE(epsilon=1.0, domain_size=16)
    >>> 0.5 < the.effective_cutoff < 1.0
    True
    >>> the.privacy_loss() < 1.0
    True
    >>> THE(epsilon=1.0, domain_size=16, cutoff=1.0).randomize([2, 7], rng=0).bits.shape
    (2, 2)
    """

    cutoff: float | None = None
    exact_epsilon: ClassVar[bool] = False

    def _validate(self) -> None:
        if self.cutoff is not None:
            self._set("cutoff", check_real(self.cutoff, "cutoff", low=0.0, high=1.0))
        super()._validate()

    @property
    def effective_cutoff(self) -> float:
        """theta actually used: ``cutoff``, or the variance-optimal one when None."""
        if self.cutoff is None:
            return optimal_cutoff(self.epsilon)
        return self.cutoff

    @property
    def noise_scale(self) -> float:
        """Scale of the Laplace noise the thresholded vector carries: ``2 / epsilon``."""
        return 2.0 / self.epsilon

    @property
    def nominal_p(self) -> float:
        return the_probabilities(self.epsilon, self.effective_cutoff)[0]

    @property
    def nominal_q(self) -> float:
        return the_probabilities(self.epsilon, self.effective_cutoff)[1]
