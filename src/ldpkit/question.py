"""Questions: a mechanism plus everything a client needs to answer it the same way.

A :class:`Question` is what the analyst publishes and every device and the collector load:
the spec (mechanism and its parameters), the encoder of a categorical answer (its public
categories and the policies for unknown and missing labels) or the clipping policy of a
numerical one. Both sides build it from the same file, so they agree on the fingerprint
that reports and stats carry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ._rng import RNGLike
from ._validation import _is_real, _show, check_layout, check_not_masked, check_sequence
from .encoder import Encoder
from .spec import Mechanism, Reports, spec_from_dict

__all__ = ["Question", "load_questions", "save_questions"]

#: Version of the question layout written by :meth:`Question.to_dict`.
FORMAT = 1
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _kind(spec: Mechanism) -> Literal["categorical", "numerical"]:
    if hasattr(spec, "low") and hasattr(spec, "high"):
        return "numerical"
    if hasattr(spec, "domain_size"):
        return "categorical"
    raise TypeError(f"spec must be a categorical or a numerical mechanism, got {spec!r}")


def _numbers(answers: Any) -> np.ndarray:
    """Numerical answers as float64 (None -> NaN: missing); strings, booleans, masked refused."""
    requirement = "a sequence of numbers (None or NaN for missing)"
    check_not_masked(answers, "answers")
    arr = np.asarray(answers) if not np.isscalar(answers) else np.asarray([object()])
    if arr.dtype.kind == "O" and all(x is None or _is_real(x) for x in arr.ravel()):
        arr = np.array([np.nan if x is None else float(x) for x in arr.ravel()])
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise TypeError(f"answers must be {requirement}, got {_show(answers)}")
    return arr.astype(np.float64, copy=False)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=True)
class Question:
    """One question asked of the users under local differential privacy.

    Parameters
    ----------
    name : str
        Short identifier (letters, digits, ``_ . -``; at most 64 characters).
    spec : Mechanism
        The randomizer, e.g. ``OLH(epsilon=1, domain_size=...)`` or
        ``SquareWave(epsilon=1, low=0, high=3600)``.
    encoder : Encoder or None
        For categorical questions: the public categories, the unknown-label and the
        missing-value policies; its ``domain_size`` must equal the spec's. None means the
        answers are already items ``0..d-1``. Not allowed for numerical questions.
    clip : {"error", "clip"}
        For numerical questions: what an answer outside ``[spec.low, spec.high]`` does:
        raise ValueError, or be clipped to the range (a documented bias: clipping moves
        mass to the ends). Missing numerical answers always raise. A DiscreteSquareWave question is
        numerical too: answers are values of ``[low, high]``, and :meth:`prepare` turns each
        into its bucket (``spec.bucketize``), the item the mechanism randomizes.
    description : str
        Free text shown to people (not part of the fingerprint).

    Examples
    --------
    >>> from ldpkit import GRR, Encoder
    >>> q = Question(
    ...     name="browser",
    ...     spec=GRR(epsilon=1.0, domain_size=4),
    ...     encoder=Encoder(["firefox", "chrome", "safari"], unknown="other"),
    ... )
    >>> reports = q.randomize(["chrome", "lynx", "safari"], rng=0)
    >>> len(reports), Question.from_dict(q.to_dict()).fingerprint == q.fingerprint
    (3, True)
    """

    name: str
    spec: Mechanism
    encoder: Encoder | None = None
    clip: Literal["error", "clip"] = "error"
    description: str = ""

    def __post_init__(self) -> None:
        """Validate the name, the spec and the encoder."""
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                "name must be 1-64 letters, digits, '_', '.' or '-' (starting with a letter "
                f"or digit), got {self.name!r}"
            )
        if not isinstance(self.spec, Mechanism):
            raise TypeError(f"spec must be an ldpkit mechanism spec, got {self.spec!r}")
        if self.clip not in ("error", "clip"):
            raise ValueError(f"clip must be 'error' or 'clip', got {self.clip!r}")
        if not isinstance(self.description, str):
            raise TypeError(f"description must be a str, got {self.description!r}")
        kind = _kind(self.spec)
        if self.encoder is not None:
            if not isinstance(self.encoder, Encoder):
                raise TypeError(f"encoder must be an ldpkit.Encoder or None, got {self.encoder!r}")
            if kind != "categorical":
                raise ValueError(
                    f"encoder must be None for a numerical question, got {self.encoder!r}"
                )
            size = self.spec.domain_size  # type: ignore[attr-defined]
            if self.encoder.domain_size != size:
                raise ValueError(
                    f"encoder must give spec.domain_size = {size} items, got "
                    f"{self.encoder.domain_size} ({self.encoder!r})"
                )

    @classmethod
    def numerical(
        cls,
        name: str,
        *,
        low: float,
        high: float,
        mechanism: Literal["pm", "hm", "sw"] = "pm",
        epsilon: float = 1.0,
        clip: Literal["error", "clip"] = "error",
        description: str = "",
    ) -> Question:
        """Declare a numerical question by its bounds (and, optionally, its mechanism).

        Parameters
        ----------
        name : str
            The attribute's name.
        low, high : float
            The bounds of the answers.
        mechanism : {"pm", "hm", "sw"}
            Piecewise (means; Wang et al. ICDE 2019), Hybrid (means; the same paper) or
            Square Wave (the distribution; Li et al. SIGMOD 2020).
        epsilon : float
            The question's own budget (a :class:`ldpkit.Survey` replaces it by its split).
        clip, description
            As in :class:`Question`.

        Examples
        --------
        >>> Question.numerical("delay", low=-30, high=120).spec
        PiecewiseMechanism(epsilon=1.0, low=-30.0, high=120.0, report_cells=262144)
        """
        from .numeric import HybridMechanism, PiecewiseMechanism, SquareWave

        specs = {"pm": PiecewiseMechanism, "hm": HybridMechanism, "sw": SquareWave}
        if mechanism not in specs:
            raise ValueError(f"mechanism must be 'pm', 'hm' or 'sw', got {mechanism!r}")
        spec = specs[mechanism](epsilon=epsilon, low=low, high=high)
        return cls(name=name, spec=spec, clip=clip, description=description)

    @classmethod
    def categorical(
        cls,
        name: str,
        categories: Encoder | Iterable[Any],
        *,
        mechanism: Literal["grr", "olh", "oue"] = "grr",
        epsilon: float = 1.0,
        description: str = "",
    ) -> Question:
        """Declare a categorical question by its categories (and, optionally, its oracle).

        ``categories`` is an :class:`ldpkit.Encoder` or the list of labels (then unknown
        and missing labels raise); ``mechanism`` the frequency oracle (GRR, OLH or OUE,
        Wang et al. USENIX Security 2017).

        Examples
        --------
        >>> Question.categorical("origin", ["EWR", "JFK", "LGA"]).spec
        GRR(epsilon=1.0, domain_size=3)
        """
        from .frequency import GRR, OLH, OUE

        specs = {"grr": GRR, "olh": OLH, "oue": OUE}
        if mechanism not in specs:
            raise ValueError(f"mechanism must be 'grr', 'olh' or 'oue', got {mechanism!r}")
        encoder = categories if isinstance(categories, Encoder) else Encoder(categories)
        spec = specs[mechanism](epsilon=epsilon, domain_size=encoder.domain_size)
        return cls(name=name, spec=spec, encoder=encoder, description=description)

    @property
    def kind(self) -> Literal["categorical", "numerical"]:
        """``"categorical"`` (items) or ``"numerical"`` (values in ``[low, high]``)."""
        return _kind(self.spec)

    # -- the client side ------------------------------------------------------------------
    def prepare(self, answers: Iterable[Any] | np.ndarray) -> np.ndarray:
        """Turn raw answers into what ``spec.randomize`` takes.

        Items, checked or clipped values, or for DiscreteSquareWave the values' buckets.
        """
        if self.kind == "categorical":
            if self.encoder is not None:
                return self.encoder.encode(answers)
            return np.asarray(answers)
        values = self.numbers(answers)
        from .numeric.square_wave import DiscreteSquareWave  # loaded already: spec is one

        if isinstance(self.spec, DiscreteSquareWave):
            # its inputs are the d buckets of [low, high]: the answer's bucket is sent
            return self.spec.bucketize(values)
        return values

    def numbers(self, answers: Iterable[Any] | np.ndarray) -> np.ndarray:
        """Return a numerical question's answers checked (or clipped) to ``[low, high]``.

        The values themselves (float64), before any bucketing: what a multi-attribute
        spec takes as this attribute's column (:class:`ldpkit.multidim.Schema`).
        """
        if self.kind != "numerical":
            raise ValueError(f"question must be numerical for numbers(), got {self.name!r}")
        values = _numbers(answers)
        if np.isnan(values).any():
            raise ValueError(
                f"answers must not be missing (NaN) for the numerical question {self.name!r}, "
                f"got {int(np.isnan(values).sum())} missing"
            )
        low, high = float(self.spec.low), float(self.spec.high)  # type: ignore[attr-defined]
        if self.clip == "clip":
            values = np.clip(values, low, high)
        outside = (values < low) | (values > high)
        if outside.any():
            raise ValueError(
                f"answers must lie in [{low:g}, {high:g}] for question {self.name!r}, got "
                f"{int(outside.sum())} outside (e.g. {values[outside][0]:g}); use clip='clip'"
            )
        return values

    def randomize(self, answers: Iterable[Any] | np.ndarray, *, rng: RNGLike = None) -> Reports:
        """Prepare and randomize raw answers (one per user)."""
        return self.spec.randomize(self.prepare(answers), rng=rng)

    # -- the server side ------------------------------------------------------------------
    def estimate(self, stats: Any) -> Any:
        """``spec.estimate(stats)``, with the encoder's labels attached when there is one."""
        est = self.spec.estimate(stats)
        if self.encoder is not None and hasattr(est, "frequencies"):
            return self.encoder.label(est)
        return est

    # -- identity and files ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON/TOML-safe description; :meth:`from_dict` rebuilds an equal question."""
        out: dict[str, Any] = {"format": FORMAT, "name": self.name}
        if self.description:
            out["description"] = self.description
        out["spec"] = self.spec.to_dict()
        if self.encoder is not None:
            out["encoder"] = self.encoder.to_dict()
        if self.kind == "numerical":
            out["clip"] = self.clip
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Question:
        """Rebuild a question from :meth:`to_dict` output (JSON or TOML)."""
        data = check_layout(
            data,
            "Question.to_dict",
            ("name", "description", "spec", "encoder", "clip"),
            FORMAT,
        )
        for key in ("name", "spec"):
            if key not in data:
                raise ValueError(f"data must have a {key!r} entry, got keys {sorted(data)}")
        spec = data["spec"]
        if not isinstance(spec, Mapping) or "mechanism" not in spec:
            raise ValueError(f"spec must be a table with 'mechanism' and 'params', got {spec!r}")
        encoder = data.get("encoder")
        return cls(
            name=data["name"],
            spec=spec_from_dict({"mechanism": spec["mechanism"], "params": spec.get("params", {})}),
            encoder=Encoder.from_dict(encoder) if encoder is not None else None,
            clip=data.get("clip", "error"),
            description=data.get("description", ""),
        )

    @property
    def fingerprint(self) -> str:
        """A short stable hash of what both sides must agree on (spec, encoder, clipping)."""
        doc = self.to_dict()
        doc.pop("description", None)
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def save(self, path: str | Path) -> Path:
        """Write the question to ``path`` (``.toml`` or ``.json``)."""
        return save_questions([self], path)

    @classmethod
    def load(cls, path: str | Path) -> Question:
        """Read a file holding exactly one question."""
        questions = load_questions(path)
        if len(questions) != 1:
            raise ValueError(f"path must hold exactly one question, got {len(questions)} in {path}")
        return questions[0]


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ValueError(f"path must end in .toml or .json, got {str(path)!r}")
    return suffix


def _as_path(path: Any) -> Path:
    if isinstance(path, (str, os.PathLike)):
        return Path(path)
    raise TypeError(f"path must be a file path (str or os.PathLike), got {type(path).__name__}")


def save_questions(questions: Sequence[Question], path: str | Path) -> Path:
    """Write questions to a ``.toml`` (``[[question]]`` tables) or ``.json`` file."""
    from . import _toml

    path = _as_path(path)
    suffix = _suffix(path)
    items = check_sequence(questions, "questions", "Question")
    if not items or not all(isinstance(q, Question) for q in items):
        raise TypeError(f"questions must be a non-empty sequence of Question, got {questions!r}")
    names = [q.name for q in items]
    if len(set(names)) != len(names):
        raise ValueError(f"questions must have distinct names, got {names}")
    doc = {"question": [q.to_dict() for q in items]}
    text = _toml.dumps(doc) if suffix == ".toml" else json.dumps(doc, indent=2) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def load_questions(path: str | Path) -> list[Question]:
    """Read the questions of a ``.toml`` or ``.json`` file written by :func:`save_questions`.

    The file holds a list ``question`` of tables (``[[question]]`` in TOML); a collector
    config may hold other tables beside it, which are ignored here.
    """
    import tomllib

    path = _as_path(path)
    suffix = _suffix(path)
    if not path.is_file():
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    text = path.read_text(encoding="utf-8")
    try:
        doc = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"path must hold valid {suffix[1:].upper()}, got {exc}") from None
    items = doc.get("question") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ValueError(f"path must hold a non-empty 'question' list, got none in {path}")
    questions = [Question.from_dict(item) for item in items]
    names = [q.name for q in questions]
    if len(set(names)) != len(names):
        raise ValueError(f"questions must have distinct names, got {names}")
    return questions
