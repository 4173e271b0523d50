"""Categorical frequency oracles (FO17) and their helpers.

Each name loads its own module on first use (see :mod:`ldpkit._lazy`): ``from
ldpkit.frequency import OLH`` does not import RAPPOR's scipy or the numba kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import attach

__all__ = [
    "ORACLES",
    "FrequencyOracle",
    "PureFrequencyOracle",
    "GRR",
    "LocalHashing",
    "BLH",
    "OLH",
    "SubsetSelection",
    "HadamardResponse",
    "HRR",
    "fwht",
    "choose_oracle",
    "heavy_hitters",
    "significance_cutoff",
    "UnaryEncoding",
    "SUE",
    "OUE",
    "SHE",
    "THE",
    "RAPPOR",
    "RAPPORClient",
    "bloom_positions",
    "CMS",
    "HCMS",
    "FLH",
    "SignedSubsetSelection",
]


# Names of the oracles in ORACLES, in registry order.
_ORACLE_NAMES = (
    "GRR",
    "BLH",
    "OLH",
    "SubsetSelection",
    "HadamardResponse",
    "HRR",
    "SUE",
    "OUE",
    "SHE",
    "THE",
    "RAPPOR",
)


def _oracles() -> dict[str, Any]:
    # Built on first access: the registry imports every oracle's module (RAPPOR's scipy too).
    return {name: __getattr__(name) for name in _ORACLE_NAMES}


__getattr__, __dir__ = attach(
    __name__,
    __file__,
    factories={"ORACLES": _oracles},
)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from ._base import FrequencyOracle, PureFrequencyOracle
    from .choose import choose_oracle
    from .flh import FLH
    from .grr import GRR
    from .hadamard import HRR, HadamardResponse, fwht
    from .hashing import BLH, OLH, LocalHashing
    from .histogram import SHE, THE
    from .rappor import RAPPOR, RAPPORClient, bloom_positions
    from .signed_subset import SignedSubsetSelection
    from .significance import heavy_hitters, significance_cutoff
    from .sketch import CMS, HCMS
    from .subset import SubsetSelection
    from .unary import OUE, SUE, UnaryEncoding

    #: Every frequency oracle by name; the contract suite runs over this registry.
    ORACLES: dict[str, type[FrequencyOracle]]
