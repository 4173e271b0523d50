"""Adapters between ldpkit mechanisms and the grid's method/metric signatures."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["MechanismMethod", "frequency_mse"]


@dataclasses.dataclass(frozen=True, eq=False)
class MechanismMethod:
    """Run a mechanism end to end (randomize, aggregate, estimate) as a grid method.

    ``MechanismMethod(GRR)(data, epsilon, rng)`` builds ``GRR(epsilon=epsilon,
    domain_size=data.domain_size, **params)`` and returns ``spec.run(data.values, rng=rng)``.
    Constructor arguments the data implies are filled in when the mechanism has them:
    ``domain_size`` for categorical data sets, ``low`` and ``high`` (the data set's domain)
    for numerical ones; ``params`` override them. Picklable, so it works with every
    multiprocessing start method.

    Parameters
    ----------
    mechanism : type
        A :class:`ldpkit.Mechanism` subclass.
    params : mapping
        Further keyword arguments of the mechanism.
    cost : float, optional
        Declared seconds per cell (skips the pilot timing in :func:`run_grid`).

    Examples
    --------
    >>> from ldpkit import GRR
    >>> from ldpkit.datasets import zipf
    >>> est = MechanismMethod(GRR)(zipf(d=8, n=1000, rng=0), 2.0, np.random.default_rng(0))
    >>> est.frequencies.shape
    (8,)
    """

    mechanism: type
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    cost: float | None = None

    def spec(self, data: Any, epsilon: float) -> Any:
        """Return the mechanism configured for ``data`` at ``epsilon``."""
        fields = {f.name for f in dataclasses.fields(self.mechanism)}
        kwargs: dict[str, Any] = {"epsilon": epsilon}
        kind = getattr(data, "kind", None)
        if kind == "categorical" and "domain_size" in fields:
            kwargs["domain_size"] = data.domain_size
        if kind == "numerical" and {"low", "high"} <= fields:
            kwargs["low"], kwargs["high"] = data.domain
        kwargs.update(self.params)
        return self.mechanism(**kwargs)

    def __call__(self, data: Any, epsilon: float, rng: np.random.Generator) -> Any:
        """Run the spec built for ``data`` and ``epsilon`` on the data's values."""
        values = data.values if hasattr(data, "values") and hasattr(data, "kind") else data
        return self.spec(data, epsilon).run(values, rng=rng)


def frequency_mse(estimate: Any, truth: Any) -> float:
    """Mean over items of the squared error of estimated frequencies (FO17 section 6).

    ``estimate`` is a :class:`ldpkit.FrequencyEstimate` (or an array of frequencies),
    ``truth`` the true frequencies.

    Examples
    --------
    >>> frequency_mse(np.array([0.5, 0.5]), np.array([0.6, 0.4]))
    0.01
    """
    from .._validation import check_array

    est = check_array(getattr(estimate, "frequencies", estimate), "estimate", bounded=True)
    true = check_array(truth, "truth", bounded=True)
    if est.shape != true.shape:
        raise ValueError(f"estimate must have the shape of truth {true.shape}, got {est.shape}")
    return float(np.mean((est - true) ** 2))
