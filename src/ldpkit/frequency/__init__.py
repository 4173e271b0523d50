"""Categorical frequency oracles (FO17) and their helpers."""

from ._base import FrequencyOracle, PureFrequencyOracle
from .choose import choose_oracle
from .grr import GRR
from .hadamard import HRR, HadamardResponse, fwht
from .hashing import BLH, OLH, LocalHashing
from .histogram import SHE, THE
from .rappor import RAPPOR, RAPPORClient, bloom_positions
from .significance import heavy_hitters, significance_cutoff
from .subset import SubsetSelection
from .unary import OUE, SUE, UnaryEncoding

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
]

#: Every frequency oracle by name; the contract suite runs over this registry.
ORACLES: dict[str, type[FrequencyOracle]] = {
    "GRR": GRR,
    "BLH": BLH,
    "OLH": OLH,
    "SubsetSelection": SubsetSelection,
    "HadamardResponse": HadamardResponse,
    "HRR": HRR,
    "SUE": SUE,
    "OUE": OUE,
    "SHE": SHE,
    "THE": THE,
    "RAPPOR": RAPPOR,
}
