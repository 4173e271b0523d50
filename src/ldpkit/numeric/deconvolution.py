"""Wiener deconvolution of binned frequency-oracle reports (Fang et al., S&P 2023).

Values in [low, high] are binned into d equal bins and reported with a pure frequency
oracle (GRR or OUE). The expected support frequencies are the circular convolution
``y = h * f`` of the true bin frequencies f with the transfer vector
``h = (p*, q*, ..., q*)`` (because f sums to 1: ``q* + (p* - q*) f_i``), so the naive
unbiased estimate is an inverse filter that amplifies the sampling noise at every
frequency. A Wiener filter ``W = conj(H) P_f / (|H|^2 P_f + P_n)`` instead weighs each
Fourier coefficient by its estimated signal-to-noise ratio. WAV25 section 6 uses the two
variants, Direct Wiener (DW) and Improved Iterative Wiener (IIW), as competitors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._rng import RNGLike
from .._validation import check_integer, check_numeric_values, check_real, check_work
from ..frequency import GRR, OUE, PureFrequencyOracle
from ..spec import Mechanism, Reports, Stats, StatsField, report_count_arrays, with_report_count
from .distribution import Distribution, bucket_index, check_bounds

__all__ = ["WienerInfo", "wiener_deconvolve", "WienerDeconvolution", "noise_power"]


@dataclasses.dataclass(frozen=True)
class WienerInfo:
    """Diagnostics of one deconvolution.

    Attributes
    ----------
    method : str
        "direct" or "iterative".
    iterations : int
        Filter updates performed (1 for "direct").
    converged : bool
        For "iterative": True when the stopping rule fired before ``max_iter``.
    raw : ndarray
        The filtered frequencies before the projection onto the simplex.
    """

    method: str
    iterations: int
    converged: bool
    raw: np.ndarray


def noise_power(p: float, q: float, d: int, n: int) -> float:
    """Noise power of the observed support frequencies at every DFT frequency.

    ``d q*(1-q*)/n + (p*-q*)(1-p*-q*)/n``: the summed variances of the d observed support
    frequencies ``C_i / n`` (FO17 eq. 2 summed over i, using ``sum f = 1``), which is the
    expected ``|N(w)|^2`` of the (unnormalized) DFT of independent noise, the same at every
    frequency (Fang et al. section on the noise power spectrum; METHODS.md section 4).
    """
    return (d * q * (1.0 - q) + (p - q) * (1.0 - p - q)) / n


def wiener_deconvolve(
    observed: Any,
    p: float,
    q: float,
    noise: float,
    *,
    method: str = "iterative",
    max_iter: int = 100,
    tol: float = 1e-6,
) -> tuple[np.ndarray, WienerInfo]:
    """Deconvolve observed support frequencies ``y ~ h * f`` with a Wiener filter.

    Parameters
    ----------
    observed : array, shape (d,)
        Observed support frequencies ``C_i / n``.
    p, q : float
        The oracle's p* and q* (``p > q``).
    noise : float
        Noise power P_n (:func:`noise_power`); 0 gives the exact inverse filter.
    method : {"iterative", "direct"}
        "direct" (DW): ``P_f = |F~|^2`` with ``F~ = Y / H`` the naive (inverse-filtered)
        estimate. "iterative" (IIW): starts as DW, then repeatedly re-estimates
        ``P_f = |F_t|^2 + P_n P_f' / (|H|^2 P_f' + P_n)`` from the last output F_t and the
        previous P_f' (the second term is the posterior variance of F_t, Hillery and Chin's
        correction, which Fang et al.'s "improved" iteration adds; without it the
        iteration collapses every coefficient to 0). Its fixed point is the Wiener filter
        with the noise-subtracted power ``P_f = |F~|^2 - P_n / |H|^2`` where that is
        positive, and 0 elsewhere.
    max_iter : int
        IIW: maximum number of filter updates (default 100).
    tol : float
        IIW: stop once ``||f_t - f_(t-1)||_2 <= tol ||f_t||_2`` (default 1e-6).

    Returns
    -------
    f : ndarray, shape (d,)
        The filtered frequencies, with the zero frequency fixed to 1 (the total is known
        to be 1; filtering it would only shrink it), so ``f`` sums to 1 but may hold small
        negative values.
    info : WienerInfo

    Notes
    -----
    Everything is a handful of length-d FFTs (numpy.fft), O(d log d) per iteration.
    """
    y = np.asarray(observed, dtype=np.float64)
    if y.ndim != 1 or y.size < 2:
        raise ValueError(
            f"observed must be a 1-D array of at least 2 frequencies, got shape {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("observed must be finite")
    p = check_real(p, "p", low=0.0, high=1.0)
    q = check_real(q, "q", low=0.0, high=1.0)
    if not p > q:
        raise ValueError(f"p must be > q ({q!r}), got {p!r}")
    noise = check_real(noise, "noise", low=0.0)
    if method not in ("iterative", "direct"):
        raise ValueError(f"method must be one of 'iterative', 'direct', got {method!r}")
    max_iter = check_integer(max_iter, "max_iter", low=1)
    tol = check_real(tol, "tol", low=0.0)
    d = y.size
    h = np.full(d, q)
    h[0] = p
    spectrum_h = np.fft.rfft(h)  # H(0) = p + (d - 1) q, H(w != 0) = p - q (real)
    power_h = np.abs(spectrum_h) ** 2
    spectrum_y = np.fft.rfft(y)
    naive = spectrum_y / spectrum_h

    def apply(power_f: np.ndarray) -> np.ndarray:
        denom = power_h * power_f + noise
        gain = np.divide(
            np.conj(spectrum_h) * power_f, denom, out=np.zeros_like(spectrum_h), where=denom > 0
        )
        spectrum = gain * spectrum_y
        # The total mass is known exactly: keep the zero frequency at sum(f) = 1.
        spectrum[0] = 1.0
        return spectrum

    power = np.abs(naive) ** 2
    if noise == 0.0:
        power = np.ones_like(power)  # any positive power: W = 1/H, the exact inverse
    spectrum = apply(power)
    f = np.fft.irfft(spectrum, n=d)
    iterations, converged = 1, method == "direct"
    if method == "iterative":
        while iterations < max_iter:
            denom = power_h * power + noise
            correction = np.divide(noise * power, denom, out=np.zeros_like(power), where=denom > 0)
            power = np.abs(spectrum) ** 2 + correction
            spectrum = apply(power)
            f_new = np.fft.irfft(spectrum, n=d)
            iterations += 1
            change = float(np.linalg.norm(f_new - f))
            f = f_new
            if change <= tol * float(np.linalg.norm(f)):
                converged = True
                break
    f.flags.writeable = False
    return f, WienerInfo(method=method, iterations=iterations, converged=converged, raw=f)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WienerDeconvolution(Mechanism):
    """Binning + GRR/OUE + Wiener deconvolution (Fang et al. 2023; WAV25's "convolution").

    Each value in [low, high] is mapped to one of ``buckets`` equal buckets and reported with
    a pure frequency oracle; the server deconvolves the support frequencies with a Direct
    or Improved Iterative Wiener filter (:func:`wiener_deconvolve`) and projects the result
    onto the probability simplex.

    Parameters
    ----------
    epsilon : float
        Privacy budget, in [1e-6, ``max_epsilon``] (per class: docs/design/THREAT_MODEL.md).
    buckets : int
        Number d of equal buckets (>= 2; default 64, our choice: WAV25 runs its binning
        competitors at d = 8..64).
    low, high : float
        The value domain (default [0, 1]).
    oracle : {"auto", "grr", "oue"}
        The frequency oracle; "auto" (default) takes GRR when ``d < 3 e^eps + 2`` and OUE
        otherwise (FO17 section 5, as WAV25 section 6.1 does).

    Notes
    -----
    eps-LDP: exactly that of the oracle (the binning is deterministic and the rest is
    post-processing). ``reports`` and ``Stats.counts`` are those of the oracle
    (:attr:`oracle_spec`), under this spec's fingerprint.

    Estimate: the zero frequency is fixed to 1 and the filtered vector is returned as is
    (as the authors' code does), a Distribution that may hold negative masses (mass uniform
    inside each bucket). ``estimate(stats, postprocess="norm_sub")`` projects it onto the
    simplex (Norm-Sub, :func:`ldpkit.consistency.simplex_projection`; our choice in the
    WAV25 reproduction).

    References
    ----------
    H. Fang, L. Chen, Y. Liu, Y. Gao. Locally Differentially Private Frequency Estimation
    Based on Convolution Framework. IEEE S&P 2023. WAV25 section 6.1 (competitors).
    A. D. Hillery, R. T. Chin. Iterative Wiener filters for image restoration. IEEE Trans.
    Signal Processing 39(8), 1991 (the iteration's correction term).

    Examples
    --------
    >>> wd = WienerDeconvolution(epsilon=1.0, buckets=32)
    >>> wd.oracle_spec.name
    'OUE'
    >>> values = np.random.default_rng(0).beta(5, 2, size=50_000)
    >>> dist = wd.run(values, rng=0)
    >>> dist.buckets, bool(abs(dist.mean() - values.mean()) < 0.02)
    (32, True)
    """

    buckets: int = 64
    low: float = 0.0
    high: float = 1.0
    oracle: str = "auto"

    def _validate(self) -> None:
        self._set("buckets", check_integer(self.buckets, "buckets", low=2))
        lo, hi = check_bounds(self.low, self.high)
        self._set("low", lo)
        self._set("high", hi)
        if self.oracle not in ("auto", "grr", "oue"):
            raise ValueError(f"oracle must be one of 'auto', 'grr', 'oue', got {self.oracle!r}")

    @property
    def oracle_spec(self) -> PureFrequencyOracle:
        """The GRR or OUE spec over the buckets."""
        name = self.oracle
        if name == "auto":
            name = "grr" if self.buckets < 3.0 * math.exp(min(self.epsilon, 700.0)) + 2.0 else "oue"
        cls = GRR if name == "grr" else OUE
        return cls(epsilon=self.epsilon, domain_size=self.buckets)

    def privacy_loss(self) -> float:
        """Return the oracle's loss: the bin is a function of the value, reported once."""
        return self.oracle_spec.privacy_loss()

    def noise_power(self, n: int) -> float:
        """P_n for n reports (:func:`noise_power` with the oracle's p*, q*)."""
        o = self.oracle_spec
        return noise_power(o.p, o.q, self.buckets, check_integer(n, "n", low=1))

    # -- client ------------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        """Return the validated values in [low, high]; raise naming ``values``."""
        return check_numeric_values(values, self.low, self.high, "values")

    def bucket_index(self, values: Any) -> np.ndarray:
        """Bucket of each value (``high`` itself falls in the last bucket)."""
        return bucket_index(self.check_values(values), self.low, self.high, self.buckets)

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """Bucket each value and report the bucket with the oracle (its report arrays)."""
        inner = self.oracle_spec.randomize(self.bucket_index(values), rng=rng)
        return Reports(self, **inner.arrays)

    # -- server ------------------------------------------------------------------------------
    def stats_schema(self) -> Mapping[str, StatsField] | None:
        """Return the oracle's Stats fields.

        Support ``counts`` of the buckets, plus the reports' ``count`` (= n) when the counts
        do not sum to n (OUE).
        """
        inner = self.oracle_spec.stats_schema()
        return None if inner is None else with_report_count(inner)

    def empty_stats(self) -> Stats:
        """Return the Stats of no report (zero arrays): the neutral element of merge."""
        zeros = np.zeros(self.buckets, dtype=np.int64)
        return Stats(self, 0, counts=zeros, **report_count_arrays(self, 0))

    def aggregate(self, reports: Reports) -> Stats:
        """Support counts of the buckets (``Stats.counts``), validated by the oracle."""
        reports = self.check_reports(reports)
        oracle = self.oracle_spec
        counts = oracle.support_counts(Reports(oracle, **reports.arrays))
        n = len(reports)
        counts = np.asarray(counts, dtype=np.int64)
        return Stats(self, n, counts=counts, **report_count_arrays(self, n))

    def naive_estimate(self, stats: Stats) -> np.ndarray:
        """Return the unbiased bucket frequencies ``(C_i / n - q*) / (p* - q*)`` (no filtering)."""
        stats = self.check_stats(stats, nonempty=True)
        o = self.oracle_spec
        return np.asarray(o.estimate(Stats(o, stats.n, counts=stats.counts)).frequencies)

    def estimate(
        self,
        stats: Stats,
        method: str = "iterative",
        *,
        max_iter: int = 100,
        tol: float = 1e-6,
        return_info: bool = False,
        postprocess: str | None = None,
    ) -> Any:
        """Deconvolve: a Distribution on ``buckets`` buckets.

        Parameters
        ----------
        stats : Stats
            Aggregated (and possibly merged) reports of this spec.
        method : {"iterative", "direct"}
            IIW (default) or DW (:func:`wiener_deconvolve`).
        max_iter, tol : int, float
            IIW stopping rule (at most ``max_iter`` updates; relative L2 change <= tol).
            ``max_iter x buckets x log2(buckets)`` must stay within
            :data:`ldpkit._validation.WORK_BUDGET` (2^30; e.g. 2^20 buckets x 100 updates is
            refused, ValueError with the estimate): use fewer updates or ``"direct"``.
        return_info : bool
            Also return the :class:`WienerInfo`.
        postprocess : {None, "norm_sub", "norm_mul", "cdf"}
            None (default): the filtered vector itself (signed). Otherwise
            :meth:`Distribution.postprocess` (``"norm_sub"``: the simplex projection).
        """
        stats = self.check_stats(stats, nonempty=True)
        if method == "iterative":
            # each IIW update is a few length-d FFTs: refuse what would run for minutes
            # (2^20 buckets x 100 updates: ~10 s of CPU); method="direct" is one update
            it = check_integer(max_iter, "max_iter", low=1)
            d = self.buckets
            check_work(
                float(it) * d * max(1.0, math.log2(d)),
                f"buckets={d}, max_iter={it}",
                "WienerDeconvolution.estimate (method='iterative')",
            )
        o = self.oracle_spec
        f, info = wiener_deconvolve(
            stats.counts / stats.n,
            o.p,
            o.q,
            self.noise_power(stats.n),
            method=method,
            max_iter=max_iter,
            tol=tol,
        )
        dist = Distribution.from_estimate(f, self.low, self.high, n=stats.n, spec=self)
        if postprocess is not None:
            dist = dist.postprocess(postprocess)
        return (dist, info) if return_info else dist
