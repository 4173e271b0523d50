"""The grids' private study variants whose OLH hashes mixed cell keys.

``_MixedCellsHDG``/``TDG``/``UniformGrid`` (``ldpkit.multidim.ranges``) keep the public
classes' law and privacy and change only the hashed keys (``OLH(mix_items=True)``); their
reports must never be read by a public spec, and the public classes must keep hashing the
plain cell indices.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpkit.multidim import HDG, TDG, UniformGrid
from ldpkit.multidim.ranges import _MixedCellsHDG, _MixedCellsTDG, _MixedCellsUniformGrid
from ldpkit.spec import mechanism_registry
from ldpkit.testing import check_mechanism, small_spec

PAIRS = [(HDG, _MixedCellsHDG), (TDG, _MixedCellsTDG), (UniformGrid, _MixedCellsUniformGrid)]
KW = {"low": (0.0, 0.0, 0.0), "high": (1.0, 1.0, 1.0), "population": 20_000}


@pytest.mark.parametrize(("public", "mixed"), PAIRS)
def test_only_the_private_variant_mixes_the_cells(public: type, mixed: type) -> None:
    plain, mix = public(epsilon=2.0, **KW), mixed(epsilon=2.0, **KW)
    assert plain != mix
    for m in range(len(plain.grids)):
        assert (
            not plain.grid_oracle(m).mix_items and "mix_items" not in plain.grid_oracle(m).params()
        )
        assert mix.grid_oracle(m).mix_items
        assert mix.grid_oracle(m).privacy_loss() == plain.grid_oracle(m).privacy_loss()
    assert mix.privacy_loss() == plain.privacy_loss() <= 2.0
    assert mixed.__name__ not in mechanism_registry()


@pytest.mark.parametrize(("public", "mixed"), PAIRS)
def test_a_public_spec_refuses_mixed_reports(public: type, mixed: type) -> None:
    x = np.random.default_rng(0).random((500, 3))
    reports = mixed(epsilon=2.0, **KW).randomize(x, rng=1)
    with pytest.raises(ValueError, match="reports must come from"):
        public(epsilon=2.0, **KW).aggregate(reports)


#: every contract check but the dict round trips (private classes are not buildable from data)
CHECKS = ["validation", "seeding", "merge", "loop", "estimate", "privacy", "transition_matrix"]


@pytest.mark.parametrize("mixed", [m for _, m in PAIRS])
def test_the_mixed_variants_keep_the_contract(mixed: type) -> None:
    check_mechanism(small_spec(mixed), checks=CHECKS)
