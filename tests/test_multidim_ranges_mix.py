"""The grids' ``mix_items``: OLH over mixed cell keys in HDG, TDG and UniformGrid.

Adjacent cells are in arithmetic progression, on which the pairwise independent OLH hash
correlates the cells' estimates, so a range summed from a grid's cells varies more than
its ``std_error`` says. ``mix_items=True`` (the default) hashes a fixed bijective mix of
each cell index instead. These tests pin the wire identities of the specs made before the
field existed (``mix_items=False``), check that mixed and plain reports never mix, keep
the contract for both, and measure the defect on HDG's plain 1-D grid.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.multidim import HDG, TDG, UniformGrid
from ldpkit.spec import spec_from_dict
from ldpkit.testing import check_mechanism, small_spec

CLASSES = [HDG, TDG, UniformGrid]
UNIT3, ONE3 = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
KW = {"low": (0.0, 0.0, 0.0), "high": (1.0, 1.0, 1.0), "population": 20_000}


def test_earlier_specs_keep_their_wire_identity() -> None:
    # fingerprints of the grids before mix_items existed (computed on that code)
    old = {
        "32e0b3d4c3490622": HDG(epsilon=1.0, mix_items=False),
        "fac2ee5316e4a405": HDG(epsilon=2.0, g1=8, g2=4, mix_items=False, low=UNIT3, high=ONE3),
        "9151f2b9acf2fcba": HDG(
            epsilon=1.0, low=(0, 0), high=(10, 10), integer=True, mix_items=False
        ),
        "7dd1f493a39b2cf4": TDG(epsilon=1.0, mix_items=False),
        "2b02e355917ba6a3": TDG(epsilon=2.0, g2=4, mix_items=False, low=UNIT3, high=ONE3),
        "4483aad767a4837a": UniformGrid(epsilon=1.0, mix_items=False),
        "992fda5b24348d83": UniformGrid(epsilon=2.0, g=4, mix_items=False),
    }
    for fingerprint, spec in old.items():
        assert spec.fingerprint == fingerprint, spec
        assert "mix_items" not in spec.params()
        # a dict without the key (as stored before) loads as the plain-key spec
        again = spec_from_dict(spec.to_dict())
        assert again == spec and again.mix_items is False


@pytest.mark.parametrize("cls", CLASSES)
def test_the_default_mixes_the_cells(cls: type) -> None:
    mixed, plain = cls(epsilon=2.0, **KW), cls(epsilon=2.0, mix_items=False, **KW)
    assert mixed.mix_items is True and mixed == cls(epsilon=2.0, mix_items=True, **KW)
    assert mixed.params()["mix_items"] is True
    assert mixed.fingerprint != plain.fingerprint
    assert spec_from_dict(mixed.to_dict()) == mixed
    for m in range(len(mixed.grids)):
        assert mixed.grid_oracle(m).mix_items and not plain.grid_oracle(m).mix_items
        assert mixed.grid_oracle(m).privacy_loss() == plain.grid_oracle(m).privacy_loss()
    assert mixed.privacy_loss() == plain.privacy_loss() <= 2.0


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_mix_items_must_be_a_bool(cls: type, bad: object) -> None:
    with pytest.raises(TypeError, match="mix_items must be"):
        cls(epsilon=2.0, mix_items=bad, **KW)


@pytest.mark.parametrize("cls", CLASSES)
def test_plain_and_mixed_reports_never_mix(cls: type) -> None:
    x = np.random.default_rng(0).random((500, 3))
    mixed, plain = cls(epsilon=2.0, **KW), cls(epsilon=2.0, mix_items=False, **KW)
    with pytest.raises(ValueError, match="reports must come from"):
        plain.aggregate(mixed.randomize(x, rng=1))
    with pytest.raises(ValueError, match="reports must come from"):
        mixed.aggregate(plain.randomize(x, rng=1))


@pytest.mark.parametrize("cls", CLASSES)
def test_the_plain_key_specs_keep_the_contract(cls: type) -> None:
    check_mechanism(small_spec(cls, mix_items=False))


def _plain_1d_spread_ratio(mix_items: bool, runs: int = 120) -> float:
    """Return the spread of HDG's plain 1-D grid ranges over runs / their ``std_error^2``.

    Skewed data (Beta(2, 5)), eps = 4, ``g1 = 256`` and ranges of 64 whole cells: the
    cells' noise then dwarfs the terms ``std_error`` leaves out (the group's sampling and
    the f-dependent part of OLH's variance, about 5 % here).
    """
    n = 30_000
    x = np.random.default_rng(0).beta(2.0, 5.0, (n, 2))
    spec = HDG(
        epsilon=4.0, low=(0, 0), high=(1, 1), population=n, g1=256, g2=4, mix_items=mix_items
    )
    width = 64
    starts = range(0, 256 - width + 1, width // 2)
    sums, std2 = [], []
    for rep in range(runs):
        stats = spec.aggregate(spec.randomize(x, rng=1000 + rep))
        f, var = spec.plain_grids(stats)[0]
        sums.append([f[a : a + width].sum() for a in starts])
        std2.append([var[a : a + width].sum() for a in starts])
    if mix_items:
        # the summed cell variances are std_error^2 of the range (whole cells)
        est = spec.estimate(stats)
        box = ((starts[1] / 256, (starts[1] + width) / 256), None)
        assert est.std_error(box) ** 2 == pytest.approx(std2[-1][1], rel=1e-9)
    spread = np.var(np.array(sums), axis=0, ddof=1)
    return float(np.mean(spread) / np.mean(std2))


def test_mixed_keys_make_the_plain_1d_std_error_honest() -> None:
    # the study (studies/range_olh_mix.py) found 2.73x with plain keys at eps 4 on flights
    assert abs(_plain_1d_spread_ratio(True) - 1.0) < 0.15
    assert _plain_1d_spread_ratio(False) > 1.5
