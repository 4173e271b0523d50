"""Longitudinal protocols: reports of one value repeated over time (memoization).

Each spec chains a permanent round (budget ``epsilon_inf``, memoized per value on the device
by :class:`ldpkit.Device`) and an instantaneous round (one report: ``epsilon_1``), and
reports both losses from its realized probabilities: ``privacy_loss()`` (one report) and
``longitudinal_privacy_loss(distinct_values)`` (any number of reports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "LongitudinalOracle",
    "LongitudinalUnary",
    "LGRR",
    "LOUE",
    "LOSUE",
    "LSUE",
    "LSOUE",
    "LOLOHA",
    "DBitFlipPM",
    "OneBitMean",
    "loloha_hash_range",
    "choose_longitudinal",
    "LongitudinalCandidate",
    "LongitudinalChoice",
]

__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from ._base import LongitudinalOracle
    from .choose import LongitudinalCandidate, LongitudinalChoice, choose_longitudinal
    from .dbitflip import DBitFlipPM
    from .grr import LGRR
    from .loloha import LOLOHA, loloha_hash_range
    from .mean import OneBitMean
    from .unary import LOSUE, LOUE, LSOUE, LSUE, LongitudinalUnary
