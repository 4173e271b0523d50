"""FO17 Table 2: all 36 numbers, rebuilt from the specs' own variance()."""

import pytest

from ldpkit.frequency.tables import FO17_TABLE2, TABLE2_COLUMNS, variance_table


def test_all_36_numbers():
    table = variance_table(sorted(FO17_TABLE2))
    assert len(TABLE2_COLUMNS) * len(FO17_TABLE2) == 36
    mismatches = [
        (eps, name, round(table[eps][name], 2), expected)
        for eps, row in FO17_TABLE2.items()
        for name, expected in zip(TABLE2_COLUMNS, row)
        if round(table[eps][name], 2) != pytest.approx(expected, abs=1e-9)
    ]
    assert not mismatches, mismatches


def test_integer_olh_column():
    """A real OLH report needs an integer g: eps = 0.5 gives 15.82 (g = 3), eps = 1 gives
    3.69 (g = 4), while eps = 2 and 4 still round to the table (METHODS.md section 1)."""
    table = variance_table(integer_olh=True)
    assert [round(table[e]["OLH (integer g)"], 2) for e in (0.5, 1.0, 2.0, 4.0)] == [
        15.82,
        3.69,
        0.72,
        0.08,
    ]
