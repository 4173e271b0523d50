"""The kinds of collection the collector serves: one class per kind of estimate.

A kind names itself from a spec (:meth:`Kind.serves`, asked once when the config is
loaded, on the Stats of a small sample of reports) and fills the estimate's answer
(:meth:`Kind.fill`, :class:`~ldpkit.service.models.EstimateResult`). Decoding, committing,
storing and reading never look at the kind: they only see ``Reports`` and ``Stats``.

Today's kinds: ``frequency`` (a closed domain's frequency oracle; set-valued users'
PaddingSampling and PrivSet too), ``distribution``, ``mean``, ``key_value`` (PCKV, PrivKV:
per-key frequencies and means), ``open_frequency`` (CMS, HCMS, FLH over an open domain: the
answer is about the candidates the reader names) and ``heavy_hitters`` (PEM, TreeHist, SFP:
the answer is the strings the server's search discovers). A new kind is one class here, added to
:data:`KINDS`.
"""

import dataclasses
import hashlib
import threading
import warnings
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np
from fastapi import HTTPException

from ..estimate import FrequencyEstimate, IntervalWarning
from ..frequency._open import OpenDomainOracle
from ..numeric.distribution import Distribution
from ..numeric.mean import MeanEstimate
from ..spec import Mechanism, Stats
from .models import DistributionResult, EstimateResult, LongitudinalInfo, TopItem
from .multidim import (
    is_multidim_estimate,
    multidim_check,
    multidim_fill,
    probe_size,
    refuse_multidim,
)

# Distribution.postprocess methods (biased, but a proper distribution with quantiles).
DISTRIBUTION_POSTPROCESS = ("cdf", "norm_sub", "norm_mul")


QUANTILES = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


#: Most candidates one estimate request may name (each costs one hash per sketch row).
MAX_CANDIDATES = 10_000
#: Largest body (bytes) a POST of candidates may send: read under this cap before any
#: parsing, so a huge JSON list costs the collector neither memory nor parse time.
MAX_CANDIDATES_BODY = 1 << 20


@dataclasses.dataclass(frozen=True)
class EstimateQuery:
    """What a reader asked of an estimate, beyond the time window."""

    alpha: float = 0.05
    postprocessing: str | None = None
    bootstrap: int = 0
    candidates: list[Any] | None = None
    top_k: int | None = None
    control: str | None = None
    #: multi-attribute collections: the marginal's attributes, and a range query's box
    marginal: tuple[int, ...] | None = None
    ranges: dict[int, tuple[float, float]] | None = None


def sample_inputs(spec: Mechanism) -> list[Any]:
    """Return values to try on ``spec.randomize`` when probing it.

    64 evenly spaced reals (for a spec with ``low``/``high``), item numbers, or zeros.
    """
    low, high = getattr(spec, "low", None), getattr(spec, "high", None)
    out: list[Any] = []
    if isinstance(low, (int, float)) and isinstance(high, (int, float)):
        out.append(np.linspace(float(low), float(high), 64))
    out += [np.arange(64) % max(int(getattr(spec, "domain_size", 2) or 2), 1), np.zeros(64)]
    alphabet = getattr(spec, "alphabet", None)
    chars = alphabet if isinstance(alphabet, str) and alphabet else "ab"
    out.append(np.array([chars[: 1 + i % 3] for i in range(64)], dtype=object))  # strings
    if hasattr(spec, "_contract_values"):  # sets, key-value pairs, tuples: the spec's own sample
        out.append(spec._contract_values(probe_size(spec), np.random.default_rng(0)))
    return out


class Kind:
    """One kind of collection (abstract): how it is recognized and how it is answered."""

    name: ClassVar[str]
    #: Whether the reader may (or, for an open domain, must) name candidates.
    takes_candidates: ClassVar[bool] = False
    #: Whether the answer can list the ``top_k`` most frequent items.
    has_top: ClassVar[bool] = False

    def postprocessing(self) -> list[str]:
        """Values of the ``postprocessing`` parameter this kind accepts."""
        return []

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Whether this kind serves ``spec`` (``stats``: a small sample's Stats)."""
        raise NotImplementedError

    def check(self, spec: Mechanism, query: EstimateQuery) -> None:
        """422 for a query this kind cannot answer (before any read of the store)."""
        allowed = self.postprocessing()
        if query.postprocessing is not None and query.postprocessing not in allowed:
            raise HTTPException(
                422,
                f"postprocessing must be one of {allowed} for a {self.name} "
                f"collection, got {query.postprocessing!r}",
            )
        if query.candidates is not None and not self.takes_candidates:
            raise HTTPException(
                422,
                f"candidates must be left out for a {self.name} collection (only open-domain "
                f"collections take them), got {len(query.candidates)}",
            )
        if query.top_k is not None and not self.has_top:
            raise HTTPException(
                422, f"top_k must be left out for a {self.name} collection, got {query.top_k}"
            )
        if query.control is not None and not isinstance(self, HeavyHittersKind):
            raise HTTPException(
                422,
                f"control must be left out for a {self.name} collection (only heavy-hitter "
                f"collections take it), got {query.control!r}",
            )
        if not isinstance(self, MultidimKind):  # marginal=, range=: 422 naming them
            refuse_multidim(self.name, query)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Estimate from ``stats`` (n > 0) and write the answer's fields into ``result``."""
        raise NotImplementedError


def _top(result: EstimateResult, est: FrequencyEstimate, items: list[Any], k: int | None) -> None:
    """Fill in the k most frequent of ``items`` (ties in item order), with intervals."""
    if k is None:
        return
    assert result.ci_low is not None and result.ci_high is not None
    order = np.argsort(-np.asarray(est.frequencies), kind="stable")[:k]
    result.top = [
        TopItem(
            item=items[i],
            frequency=float(est.frequencies[i]),
            std_error=float(est.std_error[i]),
            ci_low=result.ci_low[i],
            ci_high=result.ci_high[i],
        )
        for i in order.tolist()
    ]


def _frequency_fields(result: EstimateResult, est: FrequencyEstimate, alpha: float) -> None:
    with warnings.catch_warnings():  # biased after post-processing: NaN -> null
        warnings.simplefilter("ignore", IntervalWarning)
        low, high = est.confidence_interval(alpha)
    result.postprocessing = list(est.postprocessing)
    result.frequencies = est.frequencies.tolist()
    result.std_errors = est.std_error.tolist()
    result.ci_low = low.tolist()
    result.ci_high = high.tolist()


class FrequencyKind(Kind):
    """A frequency oracle over a closed domain: one frequency per item (labels if any)."""

    name = "frequency"
    has_top = True

    def postprocessing(self) -> list[str]:
        """Return the consistency methods this kind accepts."""
        from ..consistency import METHODS

        return sorted(METHODS)

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec``'s estimate is a FrequencyEstimate."""
        return isinstance(spec.estimate(stats), FrequencyEstimate)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the frequency estimate, its intervals and top items into ``result``."""
        from ..consistency import METHODS

        est = spec.estimate(stats)
        if query.postprocessing is not None:
            est = METHODS[query.postprocessing](est)
        _frequency_fields(result, est, query.alpha)
        if query.top_k is not None:
            labels = result.labels or list(range(len(est.frequencies)))
            _top(result, est, list(labels), query.top_k)


class OpenFrequencyKind(Kind):
    """An open-domain frequency oracle (CMS, HCMS, FLH with ``domain_size=None``).

    The reader names the candidates; the answer is their frequencies (``labels`` = the
    candidates), intervals and, with ``top_k``, the most frequent of them.
    """

    name = "open_frequency"
    takes_candidates = True
    has_top = True

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec`` is an open-domain oracle that estimates candidates."""
        if not isinstance(spec, OpenDomainOracle) or spec.domain_size is not None:
            return False
        spec.estimate(stats, candidates=[0, "a"])  # raises if it cannot answer
        return True

    def check(self, spec: Mechanism, query: EstimateQuery) -> None:
        """Refuse a query without candidates (400)."""
        super().check(spec, query)
        if query.candidates is None:
            raise HTTPException(
                422,
                "candidates must be given for an open-domain collection (GET ?candidates=a,b,c "
                "or POST a JSON list), got none",
            )
        if len(query.candidates) > MAX_CANDIDATES:
            raise HTTPException(
                422,
                f"candidates must be at most {MAX_CANDIDATES} items, got {len(query.candidates)}",
            )
        from ..frequency._items import candidate_list

        try:
            candidate_list(query.candidates)
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the candidates' estimate, intervals and top items into ``result``."""
        assert query.candidates is not None  # check() ran
        est = spec.estimate(stats, candidates=query.candidates)  # type: ignore[call-arg]
        _frequency_fields(result, est, query.alpha)
        result.labels = list(query.candidates)
        _top(result, est, list(query.candidates), query.top_k)


#: Values of the ``control`` query parameter: the error control of a discovery's list.
CONTROLS = {"none": None, "fwer": "fwer", "fdr": "fdr"}
#: Searches kept per process: a dashboard polling an unchanged window asks for the same
#: search every few seconds, and one search costs seconds of CPU.
MAX_CACHED_SEARCHES = 32


def _stats_digest(stats: Stats) -> bytes:
    """Digest the Stats' counts (the search's only input besides the spec)."""
    digest = hashlib.blake2b(str(stats.n).encode(), digest_size=16)
    for name in sorted(stats.arrays):
        arr = np.ascontiguousarray(stats.arrays[name])
        digest.update(f"{name}{arr.dtype.str}{arr.shape}".encode())
        digest.update(arr.tobytes())
    return digest.digest()


class HeavyHittersKind(Kind):
    """Open-vocabulary discovery (PEM, TreeHist, SFP): the strings the server finds.

    The server searches the rolled-up Stats and answers the discovered strings, most
    frequent first (``labels``, ``top``), with frequencies, standard errors and intervals.

    The search runs on the server only, so the reader may change its server-side
    parameters per request without touching the reports: ``top_k`` (how many strings),
    ``alpha`` and ``control`` (``none``, ``fwer`` or ``fdr``: the error control over every
    candidate the search tested, :class:`ldpkit.discovery.HeavyHitters`). The answer is
    ``spec.replace(top_k=, alpha=, control=).estimate(stats)``, the offline estimate.
    """

    name = "heavy_hitters"
    has_top = True

    def __init__(self) -> None:
        """Start with an empty cache of searches (keyed by the spec and the counts)."""
        self._found: OrderedDict[tuple[str, bytes], Any] = OrderedDict()
        self._lock = threading.Lock()

    def search(self, asked: Mechanism, stats: Stats) -> Any:
        """Return ``asked.estimate`` of the counts of ``stats``, cached for equal counts."""
        key = (asked.fingerprint, _stats_digest(stats))
        with self._lock:
            if key in self._found:
                self._found.move_to_end(key)
                return self._found[key]
        # the reports do not depend on the server-side parameters: the same counts
        found = asked.estimate(Stats._exact(asked, stats.n, dict(stats.arrays)))
        with self._lock:
            self._found[key] = found
            while len(self._found) > MAX_CACHED_SEARCHES:
                self._found.popitem(last=False)
        return found

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec`` is a discovery spec whose estimate is a HeavyHitters."""
        from ..discovery import SFP
        from ..discovery.prefix import PrefixDiscovery

        # by class alone: these estimates are always a HeavyHitters (check_mechanism checks
        # it for every registered spec), and a search on the probe's few reports took 3-8 s
        # of the collector's start-up per collection
        return isinstance(spec, (PrefixDiscovery, SFP))

    def query_spec(self, spec: Mechanism, query: EstimateQuery) -> Mechanism:
        """Return the spec whose estimate answers ``query`` (422 if the spec refuses a value)."""
        changes: dict[str, Any] = {"alpha": query.alpha}
        if query.top_k is not None:
            changes["top_k"] = query.top_k
        if query.control is not None:
            changes["control"] = CONTROLS[query.control]
        try:
            return dataclasses.replace(spec, **changes)  # type: ignore[type-var]
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None

    def check(self, spec: Mechanism, query: EstimateQuery) -> None:
        """Refuse (422) a query a discovery cannot answer, before any read of the store."""
        super().check(spec, query)
        if query.control is not None and query.control not in CONTROLS:
            raise HTTPException(
                422, f"control must be one of {sorted(CONTROLS)}, got {query.control!r}"
            )
        self.query_spec(spec, query)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the strings the query's search finds in ``stats`` into ``result``."""
        asked = self.query_spec(spec, query)
        found = self.search(asked, stats)
        low, high = found.confidence_interval()
        result.labels = list(found.items)
        result.frequencies = found.frequencies.tolist()
        result.std_errors = found.std_error.tolist()
        result.ci_low, result.ci_high = low.tolist(), high.tolist()
        result.control = asked.control  # type: ignore[attr-defined]
        result.tested = int(found.tested)
        result.top = [
            TopItem(
                item=item,
                frequency=float(f),
                std_error=float(e),
                ci_low=float(lo),
                ci_high=float(hi),
            )
            for item, f, e, lo, hi in zip(
                found.items, found.frequencies, found.std_error, low, high
            )
        ]


class DistributionKind(Kind):
    """A numerical distribution (masses of equal-width buckets, quantiles, intervals)."""

    name = "distribution"

    def postprocessing(self) -> list[str]:
        """Return the distribution post-processing methods this kind accepts."""
        return list(DISTRIBUTION_POSTPROCESS)

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec``'s estimate is a Distribution."""
        return isinstance(spec.estimate(stats), Distribution)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the distribution, its mean and quantiles into ``result``."""
        est = spec.estimate(stats)
        if query.postprocessing is not None:
            if not hasattr(est, "postprocess"):
                raise HTTPException(
                    422, f"postprocessing is not available for {spec!r}'s distribution"
                )
            est = est.postprocess(query.postprocessing)
        signed = bool(getattr(est, "signed", False))
        quantiles = None
        if not signed:
            try:
                quantiles = {f"{q:g}": float(est.quantile(q)) for q in QUANTILES}
            except ValueError:  # masses that are not a distribution yet
                quantiles = None
        result.postprocessing = list(getattr(est, "postprocessing", ()))
        result.distribution = DistributionResult(
            low=float(est.low),
            high=float(est.high),
            probabilities=est.probabilities.tolist(),
            mean=est.mean(),
            quantiles=quantiles,
            signed=signed,
        )
        _distribution_intervals(result.distribution, est, query.alpha, query.bootstrap)
        result.mean = est.mean()


class MeanKind(Kind):
    """A mean with its normal-approximation interval."""

    name = "mean"

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec``'s estimate is a MeanEstimate."""
        return isinstance(spec.estimate(stats), MeanEstimate)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the mean and its interval into ``result``."""
        est = spec.estimate(stats)
        interval = est.confidence_interval(query.alpha)
        result.mean = float(est.mean)
        result.std_error = float(est.std_error)
        result.ci_low, result.ci_high = [float(interval[0])], [float(interval[1])]


class MultidimKind(Kind):
    """Several attributes per user (:mod:`ldpkit.multidim`): answered by :mod:`.multidim`."""

    name = "multidim"

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Tell whether ``spec``'s estimate is a multi-attribute estimate."""
        return is_multidim_estimate(spec.estimate(stats))

    def check(self, spec: Mechanism, query: EstimateQuery) -> None:
        """Refuse (422) a marginal or range the spec cannot answer, before any read."""
        super().check(spec, query)
        multidim_check(spec, query)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the marginals, range answer or group means into ``result.multidim``."""
        multidim_fill(result, spec, stats, query)


class KeyValueKind(Kind):
    """Key-value pairs (PCKV, PrivKV): per key, the frequency and the mean value.

    Each with its standard error and normal interval (the mean's null where the key's count
    is too uncertain for one, see :meth:`ldpkit.sets.KeyValueEstimate.mean_interval`).
    """

    name = "key_value"
    has_top = True

    def serves(self, spec: Mechanism, stats: Stats) -> bool:
        """Whether ``spec`` estimates a :class:`ldpkit.sets.KeyValueEstimate`."""
        from ..sets.keyvalue import KeyValueEstimate

        return isinstance(spec.estimate(stats), KeyValueEstimate)

    def fill(
        self, result: EstimateResult, spec: Mechanism, stats: Stats, query: EstimateQuery
    ) -> None:
        """Write the per-key frequencies, means, intervals (and ``top``) into ``result``."""
        est = spec.estimate(stats)
        low, high = est.frequency_interval(query.alpha)
        with warnings.catch_warnings():  # NaN -> null where the ratio has no interval
            warnings.simplefilter("ignore", IntervalWarning)
            m_low, m_high = est.mean_interval(query.alpha)
        result.postprocessing = []
        result.frequencies = est.frequencies.tolist()
        result.std_errors = np.sqrt(est.frequency_variance).tolist()
        result.ci_low, result.ci_high = low.tolist(), high.tolist()
        result.means = est.means.tolist()
        result.mean_std_errors = np.sqrt(est.mean_variance).tolist()
        result.mean_ci_low = [None if np.isnan(x) else float(x) for x in m_low]
        result.mean_ci_high = [None if np.isnan(x) else float(x) for x in m_high]
        result.long_share = est.long_share
        if est.debiased_means is not None:  # PrivKV(M): what the mean interval is around
            assert est.debiased_mean_variance is not None
            result.debiased_means = est.debiased_means.tolist()
            result.debiased_mean_std_errors = np.sqrt(est.debiased_mean_variance).tolist()
        if query.top_k is not None:
            labels = result.labels or list(range(est.domain_size))
            k = min(query.top_k, est.domain_size)
            order = np.argsort(-est.frequencies, kind="stable")[:k]
            se = np.sqrt(est.frequency_variance)
            result.top = [
                TopItem(
                    item=labels[i],
                    frequency=float(est.frequencies[i]),
                    std_error=float(se[i]),
                    ci_low=float(low[i]),
                    ci_high=float(high[i]),
                )
                for i in order.tolist()
            ]


#: Every kind, asked in this order (the open-domain and discovery kinds first: the former's
#: plain ``estimate`` needs candidates, the latter's is a search, run once).
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        OpenFrequencyKind(),
        FrequencyKind(),
        DistributionKind(),
        MeanKind(),
        HeavyHittersKind(),
        MultidimKind(),
        KeyValueKind(),
    )
}


def kind_of(spec: Mechanism, stats: Stats) -> Kind:
    """Return the kind serving ``spec``; ValueError naming what the collector can serve."""
    for first in ("open_frequency", "heavy_hitters"):  # their plain estimate is not reused
        if KINDS[first].serves(spec, stats):
            return KINDS[first]
    try:
        est = spec.estimate(stats)
    except Exception as exc:
        raise ValueError(f"collection spec {spec!r} must produce an estimate, got {exc}") from exc
    for kind in KINDS.values():
        if kind.name not in ("open_frequency", "heavy_hitters") and kind.serves(spec, stats):
            return kind
    raise ValueError(
        f"collection spec {spec!r} must estimate frequencies, a distribution, a mean or "
        f"key-value pairs (or discover heavy hitters), got {type(est).__name__}; aggregate it "
        "offline with ldpkit.distributed instead"
    )


def _distribution_intervals(
    out: DistributionResult, est: Distribution, alpha: float, bootstrap: int
) -> None:
    """Fill the interval fields of ``out`` (left null, with a note, when there are none)."""
    method = est.interval_method
    if method is None:
        out.interval_note = est.interval_status()
        return
    if method == "bootstrap":
        if bootstrap < 2:
            out.interval_note = (
                "EM/EMS intervals come from a parametric bootstrap (2 B + 1 estimator runs): "
                "ask with bootstrap=B, e.g. 200"
            )
            return
        est = est.bootstrap(bootstrap, rng=0)  # the same intervals for the same reports
    qs = np.asarray(QUANTILES)
    with warnings.catch_warnings():  # "approximate": said in interval_note instead
        warnings.simplefilter("ignore", IntervalWarning)
        q_lo, q_hi = est.quantile_interval(qs, alpha)
        m_lo, m_hi = est.mean_interval(alpha)
        c_lo, c_hi = est.cdf_interval(est.edges[1:], alpha)
    approximate = est.interval_approximate()
    if approximate is not None:
        out.interval_note = f"approximate: {approximate}"
    out.interval_method = method
    out.mean_ci = [float(m_lo), float(m_hi)]
    out.quantile_ci = {f"{q:g}": [float(a), float(b)] for q, a, b in zip(qs, q_lo, q_hi)}
    out.cdf_low, out.cdf_high = np.asarray(c_lo).tolist(), np.asarray(c_hi).tolist()


#: Distinct values standing for "any number" when asking a spec its worst-case loss (every
#: memo key count the library's specs cap at is far below it).
_ANY_NUMBER = 1 << 40


def longitudinal_info(spec: Mechanism) -> LongitudinalInfo | None:
    """Return the budgets of ``spec`` if it reports repeated answers (None otherwise).

    A spec is longitudinal when it has ``longitudinal_privacy_loss`` (the L-protocols,
    LOLOHA, DBitFlipPM, OneBitMean).
    """
    loss = getattr(spec, "longitudinal_privacy_loss", None)
    one = getattr(spec, "privacy_loss", None)
    if loss is None or one is None:
        return None
    change = getattr(spec, "change_privacy_loss", None)
    return LongitudinalInfo(
        epsilon_1=float(one()),
        epsilon_inf=float(loss(1)),
        epsilon_change=float(change() if change is not None else loss(1)),
        epsilon_max=float(loss(_ANY_NUMBER)),
    )
