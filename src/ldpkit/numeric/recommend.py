"""Which numerical-distribution method to run: advice from our own measurements (provisional).

The advice will be revised once the full WAV25 comparison (``ldpkit reproduce wav25``,
all competitors, real data) has run; today it rests on ``benchmarks/wavelet_accuracy.py``
(synthetic smooth, heaped and spiky data; n = 1e5 and 1e6; eps 0.5..4; 10 runs each).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._validation import check_epsilon, check_integer
from ..spec import Mechanism
from .square_wave import SquareWave
from .wavelet import HaarWavelet, default_max_level

__all__ = ["Recommendation", "recommend"]


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """A method choice with its parameters and the reason.

    Attributes
    ----------
    method : str
        Class name in :mod:`ldpkit.numeric` ("SquareWave" or "HaarWavelet").
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
        """The recommended spec."""
        cls = {"SquareWave": SquareWave, "HaarWavelet": HaarWavelet}[self.method]
        return cls(**self.params)


def recommend(
    epsilon: float,
    n: int,
    smooth: bool | None = None,
    *,
    metric: str = "w1",
    low: float = 0.0,
    high: float = 1.0,
) -> Recommendation:
    """Recommend a method for estimating a numerical distribution (provisional).

    Parameters
    ----------
    epsilon : float
        Privacy budget of each user's report.
    n : int
        Expected number of users.
    smooth : bool or None
        True if the distribution is known to be smooth (no point masses, no heaping);
        False if it has spikes (values heaped at round numbers, point masses, steps);
        None if unknown. Decide it from public knowledge, not from the private data.
    metric : {"w1", "ks"}
        What matters most: Wasserstein-1 (average CDF error, range queries) or KS (worst
        CDF error).
    low, high : float
        The value domain, passed on to the spec.

    Returns
    -------
    Recommendation

    Notes
    -----
    Evidence (``benchmarks/wavelet_accuracy.py``, WAV25's metrics on a 256-point grid,
    mean of 10 runs; "x" = how many times larger the loser's error is):

    - **Smooth data** (Beta(5, 2)): Square Wave + EMS (256 buckets) beats the wavelet at
      every n and eps measured: W1 1.1-2.6x, KS 1.1-3.1x (n = 1e5: 2.0-2.2x in W1;
      n = 1e6: 1.1-2.6x, the gap growing with eps). Recommendation: SquareWave + EMS.
    - **Spiky data** (half the mass on 11 round values): the wavelet wins KS by 1.2-4.2x
      at n = 1e5 and 2.3-13.5x at n = 1e6 (SW-EMS stalls at KS 0.05-0.08 because EMS
      smooths the spikes away), and W1 by 1.1-2.8x except n = 1e5, eps = 0.5 (0.9x).
      With mild heaping (70% of the values rounded to 1/150 or 1/30 of the range) the
      wavelet wins at n = 1e6 and eps >= 1 (W1 1.2-2.2x, KS 1.3-3.6x) and loses in W1
      elsewhere (up to 1.7x; KS mixed). Recommendation: HaarWavelet.
    - **J**: WAV25's ``J = ceil(log2(n)/2)`` is too fine at these n: ``J - 2`` had lower
      W1 in 23 of 24 (data, n, eps) cells (by 1-17%, median ~8%) and lower KS in 20;
      a sweep over J (3 runs per cell) put the best J at 3-5 on smooth data and 7-8 on
      spiky data. Recommendation: ``max_level = J - 2``.
    - **Unknown smoothness**: with ``metric="ks"`` the wavelet, whose worst measured loss
      (3.1x, smooth data) is far below SW-EMS's (13.5x, spiky data). With ``metric="w1"``
      the losses are comparable (2.6x vs 2.8x): the wavelet when n >= 5e5 and eps >= 1
      (where it won or lost by <= 2.6x), else SW-EMS (which won every smooth cell and lost
      spiky cells by <= 1.3x at n = 1e5).
    - Wiener deconvolution (IIW, 64 bins) was never the best in these cells; it is not
      recommended.

    Examples
    --------
    >>> rec = recommend(1.0, 1_000_000, smooth=False)
    >>> rec.method, rec.params["max_level"]
    ('HaarWavelet', 8)
    >>> recommend(1.0, 100_000, smooth=True).method
    'SquareWave'
    """
    epsilon = check_epsilon(epsilon)
    n = check_integer(n, "n", low=1)
    if smooth is not None and not isinstance(smooth, bool):
        raise TypeError(f"smooth must be True, False or None, got {smooth!r}")
    if metric not in ("w1", "ks"):
        raise ValueError(f"metric must be one of 'w1', 'ks', got {metric!r}")
    wavelet = Recommendation(
        method="HaarWavelet",
        params={"epsilon": epsilon, "low": low, "high": high,
                "max_level": max(0, default_max_level(n) - 2)},
        estimate_params={},
        reason="",
    )
    square_wave = Recommendation(
        method="SquareWave",
        params={"epsilon": epsilon, "low": low, "high": high,
                "buckets": 256 if smooth else 1024},
        estimate_params={"method": "ems"},
        reason="",
    )
    if smooth is True:
        return dataclasses.replace(
            square_wave,
            reason="smooth data: SW + EMS beat the Haar wavelet in W1 (1.1-2.6x) and KS "
            "(1.1-3.1x) at every n and eps measured",
        )
    if smooth is False:
        return dataclasses.replace(
            wavelet,
            reason="spiky data: the Haar wavelet keeps point masses that EMS smooths away "
            "(KS 1.2-13.5x lower than SW + EMS on strongly spiky data); J = ceil(log2(n)/2) - 2",
        )
    if metric == "ks" or (n >= 500_000 and epsilon >= 1.0):
        return dataclasses.replace(
            wavelet,
            reason="unknown smoothness: the wavelet's worst measured loss (3.1x KS, 2.6x W1 "
            "on smooth data) is smaller than or comparable to SW + EMS's (13.5x KS, 2.8x W1 "
            "on spiky data) at this n and eps",
        )
    return dataclasses.replace(
        square_wave,
        reason="unknown smoothness, small n or eps: SW + EMS won every smooth cell and lost "
        "spiky ones by at most 1.3x in W1 at n = 1e5",
    )
