"""Choosing a frequency oracle for (epsilon, d) and a report-size budget (FO17 section 5)."""

from __future__ import annotations

import math

from .._validation import check_epsilon, check_integer
from ._base import FrequencyOracle

__all__ = ["choose_oracle", "report_bits"]

#: Bits of the per-report hash seed of the local-hashing oracles.
SEED_BITS = 64


def report_bits(spec: FrequencyOracle) -> int:
    """Size of one report on the wire, in bits, for GRR, OUE/SUE and OLH/BLH specs."""
    from .grr import GRR
    from .hashing import LocalHashing
    from .unary import UnaryEncoding

    if isinstance(spec, GRR):
        return max(1, math.ceil(math.log2(spec.domain_size)))
    if isinstance(spec, UnaryEncoding):
        return spec.domain_size
    if isinstance(spec, LocalHashing):
        return SEED_BITS + max(1, math.ceil(math.log2(spec.range_size)))
    raise TypeError(f"spec must be GRR, a unary encoding or a local-hashing oracle, got {spec!r}")


def choose_oracle(
    epsilon: float, domain_size: int, max_report_bits: int | None = None
) -> FrequencyOracle:
    """The oracle with the smallest estimation variance that fits the report budget.

    Among GRR (ceil(log2 d) bits), OUE (d bits) and OLH (a 64-bit seed plus ceil(log2 g)
    bits), return the one with the lowest Var*. This reproduces FO17's rule: GRR when
    ``d < 3 e^eps + 2``; otherwise OUE when O(d) bits per report are acceptable, else OLH
    (OUE and OLH have the same variance 4e^eps/(e^eps-1)^2 at real-valued g; with the
    integer g a real report needs OLH is marginally worse, so OUE wins ties).

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    domain_size : int
        Number of items d (>= 2).
    max_report_bits : int or None
        Largest acceptable report size in bits; None means no limit.

    Raises
    ------
    ValueError
        If no oracle fits within ``max_report_bits``.

    References
    ----------
    Wang et al., USENIX Security 2017, section 5 ("Choosing a protocol").

    Examples
    --------
    >>> choose_oracle(1.0, 4).name, choose_oracle(1.0, 1024).name
    ('GRR', 'OUE')
    >>> choose_oracle(1.0, 1024, max_report_bits=128).name
    'OLH'
    """
    from .grr import GRR
    from .hashing import OLH
    from .unary import OUE

    epsilon = check_epsilon(epsilon)
    domain_size = check_integer(domain_size, "domain_size", low=2)
    if max_report_bits is not None:
        max_report_bits = check_integer(max_report_bits, "max_report_bits", low=1)
    candidates = [
        GRR(epsilon=epsilon, domain_size=domain_size),
        OUE(epsilon=epsilon, domain_size=domain_size),
        OLH(epsilon=epsilon, domain_size=domain_size),
    ]
    fitting = [
        c for c in candidates if max_report_bits is None or report_bits(c) <= max_report_bits
    ]
    if not fitting:
        smallest = min(report_bits(c) for c in candidates)
        raise ValueError(
            f"max_report_bits must be at least {smallest} for domain_size={domain_size}, "
            f"got {max_report_bits}"
        )
    # min() keeps the first of equal variances: GRR, then OUE, then OLH.
    return min(fitting, key=lambda c: float(c.variance(1)))
