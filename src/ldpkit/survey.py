"""Several questions asked of the same users under one privacy budget.

Two ways to share one budget ``epsilon`` among k questions (Wang et al., "Locally
Differentially Private Protocols for Frequency Estimation", USENIX Security 2017, sec. 6
discusses both for multi-attribute data; SW20 sec. 6 and Wang et al. ICDE 2019 sec. IV
argue for splitting users):

* ``split="users"``: each user answers ONE question, drawn at random (weights ``w``), with
  the whole budget. A question's estimate comes from its ~``w_j n`` users; frequencies and
  distributions from a random subsample are unbiased for the whole population, and totals
  (counts) are re-weighted by ``n / n_j``. Usually the more accurate choice: the variance of
  an LDP estimate grows like ``1 / epsilon^2`` but only like ``1 / n``.
* ``split="epsilon"``: every user answers every question with ``epsilon * w_j`` (sequential
  composition: the sum is ``epsilon``).

Either way no user spends more than ``epsilon`` on the survey.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ._rng import RNGLike, as_generator
from ._validation import check_epsilon, check_sequence
from .privacy import split_budget
from .question import Question
from .spec import Reports

__all__ = ["Survey"]


class Survey:
    """Several :class:`Question` s asked of the same users, with one budget per user.

    Parameters
    ----------
    questions : sequence of Question
        Distinct names. Their specs' own epsilons are replaced by the survey's split.
    epsilon : float
        What one user spends on the whole survey.
    split : {"users", "epsilon"}
        Split users (each answers one question with all of ``epsilon``) or split the budget
        (each answers all questions with a share of it).
    weights : sequence of float or None
        Share of users (``split="users"``) or of the budget (``split="epsilon"``) per
        question; None means equal shares.

    Examples
    --------
    >>> from ldpkit import OLH, Encoder
    >>> from ldpkit.numeric import PiecewiseMechanism
    >>> browser = Question(name="browser", spec=OLH(epsilon=1, domain_size=3),
    ...                    encoder=Encoder(["firefox", "chrome", "safari"]))
    >>> minutes = Question(name="minutes", spec=PiecewiseMechanism(epsilon=1, low=0, high=60))
    >>> survey = Survey([browser, minutes], epsilon=2.0, split="users")
    >>> [q.spec.epsilon for q in survey.questions]
    [2.0, 2.0]
    >>> answers = {"browser": ["chrome"] * 6, "minutes": [30.0] * 6}
    >>> reports = survey.randomize(answers, rng=0)
    >>> sum(len(r) for r in reports.values())  # each of the 6 users answered one question
    6
    """

    def __init__(
        self,
        questions: Sequence[Question],
        *,
        epsilon: float,
        split: Literal["users", "epsilon"] = "users",
        weights: Sequence[float] | None = None,
    ) -> None:
        items = check_sequence(questions, "questions", "Question")
        if not items or not all(isinstance(q, Question) for q in items):
            raise TypeError(
                f"questions must be a non-empty sequence of Question, got {questions!r}"
            )
        names = [q.name for q in items]
        if len(set(names)) != len(names):
            raise ValueError(f"questions must have distinct names, got {names}")
        if split not in ("users", "epsilon"):
            raise ValueError(f"split must be 'users' or 'epsilon', got {split!r}")
        self.epsilon = check_epsilon(epsilon)
        self.split = split
        shares = split_budget(1.0, list(weights) if weights is not None else len(items))
        if len(shares) != len(items):
            raise ValueError(
                f"weights must have one entry per question ({len(items)}), got {len(shares)}"
            )
        self.weights = np.asarray(shares, dtype=np.float64)
        budgets = (
            [self.epsilon] * len(items)
            if split == "users"
            else split_budget(self.epsilon, list(self.weights))
        )
        self.questions = tuple(
            Question(
                name=q.name,
                spec=q.spec.replace(epsilon=eps),
                encoder=q.encoder,
                clip=q.clip,
                description=q.description,
            )
            for q, eps in zip(items, budgets, strict=True)
        )
        self._by_name = {q.name: q for q in self.questions}

    def __getitem__(self, name: str) -> Question:
        """Return the question called ``name``; KeyError naming the others otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"question must be one of {list(self._by_name)}, got {name!r}") from None

    def epsilon_per_user(self) -> float:
        """Return what one user spends on the survey (sequential composition): ``epsilon``."""
        if self.split == "users":
            return self.epsilon
        return float(sum(q.spec.epsilon for q in self.questions))

    def assign(self, n: int, *, rng: RNGLike = None) -> np.ndarray:
        """Which question each of ``n`` users answers (``split="users"``): indices 0..k-1."""
        if self.split != "users":
            raise ValueError("assign needs split='users'; with split='epsilon' all answer all")
        gen = as_generator(rng)
        return gen.choice(len(self.questions), size=int(n), p=self.weights)

    def randomize(self, answers: Mapping[str, Any], *, rng: RNGLike = None) -> dict[str, Reports]:
        """Return the reports per question from every user's raw answers (one array per question).

        ``answers[name][i]`` is user i's true answer to question ``name`` (all arrays have
        one entry per user). With ``split="users"`` each user's one question is drawn
        here and only that answer is randomized; on a device, call :meth:`assign` with
        n = 1 and randomize that question alone.
        """
        gen = as_generator(rng)
        missing = [name for name in self._by_name if name not in answers]
        if missing:
            raise ValueError(f"answers must have an entry per question, missing {missing}")
        columns = {name: np.asarray(answers[name]) for name in self._by_name}
        sizes = {name: col.shape[0] if col.ndim else -1 for name, col in columns.items()}
        if len(set(sizes.values())) != 1 or -1 in sizes.values():
            raise ValueError(
                f"answers must hold one 1-D array per question of one length, got {sizes}"
            )
        n = next(iter(sizes.values()))
        out: dict[str, Reports] = {}
        if self.split == "users":
            which = self.assign(n, rng=gen)
            for j, q in enumerate(self.questions):
                mine = columns[q.name][which == j]
                out[q.name] = q.randomize(mine, rng=gen)
        else:
            for q in self.questions:
                out[q.name] = q.randomize(columns[q.name], rng=gen)
        return out

    def aggregate(self, reports: Mapping[str, Reports]) -> dict[str, Any]:
        """Stats per question."""
        return {q.name: q.spec.aggregate(reports[q.name]) for q in self.questions}

    def estimate(self, stats: Mapping[str, Any]) -> dict[str, Any]:
        """Return the estimate of every question (labelled when it has an encoder).

        Under ``split="users"`` each estimate's ``n`` is the number of users who answered
        that question; its frequencies / distribution are unbiased for the population
        because the users were drawn at random. Totals for the whole population are the
        estimate's counts times :meth:`population_scale`.
        """
        return {q.name: q.estimate(stats[q.name]) for q in self.questions}

    def population_scale(self, stats: Mapping[str, Any]) -> dict[str, float]:
        """``n / n_j`` per question: multiply a subgroup's counts by it for population totals.

        Conditional on the group sizes, a uniformly random subgroup's frequency estimate is
        unbiased for the population's, so the re-weighted total is unbiased too.
        """
        sizes = {q.name: int(stats[q.name].n) for q in self.questions}
        if self.split == "epsilon":
            return dict.fromkeys(sizes, 1.0)
        total = sum(sizes.values())
        return {name: (total / size if size else float("nan")) for name, size in sizes.items()}
