"""The JavaScript client's grids with integer-valued attributes (``integer=`` in the spec dict).

The client reads the flag from the collector's spec dict: its reports of integer values
decode to unbiased plain cells (z-tested, failing at a wrong epsilon), and a non-integer
value of a declared attribute is refused, as the Python randomizer refuses it.
"""

from __future__ import annotations

import numpy as np
import pytest

from _jshelpers import js_reports, needs_node
from ldpkit.multidim import HDG, TDG
from ldpkit.spec import Reports

SEED = 20261207


def _z_grids(spec, reports, x: np.ndarray) -> float:
    """Largest |z| of every plain grid's cell frequencies (before post-processing)."""
    stats = spec.aggregate(Reports(spec, **reports.arrays))
    z = []
    for m, (freq, var) in enumerate(spec.plain_grids(stats)):
        shape = spec.grid_shape(m)
        cells = spec._cell(x, spec.grids[m], shape)
        truth = np.bincount(cells, minlength=int(np.prod(shape))) / x.shape[0]
        z.append(np.abs(np.ravel(freq) - truth) / np.sqrt(np.ravel(var)))
    return float(np.max(np.concatenate(z)))


@needs_node
@pytest.mark.parametrize(
    "spec",
    [
        HDG(epsilon=2.0, low=(0.0, 0.0), high=(15.0, 1.0), g1=16, g2=4, integer=(True, False)),
        TDG(epsilon=2.0, low=(0.0, 0.0), high=(15.0, 15.0), g2=4, integer=True),
    ],
    ids=["HDG", "TDG"],
)
def test_js_integer_grid_cells_are_unbiased(spec):
    """Check the client's cells of integer values against the truth (z <= 5; > 6 at eps x 1.3)."""
    gen = np.random.default_rng(SEED)
    n = 30_000
    first = gen.binomial(15, 0.3, n).astype(float)
    second = np.clip(np.round(first + gen.normal(0.0, 2.0, n)), 0, 15)
    if not spec.integer[1]:
        second = gen.random(n)
    x = np.stack([first, second], axis=1)
    reports = js_reports(spec, values=x.tolist(), seed=SEED)
    assert _z_grids(spec, reports, x) <= 5.0
    assert _z_grids(spec.replace(epsilon=spec.epsilon * 1.3), reports, x) > 6.0


@needs_node
def test_js_refuses_a_non_integer_value_of_an_integer_attribute():
    """Check that the client refuses 2.5 for an attribute declared integer, naming it."""
    spec = TDG(epsilon=2.0, low=(0.0, 0.0), high=(15.0, 15.0), g2=4, integer=(False, True))
    assert len(js_reports(spec, values=[[2.5, 3.0]], seed=SEED)) == 1
    with pytest.raises(Exception, match=r"value\[1\] must be an integer"):
        js_reports(spec, values=[[2.0, 3.5]], seed=SEED)
