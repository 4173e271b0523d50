"""Client side of the local-DP stream releases (ToPL and its baselines): what a device runs.

A device receives a frozen spec from the collector (``ToPL.client_spec()``, sent as
``spec.to_dict()`` and rebuilt with :func:`ldpkit.spec.spec_from_dict`) and reports its one
value with :func:`client_randomize`. This module imports only the mechanism specs, never the
server's estimators.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import RNGLike
from ..numeric.mean import HybridMechanism, PiecewiseMechanism, StochasticRounding
from ..numeric.square_wave import SquareWave
from ..spec import Mechanism, Reports

__all__ = ["client_randomize"]

_MEAN_SPECS = (HybridMechanism, PiecewiseMechanism, StochasticRounding)


def client_randomize(spec: Mechanism, values: Any, *, rng: RNGLike = None) -> Reports:
    """Randomize users' values with the spec the collector handed out (STR21 §5, ToPL).

    Parameters
    ----------
    spec : SquareWave, HybridMechanism, PiecewiseMechanism or StochasticRounding
        The threshold-phase spec (Square Wave on ``[0, B]``: the value is reported as is)
        or a perturbation spec on ``[0, theta]`` (HM for ToPL; PM or SR on ``[0, B]`` for
        the fixed-domain baselines): the value is first clipped to ``[low, high]`` — the
        clipping is part of the protocol, so values above theta are not an error.
    values : array_like of float
        One value per user (finite reals; in ``[low, high]`` for Square Wave).
    rng : Generator, int, SeedSequence or None
        The device's randomness (use :func:`ldpkit.secure_generator` in deployment).

    Returns
    -------
    Reports
        ``reports.values``: float64, one per user, ready to send with the spec fingerprint.

    Examples
    --------
    >>> from ldpkit.numeric import HybridMechanism
    >>> spec = HybridMechanism(epsilon=1.0, low=0.0, high=20.0)
    >>> reports = client_randomize(spec, [3.0, 250.0], rng=0)  # 250 is clipped to 20
    >>> len(reports), reports.spec == spec
    (2, True)
    """
    if isinstance(spec, _MEAN_SPECS):
        v = np.asarray(values)
        if v.dtype.kind not in "iuf":
            raise TypeError(f"values must be real numbers, got an array of dtype {v.dtype}")
        v = np.atleast_1d(v).astype(np.float64)
        if v.ndim != 1 or not np.all(np.isfinite(v)):
            raise ValueError(
                f"values must be a 1-D array of finite real numbers, got shape {v.shape}"
            )
        return spec.randomize(np.clip(v, spec.low, spec.high), rng=rng)
    if isinstance(spec, SquareWave):
        return spec.randomize(values, rng=rng)
    raise TypeError(
        "spec must be a SquareWave, HybridMechanism, PiecewiseMechanism or StochasticRounding "
        f"spec, got {type(spec).__name__}"
    )
