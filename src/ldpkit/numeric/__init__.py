"""Numerical attributes.

Distributions (Square Wave + EM/EMS, CFO binning, hierarchies, Haar wavelets, Wiener
deconvolution) and means (SR, PM, HM).

Each name loads its own module on first use (see :mod:`ldpkit._lazy`): ``from
ldpkit.numeric import SquareWave`` imports neither scipy nor the numba kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__all__ = [
    "AutoDistribution",
    "AutoInfo",
    "Distribution",
    "EMInfo",
    "em",
    "ems",
    "smooth",
    "SquareWave",
    "GeneralWave",
    "DiscreteSquareWave",
    "square_wave_bandwidth",
    "wave_bucket_matrix",
    "CFOBinning",
    "HierarchicalHistogram",
    "HHADMM",
    "HaarHRR",
    "ADMMInfo",
    "constrained_inference",
    "hh_admm",
    "haar_transform",
    "inverse_haar_transform",
    "StochasticRounding",
    "PiecewiseMechanism",
    "HybridMechanism",
    "MeanEstimate",
    "VarianceEstimate",
    "estimate_variance",
    "stochastic_rounding_variance",
    "piecewise_variance",
    "hybrid_variance",
    "hybrid_worst_case_variance",
    "HaarWavelet",
    "SignedSubsetSelection",
    "WienerDeconvolution",
    "Recommendation",
    "recommend",
]


__getattr__, __dir__ = attach(__name__, __file__)

if TYPE_CHECKING:  # what type checkers and IDEs see; runtime imports are lazy
    from .auto import AutoDistribution, AutoInfo
    from .binning import CFOBinning
    from .deconvolution import WienerDeconvolution
    from .distribution import Distribution
    from .em import EMInfo, em, ems, smooth
    from .hierarchy import (
        HHADMM,
        ADMMInfo,
        HaarHRR,
        HierarchicalHistogram,
        constrained_inference,
        haar_transform,
        hh_admm,
        inverse_haar_transform,
    )
    from .mean import (
        HybridMechanism,
        MeanEstimate,
        PiecewiseMechanism,
        StochasticRounding,
        VarianceEstimate,
        estimate_variance,
        hybrid_variance,
        hybrid_worst_case_variance,
        piecewise_variance,
        stochastic_rounding_variance,
    )
    from .recommend import Recommendation, recommend
    from .square_wave import (
        DiscreteSquareWave,
        GeneralWave,
        SquareWave,
        square_wave_bandwidth,
        wave_bucket_matrix,
    )
    from .wavelet import HaarWavelet, SignedSubsetSelection
