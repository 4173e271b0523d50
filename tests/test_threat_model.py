"""docs/design/THREAT_MODEL.md's accepted-epsilon table is generated from the registry."""

from __future__ import annotations

import math
from pathlib import Path

from ldpkit.spec import mechanism_registry

DOC = Path(__file__).resolve().parents[1] / "docs" / "design" / "THREAT_MODEL.md"

_RR = "integer RR weights `w_keep ~ e^eps w_other` within 2^62"
_WAVE = "integer weights with `w_high <= 2^62`"
WHY = {
    "GRR": _RR,
    "OLH": _RR,
    "BLH": _RR,
    "HadamardResponse": _RR,
    "HRR": _RR,
    "HaarHRR": _RR,
    "SubsetSelection": _RR,
    "SignedSubsetSelection": _RR,
    "HaarWavelet": _RR,
    "SquareWave": _WAVE,
    "GeneralWave": _WAVE,
    "DiscreteSquareWave": _WAVE,
    "PiecewiseMechanism": _WAVE,
    "AutoDistribution": _WAVE + " (its SquareWave)",
    "StochasticRounding": "`2^16 (1 + e^eps) <= 2^62` (SR's input grid)",
    "HybridMechanism": "`2^16 (1 + e^eps) <= 2^62` (SR's input grid)",
    "OUE": "bits at 2^-64: q = 1/(e^eps + 1) keeps >= 2^20 units",
    "SUE": "bits at 2^-64: q ~ e^(-eps/2) keeps >= 2^20 units",
    "THE": "bits at 2^-64: q ~ e^(-eps/2) keeps >= 2^20 units",
    "RAPPOR": "bits at 2^-64: f/2 keeps >= 2^20 units at h = 1",
    "SHE": "noise block of >= 2996 cells on the 2^-20 grid",
    "PaddingSampling": _RR,
    **dict.fromkeys(("CALM", "FullDomain", "Fourier", "GroupMean", "RSFD", "SPL", "SMP"), _RR),
    **dict.fromkeys(("HDG", "TDG", "UniformGrid"), _RR),
    "PCKV": _RR,
    "PrivKV": _RR,
    "LGRR": "epsilon_1 at epsilon_inf = 40: RR weights of both rounds within 2^62",
    "DBitFlipPM": "bits at 2^-64: q ~ e^(-eps/2) keeps >= 2^20 units",
    "OneBitMean": "`2^16 (1 + e^eps) <= 2^62` (SR's input grid)",
    "LOLOHA": "epsilon_1 at epsilon_inf = 40: RR weights of both rounds within 2^62",
    "LOUE": "epsilon_1 its chaining reaches at epsilon_inf = 30 (bits at 2^-64)",
    "LOSUE": "epsilon_1 its chaining reaches at epsilon_inf = 30 (bits at 2^-64)",
    "LSUE": "epsilon_1 its chaining reaches at epsilon_inf = 50 (bits at 2^-64)",
    "LSOUE": "epsilon_1 its chaining reaches at epsilon_inf = 50 (bits at 2^-64)",
    "CMS": "bits at 2^-64: q ~ e^(-eps/2) keeps >= 2^20 units",
    "HCMS": _RR,
    "FLH": _RR,
    "PEM": _RR,
    "PEMRound": _RR,
    "TreeHist": _RR,
    "SFP": "its two sketches' (HCMS: integer RR weights; CMS: bits at 2^-64)",
    "AttributeSampling": "its attributes' PM/HM grid laws (integer weights within 2^62) and GRR",
    "DuchiMean": "integer vertex weights `w_high ~ e^eps w_low` within 2^62",
    "LaplaceMean": "geometric-noise coins on integers; eps/d >= 1e-3 per attribute",
    "PrivSet": "branch coin `a / 2^62`, `a N_miss <= e^eps (2^62 - a) N_meet` on the integers",
}
#: Composites without a maximum of their own: the inner mechanism refuses at construction.
INNER = {
    "CFOBinning": ("its oracle's", "refused at construction by its frequency oracle"),
    "WienerDeconvolution": ("its oracle's", "refused at construction by its frequency oracle"),
    "HierarchicalHistogram": ("its oracles'", "refused at construction by its level oracles"),
    "HHADMM": ("its oracles'", "refused at construction by its level oracles"),
}


def epsilon_table() -> list[str]:
    """The table's rows, one per registered mechanism."""
    rows = []
    for name, cls in sorted(mechanism_registry().items()):
        if not cls.__module__.startswith("ldpkit."):
            continue  # a test's own subclass, registered while the suite runs
        if name in INNER:
            assert math.isinf(cls.max_epsilon), name
            top, why = INNER[name]
        else:
            assert math.isfinite(cls.max_epsilon), f"{name} has no max_epsilon"
            top, why = f"{cls.max_epsilon:g}", WHY[name]
        rows.append(f"| `{name}` | [1e-06, {top}] | {why} |")
    return rows


def test_epsilon_table_is_current():
    text = DOC.read_text()
    missing = [row for row in epsilon_table() if row not in text]
    assert not missing, "THREAT_MODEL.md's epsilon table is stale:\n" + "\n".join(missing)


def test_composites_refuse_at_construction():
    import pytest

    from ldpkit.testing import small_spec

    for name in INNER:
        with pytest.raises(ValueError, match="epsilon must be a finite number >= 1e-06 and <="):
            small_spec(mechanism_registry()[name], epsilon=100.0)
