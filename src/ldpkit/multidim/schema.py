"""A tuple of attributes declared once, as :class:`ldpkit.Question` s, for every multidim spec.

A :class:`Schema` holds one question per attribute: categorical (its :class:`ldpkit.Encoder`
gives the public categories and the domain size) or numerical (its spec's ``low`` and
``high`` give the bounds, its mechanism PM or HM the numerical oracle of
:class:`AttributeSampling`). The same questions serve a :class:`ldpkit.Survey` (one question
per user, or a share of the budget each) and, through :meth:`Schema.spec`, any spec of
:mod:`ldpkit.multidim`, which then sends the whole tuple in one report under one budget:

* categorical attributes only: ``SPL``, ``SMP``, ``RSFD``, ``CALM``, ``FullDomain``,
  ``Fourier`` (``domain_sizes``);
* numerical attributes only: ``DuchiMean``, ``LaplaceMean``, ``HDG``, ``TDG``,
  ``UniformGrid`` (``low``, ``high``);
* both: ``AttributeSampling`` (numerical columns first, then categorical ones) and
  ``GroupMean`` (one categorical group and one numerical value).

:meth:`Schema.spec` returns a :class:`SchemaSpec`: the spec plus its attributes in the
spec's column order. It turns raw answers by name (a mapping or a DataFrame of labels and
values) into the spec's ``(n, d)`` array and its estimates into a :class:`NamedEstimate`
whose frames, ranges and marginals use the attributes' names and the categories' labels.
The questions' own epsilons are not used: the spec's ``epsilon`` is the whole tuple's.
:meth:`Schema.auto` lets :func:`ldpkit.multidim.auto` pick the spec from the declared
attributes and the query, with the same named results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._rng import RNGLike
from .._validation import check_epsilon, check_sequence
from ..question import Question
from ..spec import Mechanism, Reports, Stats
from ._base import MAX_ATTRIBUTES

__all__ = ["NamedEstimate", "Schema", "SchemaSpec"]

#: The specs of each kind of tuple, by class name: how the schema fills their parameters.
CATEGORICAL_SPECS = ("SPL", "SMP", "RSFD", "CALM", "FullDomain", "Fourier")
NUMERICAL_SPECS = ("DuchiMean", "LaplaceMean", "HDG", "TDG", "UniformGrid")
MIXED_SPECS = ("AttributeSampling", "GroupMean")
#: The range-query grids, whose ``integer`` flags may be given as attribute names
GRID_SPECS = ("HDG", "TDG", "UniformGrid")
SPECS = CATEGORICAL_SPECS + NUMERICAL_SPECS + MIXED_SPECS
#: The parameters a schema fills in; passing them too would declare the tuple twice.
DECLARED = ("domain_sizes", "domain_size", "low", "high")


def _names_only(value: Any) -> bool:
    """Return whether ``value`` is a string or a non-empty sequence of strings."""
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(isinstance(v, str) for v in value)
    return False


def _integer_flags(value: Any, names: list[str]) -> tuple[bool, ...]:
    """Return the grid specs' ``integer`` flags, in column order, from attribute names."""
    chosen = [value] if isinstance(value, str) else list(value)
    unknown = [a for a in chosen if a not in names]
    if unknown:
        raise ValueError(f"integer must name attributes of the spec {names}, got {unknown}")
    return tuple(a in chosen for a in names)


def _numerical_mechanism(questions: Sequence[Question]) -> str | None:
    """Return ``"pm"`` or ``"hm"`` when the numerical questions' PM/HM specs agree.

    None when none of them is PM or HM (e.g. Square Wave): the spec's default then.
    """
    names = {"PiecewiseMechanism": "pm", "HybridMechanism": "hm"}
    votes = {names[type(q.spec).__name__] for q in questions if type(q.spec).__name__ in names}
    if len(votes) > 1:
        raise ValueError(
            "mechanism must be given ('pm' or 'hm') when the numerical questions use both "
            f"PM and HM, got {[type(q.spec).__name__ for q in questions]}"
        )
    return votes.pop() if votes else None


class Schema:
    """The attributes of every user's tuple, one :class:`ldpkit.Question` each.

    Parameters
    ----------
    questions : sequence of Question
        Distinct names, 1 to 64 questions; categorical ones with or without an encoder
        (without: the answers are item indices), numerical ones with their bounds
        (e.g. :meth:`ldpkit.Question.numerical`).

    Examples
    --------
    >>> from ldpkit import Question
    >>> from ldpkit.multidim import Schema, GroupMean
    >>> schema = Schema([
    ...     Question.categorical("origin", ["EWR", "JFK", "LGA"]),
    ...     Question.numerical("delay", low=-30, high=120),
    ... ])
    >>> spec = schema.spec(GroupMean, epsilon=2.0, oracle="grr")
    >>> spec.spec
    GroupMean(epsilon=2.0, domain_size=3, low=-30.0, high=120.0, oracle='grr')
    >>> gen = np.random.default_rng(0)
    >>> answers = {"origin": gen.choice(["EWR", "JFK", "LGA"], 30_000),
    ...            "delay": gen.uniform(0, 30, 30_000)}
    >>> frame = spec.run(answers, rng=1).to_frame()
    >>> list(frame["origin"])
    ['EWR', 'JFK', 'LGA']
    """

    def __init__(self, questions: Sequence[Question]) -> None:
        """Validate the questions (distinct names, 1 to 64 of them)."""
        items = check_sequence(questions, "questions", "Question")
        if not items or not all(isinstance(q, Question) for q in items):
            raise TypeError(
                f"questions must be a non-empty sequence of Question, got {questions!r:.80}"
            )
        if len(items) > MAX_ATTRIBUTES:
            raise ValueError(
                f"questions must hold at most {MAX_ATTRIBUTES} questions, got {len(items)}"
            )
        names = [q.name for q in items]
        if len(set(names)) != len(names):
            raise ValueError(f"questions must have distinct names, got {names}")
        self.questions: tuple[Question, ...] = tuple(items)
        self._by_name = {q.name: q for q in self.questions}

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes' names, in declaration order."""
        return tuple(q.name for q in self.questions)

    def __len__(self) -> int:
        """Return the number of attributes."""
        return len(self.questions)

    def __getitem__(self, name: str) -> Question:
        """Return the question called ``name``; KeyError naming the others otherwise."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(
                f"attribute must be one of {list(self._by_name)}, got {name!r}"
            ) from None

    def __repr__(self) -> str:
        """List the attributes and their kinds."""
        inner = ", ".join(f"{q.name}: {q.kind}" for q in self.questions)
        return f"Schema({inner})"

    def _select(self, attributes: Sequence[str] | None) -> list[Question]:
        if attributes is None:
            return list(self.questions)
        names = check_sequence(attributes, "attributes", "attribute names")
        if isinstance(attributes, str) or not names or not all(isinstance(a, str) for a in names):
            raise TypeError(
                f"attributes must be a non-empty sequence of names, got {attributes!r:.80}"
            )
        unknown = [a for a in names if a not in self._by_name]
        if unknown:
            raise ValueError(
                f"attributes must be names of the schema {list(self._by_name)}, got {unknown}"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"attributes must be distinct, got {list(names)}")
        return [self._by_name[a] for a in names]

    def spec(
        self,
        method: type[Mechanism] | str,
        /,
        *,
        epsilon: float,
        attributes: Sequence[str] | None = None,
        **params: Any,
    ) -> SchemaSpec:
        """Build a :mod:`ldpkit.multidim` spec over the schema's attributes.

        Parameters
        ----------
        method : type or str
            A spec class of :mod:`ldpkit.multidim` (or its name): one of ``SPL``, ``SMP``,
            ``RSFD``, ``CALM``, ``FullDomain``, ``Fourier`` (categorical attributes),
            ``DuchiMean``, ``LaplaceMean``, ``HDG``, ``TDG``, ``UniformGrid`` (numerical),
            ``AttributeSampling`` (both) or ``GroupMean`` (a group and a value).
        epsilon : float
            What one user spends on her whole tuple.
        attributes : sequence of str or None
            The attributes the spec collects (None: all); their order is the spec's
            columns', except that AttributeSampling puts the numerical ones first and
            GroupMean the group first.
        **params
            The spec's other parameters (``population=``, ``way=``, ``oracle=`` ...); not
            ``domain_sizes``, ``low`` or ``high``, which the schema declares.
            AttributeSampling's ``mechanism`` defaults to the numerical questions' own
            (PM or HM) when they agree. HDG's, TDG's and UniformGrid's ``integer`` may
            name the integer-valued attributes (e.g. ``integer=("age",)``).

        Returns
        -------
        SchemaSpec
        """
        import importlib

        name = method if isinstance(method, str) else getattr(method, "__name__", "")
        if name not in SPECS:
            raise ValueError(f"method must be one of {list(SPECS)}, got {method!r:.80}")
        cls = getattr(importlib.import_module("ldpkit.multidim"), name)
        if not isinstance(method, str) and method is not cls:
            raise ValueError(f"method must be one of {list(SPECS)}, got {method!r:.80}")
        check_epsilon(epsilon)
        twice = sorted(set(params) & set(DECLARED))
        if twice:
            raise TypeError(f"params must not set {twice}: the schema declares them")
        chosen = self._select(attributes)
        cat = [q for q in chosen if q.kind == "categorical"]
        num = [q for q in chosen if q.kind == "numerical"]
        bounds = {
            "low": tuple(float(q.spec.low) for q in num),  # type: ignore[attr-defined]
            "high": tuple(float(q.spec.high) for q in num),  # type: ignore[attr-defined]
        }
        sizes = tuple(int(q.spec.domain_size) for q in cat)  # type: ignore[attr-defined]
        declared: dict[str, Any]
        if name in CATEGORICAL_SPECS:
            _only(name, "categorical", num)
            order, declared = cat, {"domain_sizes": sizes}
        elif name in NUMERICAL_SPECS:
            _only(name, "numerical", cat)
            order, declared = num, dict(bounds)
            flags = params.get("integer")
            if name in GRID_SPECS and _names_only(flags):
                params["integer"] = _integer_flags(flags, [q.name for q in order])
        elif name == "AttributeSampling":
            if not num:
                raise ValueError(
                    "attributes must include a numerical question for AttributeSampling, "
                    f"got {[q.name for q in chosen]}"
                )
            order, declared = num + cat, {**bounds, "domain_sizes": sizes}
            if "mechanism" not in params:
                voted = _numerical_mechanism(num)
                if voted is not None:
                    declared["mechanism"] = voted
        else:  # GroupMean: the group, then the value
            if len(cat) != 1 or len(num) != 1:
                raise ValueError(
                    "attributes must be one categorical and one numerical question for "
                    f"GroupMean, got {[(q.name, q.kind) for q in chosen]}"
                )
            order = cat + num
            declared = {
                "domain_size": sizes[0],
                "low": bounds["low"][0],
                "high": bounds["high"][0],
            }
        spec = cls(epsilon=epsilon, **declared, **params)
        return SchemaSpec(spec=spec, questions=tuple(order))

    def auto(
        self,
        epsilon: float,
        *,
        query: str,
        attributes: Sequence[str] | None = None,
        population: int = 100_000,
        way: int = 2,
    ) -> SchemaSpec:
        """Pick the spec for ``query`` over the schema's attributes (:func:`~.auto.auto`).

        The declared attributes give :func:`ldpkit.multidim.auto` its domain sizes and
        bounds; the spec it picks comes back with the attributes in its column order, as
        from :meth:`spec`. The questions' own mechanisms are not used: the pick compares
        the candidates' variances (PM or HM included, for ``"means"``).

        Parameters
        ----------
        epsilon : float
            What one user spends on her whole tuple.
        query : {"frequencies", "marginals", "ranges", "means", "group_means"}
            The analyst's question: categorical attributes only for the first two,
            numerical ones only for ``"ranges"``, at least one numerical for ``"means"``,
            one of each kind for ``"group_means"``.
        attributes : sequence of str or None
            The attributes the spec collects (None: all).
        population, way
            As in :func:`ldpkit.multidim.auto`.

        Returns
        -------
        SchemaSpec

        Examples
        --------
        >>> from ldpkit import Question
        >>> schema = Schema([Question.numerical("hour", low=0, high=24),
        ...                  Question.numerical("delay", low=-30, high=120)])
        >>> schema.auto(1.0, query="ranges", population=10**5).spec.name
        'HDG'
        """
        from .auto import QUERIES, auto

        if query not in QUERIES:
            raise ValueError(f"query must be one of {list(QUERIES)}, got {query!r}")
        chosen = self._select(attributes)
        cat = [q for q in chosen if q.kind == "categorical"]
        num = [q for q in chosen if q.kind == "numerical"]
        what = f"query={query!r}"
        if query in ("frequencies", "marginals"):
            _only(what, "categorical", num)
        elif query == "ranges":
            _only(what, "numerical", cat)
        elif query == "group_means" and (len(cat) != 1 or len(num) != 1):
            raise ValueError(
                "attributes must be one categorical and one numerical question for "
                f"query='group_means', got {[(q.name, q.kind) for q in chosen]}"
            )
        elif query == "means" and not num:
            raise ValueError(
                "attributes must include a numerical question for query='means', "
                f"got {[q.name for q in chosen]}"
            )
        spec = auto(
            epsilon,
            query=query,
            domain_sizes=tuple(int(q.spec.domain_size) for q in cat),  # type: ignore[attr-defined]
            low=tuple(float(q.spec.low) for q in num),  # type: ignore[attr-defined]
            high=tuple(float(q.spec.high) for q in num),  # type: ignore[attr-defined]
            population=population,
            way=way,
        )
        # the column order of the picked spec, as spec() builds it
        name = type(spec).__name__
        order = {"AttributeSampling": num + cat, "GroupMean": cat + num}.get(
            name, cat if name in CATEGORICAL_SPECS else num
        )
        return SchemaSpec(spec=spec, questions=tuple(order))


def _only(name: str, kind: str, others: Sequence[Question]) -> None:
    if others:
        raise ValueError(
            f"attributes must all be {kind} for {name}, got {[q.name for q in others]} "
            "(pass attributes= to pick some)"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class SchemaSpec:
    """A multidim spec and its attributes (questions) in the spec's column order.

    Attributes
    ----------
    spec : Mechanism
        The spec, as :meth:`Schema.spec` built it.
    questions : tuple of Question
        Column j of the spec's input is ``questions[j]``'s answers.
    """

    spec: Mechanism
    questions: tuple[Question, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes' names, in the spec's column order."""
        return tuple(q.name for q in self.questions)

    def prepare(self, answers: Any) -> np.ndarray:
        """Turn every user's raw answers, by attribute name, into the spec's ``(n, d)`` array.

        ``answers[name]`` holds one answer per user: labels for a categorical attribute
        (its encoder maps them to items), values in ``[low, high]`` for a numerical one
        (clipped or refused, as its question says). A mapping or a pandas DataFrame.
        """
        if not hasattr(answers, "__getitem__") or isinstance(answers, (str, bytes, np.ndarray)):
            raise TypeError(
                f"answers must be a mapping or a DataFrame of columns by attribute name, "
                f"got {type(answers).__name__}"
            )
        missing = [q.name for q in self.questions if q.name not in answers]
        if missing:
            raise ValueError(f"answers must have a column per attribute, missing {missing}")
        columns = []
        for q in self.questions:
            col = answers[q.name]
            columns.append(q.numbers(col) if q.kind == "numerical" else np.asarray(q.prepare(col)))
        lengths = {
            q.name: int(np.shape(c)[0]) if np.ndim(c) == 1 else -1
            for q, c in zip(self.questions, columns, strict=True)
        }
        if len(set(lengths.values())) != 1 or -1 in lengths.values():
            raise ValueError(
                f"answers must hold one 1-D column per attribute of one length, got {lengths}"
            )
        if all(q.kind == "categorical" for q in self.questions):
            return np.stack([c.astype(np.int64) for c in columns], axis=1)
        return np.stack([c.astype(np.float64) for c in columns], axis=1)

    def randomize(self, answers: Any, *, rng: RNGLike = None) -> Reports:
        """Prepare and randomize every user's answers (one report per user)."""
        return self.spec.randomize(self.prepare(answers), rng=rng)

    def aggregate(self, reports: Reports) -> Stats:
        """Return ``spec.aggregate(reports)``."""
        return self.spec.aggregate(reports)

    def estimate(self, stats: Stats) -> NamedEstimate:
        """Return the spec's estimate with the attributes' names and categories' labels."""
        result = self.spec.estimate(stats)
        return NamedEstimate(result=_labelled(result, self.questions), questions=self.questions)

    def run(self, answers: Any, *, rng: RNGLike = None) -> NamedEstimate:
        """Randomize, aggregate and estimate in one go (simulations, tests)."""
        return self.estimate(self.aggregate(self.randomize(answers, rng=rng)))

    def __repr__(self) -> str:
        """Show the spec and the attributes' names."""
        return f"SchemaSpec({self.spec!r}, attributes={list(self.names)})"


def _labelled(result: Any, questions: Sequence[Question]) -> Any:
    """Attach the encoders' labels to the per-attribute frequency estimates of ``result``."""
    from ._base import MultiFrequencyEstimate
    from ._tuples import TupleMeans

    def label(q: Question, est: Any) -> Any:
        return q.encoder.label(est) if q.encoder is not None else est

    if isinstance(result, MultiFrequencyEstimate):
        ests = tuple(label(q, e) for q, e in zip(questions, result.estimates, strict=True))
        return dataclasses.replace(result, estimates=ests)
    if isinstance(result, TupleMeans):
        cat = [q for q in questions if q.kind == "categorical"]
        ests = tuple(label(q, e) for q, e in zip(cat, result.categorical, strict=True))
        return dataclasses.replace(result, categorical=ests)
    return result


@dataclasses.dataclass(frozen=True, eq=False)
class NamedEstimate:
    """A multidim estimate whose attributes are named (and categories labelled).

    Every attribute of the underlying ``result`` reads through (``means``, ``variance``,
    ``grids`` ...); the methods below take attribute names where the result takes
    positions.

    Attributes
    ----------
    result : Any
        The spec's own estimate (``MultiFrequencyEstimate``, ``TupleMeans``,
        ``MarginalsEstimate``, ``RangeEstimate`` or ``GroupMeans``).
    questions : tuple of Question
        The attributes, in the spec's column order.
    """

    result: Any
    questions: tuple[Question, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The attributes' names, in the spec's column order."""
        return tuple(q.name for q in self.questions)

    def __getattr__(self, attr: str) -> Any:
        """Read any other attribute from the underlying result."""
        if attr.startswith("__") or attr in ("result", "questions"):
            raise AttributeError(attr)
        return getattr(self.result, attr)

    def index(self, name: str) -> int:
        """Return the position of attribute ``name`` in the spec's columns."""
        names = self.names
        if name not in names:
            raise ValueError(f"attribute must be one of {list(names)}, got {name!r}")
        return names.index(name)

    def __getitem__(self, name: str) -> Any:
        """Return a categorical attribute's labelled :class:`ldpkit.FrequencyEstimate`.

        For a ``TupleMeans``, a numerical attribute gives ``(mean, std_error)``.
        """
        from ._base import MultiFrequencyEstimate
        from ._tuples import TupleMeans

        j = self.index(name)
        if isinstance(self.result, MultiFrequencyEstimate):
            return self.result[j]
        if isinstance(self.result, TupleMeans):
            dn = self.result.means.size
            if j < dn:
                return float(self.result.means[j]), float(self.result.std_error[j])
            return self.result.categorical[j - dn]
        raise TypeError(
            f"name must index a per-attribute estimate; {type(self.result).__name__} has "
            "none (use to_frame, marginal or range_query)"
        )

    def _positions(self, ranges: Any) -> Any:
        if isinstance(ranges, Mapping):
            return {self.index(k) if isinstance(k, str) else k: v for k, v in ranges.items()}
        return ranges

    def range_query(self, ranges: Any) -> float:
        """Return ``result.range_query`` of a box given as ``{name: (lo, hi)}``."""
        return float(self.result.range_query(self._positions(ranges)))

    def interval(self, ranges: Any, alpha: float = 0.05) -> tuple[float, float]:
        """Return ``result.interval`` of a box given as ``{name: (lo, hi)}``."""
        return self.result.interval(self._positions(ranges), alpha)  # type: ignore[no-any-return]

    def std_error(self, ranges: Any = None) -> Any:
        """Return the result's standard errors (of a box ``{name: (lo, hi)}`` for ranges)."""
        if ranges is None:
            return self.result.std_error
        return self.result.std_error(self._positions(ranges))

    def marginal(self, attributes: Sequence[str | int], **options: Any) -> Any:
        """Return ``result.marginal`` of attributes given by name (or position).

        ``options`` go to it (e.g. ``replicates=`` and ``rng=`` of a max-entropy table).
        """
        return self.result.marginal(
            [self.index(a) if isinstance(a, str) else a for a in attributes], **options
        )

    def to_frame(self, alpha: float = 0.05) -> Any:
        """Return the result's long frame with names for attributes and labels for items.

        ``attribute`` columns hold names; a ``label`` column the categories' labels (items
        of a question without an encoder keep their index); GroupMeans' frame gains a
        column named after the group attribute.
        """
        frame = self.result.to_frame(alpha)
        names = np.array(self.names, dtype=object)
        if "group" in frame.columns:  # GroupMeans: the group is the first attribute
            frame.insert(1, self.names[0], _labels(self.questions[0], frame["group"]))
            frame.attrs["value"] = self.names[1]
            return frame
        if "attribute" in frame.columns:
            codes = frame["attribute"].to_numpy(np.int64)
            if "item" in frame.columns and "label" not in frame.columns:
                labels = [
                    _labels(self.questions[a], [i])[0] if i >= 0 else None
                    for a, i in zip(codes, frame["item"].to_numpy(np.int64), strict=True)
                ]
                frame.insert(frame.columns.get_loc("item") + 1, "label", labels)
            frame["attribute"] = names[codes]
        for col in [c for c in frame.columns if c.startswith("attribute_")]:
            a = int(col.split("_")[1])
            known = frame[col].notna().to_numpy()  # stacked marginals leave other columns NaN
            values = np.full(len(frame), None, dtype=object)
            values[known] = _labels(self.questions[a], frame[col][known])
            frame[col] = values
            frame = frame.rename(columns={col: self.names[a]})
        if "marginal" in frame.columns:
            frame["marginal"] = [
                "x".join(self.names[int(a)] for a in m.split("x")) for m in frame["marginal"]
            ]
        return frame

    def __repr__(self) -> str:
        """Show the names and the underlying result."""
        return f"NamedEstimate({list(self.names)}, {self.result!r})"


def _labels(question: Question, items: Any) -> list[Any]:
    """Return the labels of ``items`` of a categorical question (the items without encoder)."""
    items = np.asarray(items, dtype=np.int64)
    if question.encoder is None:
        return items.tolist()
    return question.encoder.labels[items].tolist()  # type: ignore[no-any-return]
