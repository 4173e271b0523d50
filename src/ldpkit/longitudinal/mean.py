"""1BitMean with alpha-point rounding and memoization (Ding, Kulkarni, Yekhanin 2017, §4).

1BitMean sends one bit, 1 with probability ``1/(e^eps + 1) + x (e^eps - 1)/(e^eps + 1)`` for x
in [0, 1]: the law of stochastic rounding (:class:`ldpkit.numeric.StochasticRounding`, whose
exact integer grid it reuses). For repeated collection, Ding et al. round the value to one of
``points + 1`` grid points with a per-device offset alpha drawn once (alpha-point rounding:
``k = floor(x s) + [frac(x s) > alpha]``, unbiased over alpha) and memoize the bit per grid
point, so a device reveals at most ``points + 1`` bits however long it reports, and a value
that moves inside one rounding cell costs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Integer
from .._exact import round_to_grid
from .._rng import RNGLike, as_generator, independent_streams
from .._validation import check_integer
from ..numeric.mean import SR_INPUT_STEPS, StochasticRounding, _report_tables
from ..spec import Reports

__all__ = ["OneBitMean"]

_ALPHA_SCALE = 1 << 32


@dataclasses.dataclass(frozen=True, kw_only=True)
class OneBitMean(StochasticRounding):
    """1BitMean (the SR law, one bit per report) with alpha-point rounding.

    Values are rounded to ``points + 1`` grid points, memoized per grid point by
    :class:`ldpkit.Device`.

    Parameters
    ----------
    epsilon : float
        Budget of one report (and of all memoized reports of one grid point).
    low, high : float
        The value range.
    points : int
        s, the number of rounding cells (a power of two in ``[1, 2^16]``: the grid points
        ``k / s`` are then points of SR's exact input grid); default 64.

    Notes
    -----
    Fresh reports (``randomize``): the value is rounded to the s-grid by unbiased randomized
    rounding (a fresh alpha), then reported by SR: unbiased, per-user variance ``C'^2 - t^2``
    on the [-1, 1] scale as SR's (y^2 = C'^2 always). Memoized (Device): alpha is drawn once
    per device, so the rounded point, hence the memo key, changes only when the value leaves
    its rounding cell; ``longitudinal_privacy_loss(k) = min(k, s + 1) epsilon``.

    References
    ----------
    B. Ding, J. Kulkarni, S. Yekhanin. Collecting Telemetry Data Privately. NeurIPS 2017,
    sections 2.1 (1BitMean) and 4 (alpha-point rounding, memoization).

    Examples
    --------
    >>> spec = OneBitMean(epsilon=1.0, low=0.0, high=100.0, points=16)
    >>> r = spec.randomize([0.0, 37.5, 100.0], rng=0)
    >>> len(r), round(spec.longitudinal_privacy_loss(1000), 9)
    (3, 17.0)
    """

    points: int = 64
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "points": [Integer(1, SR_INPUT_STEPS, power_of_two=True)]
    }

    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """Return ``min(distinct_values, points + 1) x privacy_loss()`` (one bit per grid point)."""
        k = check_integer(distinct_values, "distinct_values", low=1)
        return min(k, self.points + 1) * self.privacy_loss()

    def change_privacy_loss(self) -> float:
        """Return what a move to a new grid point costs: one report's loss."""
        return self.privacy_loss()

    # -- rounds (ldpkit.Device reads these) ---------------------------------------------------
    def _unit(self, values: np.ndarray) -> np.ndarray:
        return (self._to_unit(np.asarray(values, dtype=np.float64)) + 1.0) / 2.0  # in [0, 1]

    def _device_state(self, gen: np.random.Generator) -> np.ndarray:
        """Return the device's alpha, an integer in ``[0, 2^32)`` (alpha = state / 2^32)."""
        return gen.integers(0, _ALPHA_SCALE, size=1, dtype=np.int64)

    def _device_state_from_words(self, words: Any) -> np.ndarray:
        """Return the device's alpha from one 64-bit word: its top 32 bits.

        The words are :class:`ldpkit.device.DerivedWords` (the JS client's derivation).
        """
        return np.asarray([words.u64() >> 32], dtype=np.int64)

    def _permanent_from_words(self, key: int, words: Any, state: np.ndarray) -> np.ndarray:
        """Return the memoized cell (0: -C', 1: +C') of grid point ``key`` from 64-bit words.

        SR's exact bit as :meth:`_permanent_from_keys`, with ``U = words.below(T)`` (the JS
        client's order).
        """
        grid = self._grid
        big = int(key) * (SR_INPUT_STEPS // self.points)
        threshold = int(grid.w_low) * (grid.steps - big) + int(grid.w_high) * big
        return np.asarray([int(words.below(int(grid.total)) < threshold)], dtype=np.int64)

    def _memo_keys(self, values: np.ndarray, state: np.ndarray | None) -> np.ndarray:
        """Alpha-point rounding: ``floor(x s) + [frac(x s) > alpha]``."""
        assert state is not None
        scaled = self._unit(values) * self.points
        low = np.floor(scaled)
        up = (scaled - low) * _ALPHA_SCALE > float(state[0])
        return np.minimum(low.astype(np.int64) + up, self.points)

    def _permanent_from_keys(
        self, keys: np.ndarray, gen: np.random.Generator, state: np.ndarray | None
    ) -> np.ndarray:
        """SR's exact bit at grid point ``k / s`` (SR input ``k 2^16 / s``): report cells."""
        grid = self._grid
        big = np.asarray(keys, dtype=np.int64) * (SR_INPUT_STEPS // self.points)
        threshold = grid.w_low * (grid.steps - big) + grid.w_high * big  # < 2^62
        u = gen.integers(0, grid.total, size=big.shape[0], dtype=np.int64)
        return (u < threshold).astype(np.int64)[:, None]  # cell 1: +C', cell 0: -C'

    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        round_gen, bit_gen = independent_streams(gen, 2)
        keys = round_to_grid(self._unit(values), self.points, round_gen)  # a fresh alpha each
        return self._permanent_from_keys(keys, bit_gen, None)

    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        """No second round: the memoized bit, as SR's report value."""
        cells = np.asarray(permanent, dtype=np.int64).reshape(-1)
        return Reports(self, values=_report_tables(self)[0][cells])

    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One fresh report per device (randomized rounding to the s-grid, then SR)."""
        v = self.check_values(values)
        gen = as_generator(rng)
        return self._instantaneous_round(self._permanent_round(v, gen), gen)
