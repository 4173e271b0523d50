"""Which numerical-distribution method to run: advice from our own measurements.

Unless the data are known to be smooth or spiky (from public knowledge), the advice is
:class:`~ldpkit.numeric.AutoDistribution`, which decides from the reports themselves how
much to smooth (``benchmarks/auto_distribution.py`` measures it against the best of SW-EMS,
SW-EM, HH and the wavelet on every cell of the grid below). The rules for known smoothness
rest on the full WAV25 comparison, ``ldpkit reproduce wav25`` (Markdown table in
``docs/results/wav25/wav25.md``: five data sets, ten methods, eps 0.5..4, 30 runs per cell,
n from 26k to 330k), and on ``studies/wavelet_accuracy.py`` for synthetic data at n = 1e5 and
1e6. The numbers quoted in :func:`recommend` come from those two runs (seed 0).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._validation import check_epsilon, check_integer
from ..spec import Mechanism
from .auto import AutoDistribution
from .hierarchy import HierarchicalHistogram
from .square_wave import SquareWave
from .wavelet import HaarWavelet, default_max_level

__all__ = ["Recommendation", "recommend"]

#: From this epsilon on, HH beats the wavelet in KS on spiky data (see :func:`recommend`).
KS_HH_EPSILON = 2.0


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """A method choice with its parameters and the reason.

    Attributes
    ----------
    method : str
        Class name in :mod:`ldpkit.numeric`: "AutoDistribution" (the default),
        "SquareWave", "HaarWavelet" or "HierarchicalHistogram".
    params : dict
        Keyword arguments of the spec (epsilon included).
    estimate_params : dict
        Keyword arguments for ``spec.estimate(stats, ...)``.
    reason : str
        One sentence with the measured evidence.
    """

    method: str
    params: dict[str, Any]
    estimate_params: dict[str, Any]
    reason: str

    def build(self) -> Mechanism:
        """Return the recommended spec."""
        classes: dict[str, type[Mechanism]] = {
            "AutoDistribution": AutoDistribution,
            "SquareWave": SquareWave,
            "HaarWavelet": HaarWavelet,
            "HierarchicalHistogram": HierarchicalHistogram,
        }
        return classes[self.method](**self.params)


def recommend(
    epsilon: float,
    n: int,
    smooth: bool | None = None,
    *,
    metric: str = "w1",
    low: float = 0.0,
    high: float = 1.0,
) -> Recommendation:
    """Recommend a method for estimating a numerical distribution, from our measurements.

    Parameters
    ----------
    epsilon : float
        Privacy budget of each user's report.
    n : int
        Expected number of users (sets the wavelet's J).
    smooth : bool or None
        True if the distribution is known to be smooth (no point masses, no heaping);
        False if it has spikes (values heaped at round numbers, point masses, steps);
        None (default) if unknown: then :class:`AutoDistribution` is recommended, which
        adapts its smoothing to the reports. Decide it from public knowledge, not from the
        private data.
    metric : {"w1", "ks"}
        What matters most when ``smooth`` is given: Wasserstein-1 (average CDF error;
        range queries behaved the same way in every measurement) or KS (worst CDF error).
        AutoDistribution serves both.
    low, high : float
        The value domain, passed on to the spec.

    Returns
    -------
    Recommendation

    Notes
    -----
    **Evidence.** ``ldpkit reproduce wav25`` (``docs/results/wav25/wav25.md`` (regenerate with ``ldpkit reproduce wav25``); WAV25's metrics:
    W1 and KS on the 256-point grid, range-query MAE with alpha = 0.2 and 0.4; 30 runs per
    cell, eps = 0.5, 1, ..., 4) on smooth data (Beta(5, 2), n = 1e5; NYC flight departure
    times, n = 328,521) and spiky data (MLB salaries, n = 26,167, heaped on round amounts;
    weeks worked, n = 254,654, 47 % at 0 and 18.5 % at 52; CPSSW8 hourly earnings,
    n = 61,395, heaped), with ten methods: the Haar wavelet at WAV25's J and at J - 2,
    SW + EMS, SW + EM, binning (16, 64 bins), HH, DW, IIW (64, 256 bins). Checked at
    n = 1e5 and 1e6 on synthetic smooth, heaped and spiky data by
    ``studies/wavelet_accuracy.py`` (5 runs per cell). Below, "x" is a method's mean
    error over the best method's in a (data set, metric, eps) cell, worst case over the
    cells named.

    - **Smooth data**: SW + EMS was the best or within 1.13x of it in all 64 smooth cells
      (W1, KS, both range widths); within 1.51x on the synthetic data (at n = 1e6 and
      eps <= 1 plain EM or HH is a little better). The wavelet at WAV25's J lost every
      smooth cell, by 1.4-3.8x (W1 1.6-2.9x, KS 1.4-3.8x). -> ``SquareWave`` + EMS.
    - **Spiky data, W1** (and range queries): SW + EM, at most 1.39x (W1) and 1.40x
      (range) from the best in the 24 + 48 spiky cells, 1.67x at n = 1e6; SW + EMS was the
      best on the two heaped data sets but 2.0-3.5x off on the point masses of weeks
      worked; the wavelet at J - 2 was within 1.68x (W1) but 2.30x (range), at J within
      1.98x and 1.91x; HH within 2.21x. -> ``SquareWave`` + EM.
    - **Spiky data, KS**: eps < 2: the wavelet at J - 2, within 1.57x of the best (1.22x
      on the synthetic data), against 1.77x for the wavelet at J, 2.01x for HH and 2.53x
      for SW + EM. eps >= 2: HH, within 1.09x (1.20x on the synthetic data), against
      1.48x (1.78x) for the wavelet at J. Smoothing methods stall on point masses: SW + EMS was 11-25x off on
      weeks worked, SW + EM up to 9.5x at n = 1e6. -> ``HaarWavelet(max_level=J - 2)``
      below eps = 2 (:data:`KS_HH_EPSILON`), ``HierarchicalHistogram`` from there on.
    - **Unknown smoothness** (the default): :class:`AutoDistribution` (SW and HH reports,
      EM smoothing weighted by held-out likelihood). ``benchmarks/auto_distribution.py``
      (the five data sets above at full size, eps = 0.5, 1, ..., 4, 40 runs per cell, seed
      3; W1 and KS, 80 cells; ``docs/results/auto/auto_distribution.md``) against the best
      of SW + EMS, SW + EM, HH (monotone-CDF fit) and the wavelet at J - 2: the smallest
      geometric-mean ratio of the five (0.96x; SW + EMS 1.54x, SW + EM 1.34x, HH 1.37x, the
      wavelet 1.53x) and the smallest worst case (1.22x; SW + EMS 24x, SW + EM 2.51x, HH
      2.80x, the wavelet 3.99x); within 10 % of the best in 73 of the 80 cells, within
      1.5x in all. Its misses: eps 0.5 on Beta(5, 2) and salaries (1.13-1.22x: a quarter
      of the users send HH reports) and Beta(5, 2) KS at eps 2.5-3.5 (1.13-1.14x). On data
      no choice was tuned on (``benchmarks/auto_distribution.py --heldout``, test set: city
      latitudes, log city populations, flight distances and air times, ten point-mass
      mixtures; n = 1e5, 5 runs; ``docs/results/auto/heldout.md``): within 10 % in 82 of
      112 cells, worst 1.48x.
    - Fixed methods under unknown smoothness: the smallest worst case over all five data sets. W1: SW + EM
      (1.76x; 1.99x for range queries), against HH 2.21x, the wavelet 2.57x (J - 2) or
      2.88x (J), SW + EMS 3.13x. KS: HH (2.65x; 2.26x on the synthetic data), against
      SW + EM 2.55x here but 9.5x at n = 1e6, the wavelet 3.5-3.8x, SW + EMS 25x.
    - **J**: WAV25's ``J = ceil(log2(n)/2)`` is too fine: in the W1-vs-J sweep (J = 1..11,
      28 (data set, eps) cells, n = 1e4..1e6) the best J was below the rule's in 27 cells
      (by 4 levels at the median; 2-6 on smooth data, 2-8 on heaped data, 7-8 on weeks
      worked), the rule costing 1.00-1.85x the best J's W1 (median 1.38x); J - 2 beat the
      rule in 23 of 28 cells (by 8 % at the median). Lower J blurs point masses, which KS
      on a fine grid punishes, so the advice keeps J - 2 rather than the smooth data's
      best J. :class:`HaarWavelet` keeps the paper's rule as its default.
    - Never recommended: binning and DW/IIW on 64 bins (KS up to 81-101x off on weeks
      worked: a bin spreads the point masses over its width), IIW on 256 bins (W1 3.6-12x
      off on smooth data).

    None of our measurements reproduces WAV25's claim that the wavelet beats every
    competitor; it won 1 of 160 (data set, metric, eps) cells against the best competitor
    and tied 15 (``docs/results/wav25/wav25.md`` (regenerate with ``ldpkit reproduce wav25``), section "Verdict").

    Examples
    --------
    >>> recommend(1.0, 100_000).method
    'AutoDistribution'
    >>> spec = recommend(1.0, 100_000).build()
    >>> spec.buckets, spec.hh_share
    (1024, 0.25)
    >>> recommend(1.0, 100_000, smooth=True).method
    'SquareWave'
    >>> rec = recommend(1.0, 1_000_000, smooth=False, metric="ks")
    >>> rec.method, rec.params["max_level"]
    ('HaarWavelet', 8)
    >>> recommend(4.0, 1_000_000, smooth=False, metric="ks").method
    'HierarchicalHistogram'
    >>> recommend(1.0, 100_000, smooth=False).estimate_params
    {'method': 'em'}
    """
    epsilon = check_epsilon(epsilon)
    n = check_integer(n, "n", low=1)
    if smooth is not None and not isinstance(smooth, bool):
        raise TypeError(f"smooth must be True, False or None, got {smooth!r}")
    if metric not in ("w1", "ks"):
        raise ValueError(f"metric must be one of 'w1', 'ks', got {metric!r}")
    domain = {"low": low, "high": high}
    rec = _recommend(epsilon, n, smooth, metric, domain)
    rec.build()  # never recommend a spec that cannot be built (e.g. epsilon above its max)
    return rec


def _recommend(
    epsilon: float, n: int, smooth: bool | None, metric: str, domain: dict[str, Any]
) -> Recommendation:
    if smooth is None:
        return Recommendation(
            method="AutoDistribution",
            params={"epsilon": epsilon, **domain, "expected_n": n},
            estimate_params={},
            reason="unknown smoothness: AutoDistribution chooses its smoothing from the "
            "reports (held-out likelihood); over the WAV25 grid it had the smallest worst "
            "case (1.22x of the best method) and geometric-mean ratio (0.96x) among SW + "
            "EMS, SW + EM, HH and the wavelet",
        )
    if smooth is True:
        return Recommendation(
            method="SquareWave",
            params={"epsilon": epsilon, **domain, "buckets": 256},
            estimate_params={"method": "ems"},
            reason="smooth data: SW + EMS was the best or within 1.13x of the best in every "
            "smooth cell of the WAV25 comparison; the Haar wavelet lost them all by 1.4-3.8x",
        )
    if metric == "w1":
        return Recommendation(
            method="SquareWave",
            params={"epsilon": epsilon, **domain, "buckets": 1024},
            estimate_params={"method": "em"},
            reason="spiky data: SW + EM was within 1.39x of the best in W1 (1.67x at n = 1e6); "
            "SW + EMS smooths point masses away (3.1x)",
        )
    if epsilon < KS_HH_EPSILON:
        return Recommendation(
            method="HaarWavelet",
            params={"epsilon": epsilon, **domain, "max_level": max(0, default_max_level(n) - 2)},
            estimate_params={},
            reason="spiky data, KS, eps < 2: the Haar wavelet with J = ceil(log2(n)/2) - 2 was "
            "within 1.57x of the best (HH 2.01x, SW + EMS up to 19x)",
        )
    return Recommendation(
        method="HierarchicalHistogram",
        params={"epsilon": epsilon, **domain, "buckets": 1024, "branching": 4},
        estimate_params={"postprocess": "cdf"},
        reason="spiky data, KS, eps >= 2: HH was within 1.09x of the best (1.20x at n = 1e6); "
        "the wavelet 1.48x, SW + EMS up to 25x",
    )
