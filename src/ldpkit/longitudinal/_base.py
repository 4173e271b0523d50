"""Shared base of the longitudinal (two-round, memoized) frequency oracles.

A longitudinal protocol chains two randomizers (Arcolezi, Couchot, Al Bouna, Xiao 2021/2022,
after RAPPOR's permanent + instantaneous randomized response, Erlingsson et al. CCS 2014):

1. the *permanent* round randomizes the true value with budget ``epsilon_inf`` and is
   memoized per value on the device (:class:`ldpkit.Device`): any number of reports of one
   value reveal at most this round, so their total loss is ``epsilon_inf``;
2. the *instantaneous* round randomizes the permanent answer afresh for every report, with
   parameters chosen so that one report alone is ``epsilon_1``-LDP (``epsilon_1 <
   epsilon_inf``), and two reports of one value differ (no stable identifier).

Both rounds are exact integer laws, so the chained law of one report is an exact rational
per output; ``privacy_loss()`` (epsilon_1) and ``longitudinal_privacy_loss()`` (epsilon_inf)
are computed from these realized probabilities.
"""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from .._constraints import Alternatives, Epsilon
from .._rng import RNGLike, as_generator, independent_streams
from .._validation import check_integer
from ..frequency._base import PureFrequencyOracle
from ..spec import Reports

__all__ = ["LongitudinalOracle"]


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class LongitudinalOracle(PureFrequencyOracle):
    """A frequency oracle whose reports chain a permanent and an instantaneous round.

    The permanent round is memoizable (budget ``epsilon_inf``); the instantaneous round is
    fresh (one report: ``epsilon_1``).

    The spec's ``epsilon`` *is* ``epsilon_1`` (the budget of one report, what the shared
    contract and :class:`ldpkit.PrivacyAccountant` read); the constructor accepts it under
    either name. ``epsilon_inf`` defaults to ``3 epsilon_1`` (alpha = epsilon_1 / epsilon_inf = 1/3, inside
    the range the papers evaluate, and feasible for every chaining).

    Parameters
    ----------
    epsilon_inf : float
        Budget of the permanent round: the loss of any number of reports of one value.
    epsilon_1 : float
        Budget of one report (alias ``epsilon``), ``< epsilon_inf``.
    domain_size : int
        Number of items d (>= 2).
    """

    epsilon_inf: float | None = None

    #: Upper bound of epsilon_inf (the permanent round's sampler is exact below it).
    max_epsilon_inf: ClassVar[float] = 30.0
    _parameter_constraints: ClassVar[dict[str, Alternatives]] = {
        "epsilon_inf": [Epsilon("max_epsilon_inf"), None]
    }

    def __init__(self, *, epsilon_1: Any = None, **params: Any) -> None:
        # Hand-written so that ``epsilon_1=`` (the papers' name) and ``epsilon=`` (the
        # contract's) are one field; dataclasses.replace and spec_from_dict pass ``epsilon``.
        if epsilon_1 is not None:
            if "epsilon" in params:
                raise TypeError("epsilon_1 and epsilon are one parameter: give one of them")
            params["epsilon"] = epsilon_1
        fields = {f.name: f for f in dataclasses.fields(self)}
        unknown = sorted(set(params) - set(fields))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} parameters must be among "
                f"{['epsilon_1', *fields]}, got {unknown}"
            )
        for name, field in fields.items():
            if name in params:
                value = params[name]
            elif field.default is not dataclasses.MISSING:
                value = field.default
            else:
                shown = "epsilon_1 (or epsilon)" if name == "epsilon" else name
                raise TypeError(f"{type(self).__name__} needs {shown}")
            object.__setattr__(self, name, value)
        self.__post_init__()

    def _validate(self) -> None:
        super()._validate()
        top = type(self).max_epsilon_inf
        inf = self.epsilon_inf
        if inf is None:
            inf = min(3.0 * self.epsilon, top)
        if not self.epsilon < inf:
            raise ValueError(
                f"epsilon (epsilon_1) must be < epsilon_inf = {inf!r} (one report leaks less "
                f"than the memoized answer), got {self.epsilon!r}"
            )
        self._set("epsilon_inf", inf)

    def __post_init__(self) -> None:
        super().__post_init__()  # fields, then the memory budget of the configuration
        self._rounds()  # raises when the chained law cannot reach epsilon_1

    @property
    def epsilon_1(self) -> float:
        """The budget of one report (the field ``epsilon``)."""
        return self.epsilon

    # -- the two rounds (subclasses) -------------------------------------------------------
    @abstractmethod
    def _rounds(self) -> Any:
        """Return the integer parameters of both rounds (cached per spec by the subclass)."""

    @abstractmethod
    def _permanent_round(self, values: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """Return the permanent answer of each value (one row per value); what a device memoizes."""

    @abstractmethod
    def _instantaneous_round(self, permanent: np.ndarray, gen: np.random.Generator) -> Reports:
        """One fresh report of each permanent answer."""

    # -- what a device keeps (ldpkit.Device reads these) -----------------------------------
    def _device_state(self, gen: np.random.Generator) -> np.ndarray | None:
        """Per-device permanent state drawn once (LOLOHA: its hash seed); None here."""
        return None

    def _memo_keys(self, values: np.ndarray, state: np.ndarray | None) -> np.ndarray:
        """Return what the permanent answer of each value depends on (memoized per key).

        The value itself here; LOLOHA's hashed value.
        """
        return values

    def _permanent_from_keys(
        self, keys: np.ndarray, gen: np.random.Generator, state: np.ndarray | None
    ) -> np.ndarray:
        """Return the permanent answers of memo keys (the permanent round, here)."""
        return self._permanent_round(keys, gen)

    @abstractmethod
    def longitudinal_privacy_loss(self, distinct_values: int = 1) -> float:
        """Return the loss of one device's memoized reports of ``distinct_values`` values.

        Any number of reports; sequential composition of their permanent answers:
        ``distinct_values x`` the realized permanent-round loss.
        """

    def change_privacy_loss(self) -> float:
        """Return what one change of value costs.

        The permanent-round loss of the new value (a change back to an already memoized
        value costs nothing).
        """
        return self.longitudinal_privacy_loss(1)

    def _check_distinct(self, distinct_values: int) -> int:
        return check_integer(distinct_values, "distinct_values", low=1)

    # -- the flow --------------------------------------------------------------------------
    def randomize(self, values: Any, *, rng: RNGLike = None) -> Reports:
        """One fresh two-round report per user (a first day: no memo yet).

        Memoized reporting, day after day, goes through :meth:`ldpkit.Device.report`. The
        two rounds draw from independent streams of ``rng``.
        """
        v = self.check_values(values)
        permanent_gen, instant_gen = independent_streams(as_generator(rng), 2)
        return self._instantaneous_round(self._permanent_round(v, permanent_gen), instant_gen)


def composite_loss(big: int, small: int, scale: int) -> float:
    """Return ``log(P (1 - Q) / (Q (1 - P)))`` for ``P = big / scale``, ``Q = small / scale``.

    Exactly: integer cross products, then one correctly rounded log1p.
    """
    from .. import _crmath

    if small <= 0 or big >= scale:
        return math.inf
    num = big * (scale - small)
    den = small * (scale - big)
    return _crmath.log1p((num - den) / den)
