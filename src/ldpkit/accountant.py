"""Per-user privacy accounting over questions and time (sequential composition).

The accountant lives where the user's data lives: on the device. The collector never learns
who sent a report, so it cannot account per user; the device can, and refuses to send a
report that would take its user over budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable
from typing import Any

from ._validation import check_epsilon, check_real

__all__ = ["BudgetExceededError", "PrivacyAccountant"]


class BudgetExceededError(ValueError):
    """A report would take a user past the configured privacy budget."""


@dataclasses.dataclass
class _Ledger:
    spent: dict[int, float] = dataclasses.field(default_factory=dict)  # period -> epsilon
    answered: dict[tuple[str, Hashable], int] = dataclasses.field(default_factory=dict)


class PrivacyAccountant:
    """Cumulative epsilon per user, over questions and time, with a hard budget.

    Every fresh report of an ``epsilon``-LDP randomizer costs its user ``epsilon``
    (sequential composition: k reports about one user are ``sum(epsilon_i)``-LDP together).
    A *memoized* answer costs once: when a device re-sends the very report it sent before
    for an unchanged value (as RAPPOR's permanent randomized response does), an observer
    learns nothing new, so :meth:`charge` with the same ``question`` and ``value`` is free
    after the first time. Re-randomizing an unchanged value is NOT free: each fresh draw
    reveals more about the value, and averaging them undoes the noise.

    Parameters
    ----------
    budget : float
        The most epsilon one user may spend (per period, when ``period`` is given).
    period : float or None
        Length of an accounting period in the unit of ``at`` (e.g. 86400 for a day when
        ``at`` is in seconds): the budget renews every period. None means a lifetime
        budget. A per-period budget bounds the loss per period only: over P periods the
        total is up to ``P * budget`` (say so to your users).

    Examples
    --------
    >>> acc = PrivacyAccountant(budget=2.0)
    >>> acc.charge("alice", 1.0, question="browser", value="firefox")
    1.0
    >>> acc.charge("alice", 1.0, question="browser", value="firefox")  # memoized: free
    1.0
    >>> acc.charge("alice", 1.0, question="os", value="linux")
    0.0
    >>> acc.can_charge("alice", 0.5)
    False
    """

    def __init__(self, budget: float, *, period: float | None = None) -> None:
        self.budget = check_real(budget, "budget", low=0.0, low_inclusive=False)
        self.period = (
            None if period is None else check_real(period, "period", low=0, low_inclusive=False)
        )
        self._users: dict[Hashable, _Ledger] = {}

    def _period_of(self, at: float | None) -> int:
        when = None if at is None else check_real(at, "at")  # checked even when unused
        if self.period is None:
            return 0
        if when is None:
            raise ValueError("at must be given (a time) when the accountant has a period")
        return math.floor(when / self.period)

    def spent(self, user: Hashable, *, at: float | None = None) -> float:
        """Epsilon spent by ``user`` (in the period of ``at`` when there are periods)."""
        ledger = self._users.get(user)
        return 0.0 if ledger is None else ledger.spent.get(self._period_of(at), 0.0)

    def remaining(self, user: Hashable, *, at: float | None = None) -> float:
        """Epsilon ``user`` may still spend (in the period of ``at``)."""
        return max(0.0, self.budget - self.spent(user, at=at))

    def _admit(
        self, user: Hashable, epsilon: float, question: str | None, value: Any, at: float | None
    ) -> tuple[float, int, bool]:
        """Check a report's epsilon and time: (epsilon, its period, whether it is memoized).

        The head of :meth:`can_charge` and :meth:`charge`. Memoized: the same (question,
        value) pair was charged before in this period, so the report costs nothing.
        """
        epsilon = check_epsilon(epsilon)
        period = self._period_of(at)
        if question is None or value is None:
            return epsilon, period, False
        ledger = self._users.get(user)
        memoized = ledger is not None and ledger.answered.get((question, value)) == period
        return epsilon, period, memoized

    def _fits(self, user: Hashable, epsilon: float, at: float | None) -> bool:
        # a relative slack of 1e-12 keeps budget / k summed k times within the budget
        return self.spent(user, at=at) + epsilon <= self.budget * (1 + 1e-12)

    def can_charge(
        self,
        user: Hashable,
        epsilon: float,
        *,
        question: str | None = None,
        value: Any = None,
        at: float | None = None,
    ) -> bool:
        """Whether :meth:`charge` would accept this report."""
        epsilon, _, memoized = self._admit(user, epsilon, question, value, at)
        return memoized or self._fits(user, epsilon, at)

    def charge(
        self,
        user: Hashable,
        epsilon: float,
        *,
        question: str | None = None,
        value: Any = None,
        at: float | None = None,
    ) -> float:
        """Record one report of ``user``; return the epsilon left (in this period).

        Parameters
        ----------
        user : hashable
            Who reports (on a device: any constant).
        epsilon : float
            The report's privacy budget.
        question, value : optional
            Name of the question and the (hashable) true value answered. When both are
            given and the same pair was charged before in this period, the report is taken
            to be the memoized one and costs nothing.
        at : float or None
            When (needed when the accountant has a ``period``).

        Raises
        ------
        BudgetExceededError
            If the report would take the user past the budget; nothing is recorded.
        """
        epsilon, period, memoized = self._admit(user, epsilon, question, value, at)
        if memoized:
            return self.remaining(user, at=at)
        if not self._fits(user, epsilon, at):
            raise BudgetExceededError(
                f"epsilon must fit the remaining budget {self.remaining(user, at=at):.6g} of "
                f"user {user!r} (budget {self.budget:g}"
                + (f" per period of {self.period:g}" if self.period else "")
                + f"), got {epsilon:g}"
            )
        ledger = self._users.setdefault(user, _Ledger())
        ledger.spent[period] = ledger.spent.get(period, 0.0) + epsilon
        if question is not None and value is not None:
            ledger.answered[(question, value)] = period
        return self.remaining(user, at=at)

    # -- charges read from the spec ---------------------------------------------------------
    def report_cost(self, spec: Any, *, memoized: bool = True) -> float:
        """Return what one report of a new value costs under ``spec``.

        Memoized (through :class:`ldpkit.Device`): a longitudinal spec's ``epsilon_inf``
        (every later report of that value is covered), another spec's ``epsilon`` (its
        whole report is repeated). Fresh: the spec's ``epsilon`` (``epsilon_1`` for a
        longitudinal spec), every time.
        """
        from .spec import Mechanism

        if not isinstance(spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {type(spec).__name__}")
        if not isinstance(memoized, bool):
            raise TypeError(f"memoized must be True or False, got {memoized!r}")
        inf = getattr(spec, "epsilon_inf", None)
        return float(inf) if memoized and inf is not None else float(spec.epsilon)

    def charge_report(
        self,
        user: Hashable,
        spec: Any,
        *,
        value: Any,
        question: str | None = None,
        memoized: bool = True,
        at: float | None = None,
    ) -> float:
        """Record one report of ``value`` under ``spec``; return the epsilon left.

        Memoized: the first report of a (question, value) costs :meth:`report_cost`
        (``epsilon_inf`` for a longitudinal spec), repeats of it are free, and a change to a
        value not reported before costs its own ``epsilon_inf`` (sequential composition of
        the permanent answers). Fresh: every report costs ``epsilon`` (``epsilon_1``).
        ``question`` defaults to the spec's fingerprint.

        Raises
        ------
        BudgetExceededError
            If the report would take the user past the budget (the device then refuses, or
            resends a memoized report); nothing is recorded.

        Examples
        --------
        >>> from ldpkit.longitudinal import LGRR
        >>> spec = LGRR(epsilon_inf=1.0, epsilon_1=0.5, domain_size=16)
        >>> acc = PrivacyAccountant(budget=2.5)
        >>> [acc.charge_report("bob", spec, value=3) for day in range(365)][-1]  # one value
        1.5
        >>> acc.charge_report("bob", spec, value=4)  # a change of value
        0.5
        """
        cost = self.report_cost(spec, memoized=memoized)
        if isinstance(value, (bool, float, int, str, bytes)) or value is None:
            key = value
        elif hasattr(value, "item"):  # numpy scalars: their Python value
            key = value.item()
        else:
            key = value
        name = spec.fingerprint if question is None else question
        if not memoized:
            return self.charge(user, cost, at=at)
        return self.charge(user, cost, question=name, value=key, at=at)
