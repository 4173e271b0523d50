"""FO17 Table 2 (n * Var* of every oracle) rebuilt from the specs' own ``variance``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .grr import GRR
from .hashing import BLH, OLH, olh_variance
from .histogram import SHE, THE
from .unary import OUE, SUE

__all__ = ["FO17_TABLE2", "TABLE2_COLUMNS", "variance_table"]

#: FO17 Table 2 as printed (n * Var*), by epsilon; columns as in TABLE2_COLUMNS.
FO17_TABLE2: dict[float, tuple[float, ...]] = {
    0.5: (3.92, 75.20, 2432.40, 32.00, 19.44, 15.92, 15.67, 16.67, 15.67),
    1.0: (0.92, 11.08, 347.07, 8.00, 5.46, 3.92, 3.68, 4.68, 3.68),
    2.0: (0.18, 0.92, 25.22, 2.00, 1.50, 0.92, 0.72, 1.72, 0.72),
    4.0: (0.02, 0.03, 0.37, 0.50, 0.34, 0.18, 0.08, 1.08, 0.08),
}

#: Column name -> n * Var* at epsilon, computed by a spec (the OLH column is FO17's
#: real-valued g = e^eps + 1; "OLH (integer g)" is what a real report uses).
TABLE2_COLUMNS: dict[str, Callable[[float], float]] = {
    "DE (d=2)": lambda e: float(GRR(epsilon=e, domain_size=2).variance(1)),
    "DE (d=32)": lambda e: float(GRR(epsilon=e, domain_size=32).variance(1)),
    "DE (d=1024)": lambda e: float(GRR(epsilon=e, domain_size=1024).variance(1)),
    "SHE": lambda e: float(SHE(epsilon=e, domain_size=2).variance(1)),
    "THE (theta=1)": lambda e: float(THE(epsilon=e, domain_size=2, cutoff=1.0).variance(1)),
    "SUE": lambda e: float(SUE(epsilon=e, domain_size=2).variance(1)),
    "OUE": lambda e: float(OUE(epsilon=e, domain_size=2).variance(1)),
    "BLH": lambda e: float(BLH(epsilon=e, domain_size=2).variance(1)),
    "OLH": lambda e: float(olh_variance(e)),
}


def variance_table(
    epsilons: Sequence[float] = (0.5, 1.0, 2.0, 4.0), *, integer_olh: bool = False
) -> dict[float, dict[str, float]]:
    """``{epsilon: {column: n * Var*}}``, FO17 Table 2's layout, from the specs.

    With ``integer_olh=True`` a column "OLH (integer g)" is added with the OLH spec's own
    variance at its integer hash range.
    """
    table = {}
    for eps in epsilons:
        row = {name: fn(float(eps)) for name, fn in TABLE2_COLUMNS.items()}
        if integer_olh:
            row["OLH (integer g)"] = float(OLH(epsilon=eps, domain_size=2).variance(1))
        table[float(eps)] = row
    return table
