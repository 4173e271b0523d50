"""ldpkit: local differential privacy, fast, exact and tested.

Names load on first use (see :mod:`ldpkit._lazy`): ``from ldpkit import GRR, OLH, OUE`` or
``from ldpkit.numeric import SquareWave`` imports numpy and the mechanism's own module, not
scipy, pandas, numba or pyarrow, so a device that only randomizes does not pay for the server.
"""

from typing import TYPE_CHECKING

from ._lazy import attach

__version__ = "0.1.0"

__all__ = [
    "Aggregator",
    "BudgetExceededError",
    "PrivacyAccountant",
    "Question",
    "Survey",
    "load_questions",
    "save_questions",
    "shuffle_amplification",
    "consistency",
    "queries",
    "as_generator",
    "secure_generator",
    "spawn",
    "Encoder",
    "FrequencyEstimate",
    "privacy_loss",
    "split_budget",
    "Mechanism",
    "Reports",
    "Stats",
    "stream",
    "metrics",
    "numeric",
    "sets",
    "longitudinal",
    "Device",
    # every frequency oracle and helper is public at top level too
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
    # and so is every numerical mechanism
    "SquareWave",
    "GeneralWave",
    "DiscreteSquareWave",
    "CFOBinning",
    "HierarchicalHistogram",
    "HHADMM",
    "HaarHRR",
    "HaarWavelet",
    "SignedSubsetSelection",
    "WienerDeconvolution",
    "StochasticRounding",
    "PiecewiseMechanism",
    "HybridMechanism",
    # open-vocabulary discovery
    "discovery",
    "PEM",
    "TreeHist",
    "SFP",
]

# Further submodules reachable as attributes without an explicit import (``ldpkit.io``); not
# those that need an optional extra (service, distributed), so dir() and getattr stay safe.
_SUBMODULES = [
    "aggregator",
    "datasets",
    "encoder",
    "estimate",
    "experiments",
    "frequency",
    "io",
    "privacy",
    "spec",
    "testing",
]

__getattr__, __dir__ = attach(__name__, __file__, submodules=_SUBMODULES)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from . import consistency, discovery, longitudinal, metrics, numeric, queries, sets, stream
    from ._rng import as_generator, secure_generator, spawn
    from .accountant import BudgetExceededError, PrivacyAccountant
    from .aggregator import Aggregator
    from .device import Device
    from .discovery import PEM, SFP, TreeHist
    from .encoder import Encoder
    from .estimate import FrequencyEstimate
    from .frequency import (
        BLH,
        CMS,
        FLH,
        GRR,
        HCMS,
        HRR,
        OLH,
        OUE,
        RAPPOR,
        SHE,
        SUE,
        THE,
        FrequencyOracle,
        HadamardResponse,
        LocalHashing,
        PureFrequencyOracle,
        RAPPORClient,
        SubsetSelection,
        UnaryEncoding,
        bloom_positions,
        choose_oracle,
        fwht,
        heavy_hitters,
        significance_cutoff,
    )
    from .numeric import (
        HHADMM,
        CFOBinning,
        DiscreteSquareWave,
        GeneralWave,
        HaarHRR,
        HaarWavelet,
        HierarchicalHistogram,
        HybridMechanism,
        PiecewiseMechanism,
        SignedSubsetSelection,
        SquareWave,
        StochasticRounding,
        WienerDeconvolution,
    )
    from .privacy import privacy_loss, shuffle_amplification, split_budget
    from .question import Question, load_questions, save_questions
    from .spec import Mechanism, Reports, Stats
    from .survey import Survey
