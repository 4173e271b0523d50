"""Write the shared test vectors of the JavaScript client (clients/js) from the Python side.

Run ``python tests/vectors/make_vectors.py`` after changing a randomizer, the hash family,
the bit packing or the JSON wire format; ``tests/test_js_client.py`` fails while the files
are stale. Each file holds inputs and what the Python implementation makes of them:

- ``hashing.json``: OLH's hash parameters and hashes of given seeds and items, and
  ``optimal_hash_range`` at given epsilons;
- ``unary.json``: the unary samplers' resolution (``PROBABILITY_SCALE``), OUE's integer
  thresholds and privacy losses over a sweep of epsilons, and ``np.packbits`` rows;
- ``coins.json``: the exact randomized-response coins: ``rr_weights`` over a
  sweep of epsilons and numbers of other outputs (GRR's d - 1, OLH's g - 1, HR's 1), with
  the realized loss (or an error where the weights do not fit 2^62), and the uniform
  integer U in [0, T) that the client's rejection rule makes of given 64-bit words;
- ``bodies.json``: per mechanism, values and fixed 64-bit words and the JSON body
  (``ldpkit.io.reports_to_dict``, seeds as decimal strings) those words give, the Python
  samplers replayed on them in the client's order (GRR: U per user; OLH: seed, then U;
  HR: the column word, then U; OUE: one word per bit);
- ``numeric.json``: the exact grids of the numerical mechanisms over a sweep of
  epsilons (integer weights as decimal strings, slopes, privacy losses; the log-scale
  SquareWave's ``log_span``), and bodies as in
  ``bodies.json`` for SquareWave, DiscreteSquareWave, StochasticRounding,
  PiecewiseMechanism and HybridMechanism. The client draws the uniform integer U in [0, T)
  of a grid law from 64-bit words by rejection (``w < floor(2^64 / T) T`` gives
  ``U = w mod T``, else the next word); the Python samplers are replayed here with those U
  and uniforms, user by user in the client's order;
- ``longitudinal.json``: the longitudinal specs' integer laws (L-GRR's weights,
  the chained unary thresholds) and losses; a device secret and, per spec and value, the
  permanent answer :class:`ldpkit.Device` derives (HMAC-SHA256 counter-mode words); and
  reports of fixed words (permanent round from the first words, then the instantaneous
  round: L-GRR one U, a unary encoding one word per bit);
  DBitFlipPM and OneBitMean likewise (``memoized_laws``, ``memoized_bodies``; the device's
  states: DBitFlipPM's sampled buckets, OneBitMean's alpha, LOLOHA's seed);
- ``sets.json``: bodies as in ``bodies.json`` for PaddingSampling (GRR, OLH), PCKV (UE,
  GRR), PrivKV (PrivKVM rounds too) and PrivSet (:mod:`ldpkit.sets`): values (item lists,
  or ``[key, value]`` pairs), fixed uniforms and 64-bit words, and the body the Python
  samplers make of them, run on one user at a time so that their draws come in the
  client's order (a ``permuted`` row is a Fisher-Yates shuffle of the replayed words); and
  the spec's ``privacy_loss()`` (correctly rounded on exact rationals; not PrivKV's, a
  numpy log);
- ``sketch.json``: the open-domain oracles (CMS, HCMS, FLH): BLAKE2b digests of
  given bytes (hashlib), item keys (format ``ldpkit.item/1``: the tagged bytes and the key,
  integers as decimal strings), the public row hashes, CMS's integer thresholds and losses
  and FLH's default hash range over a sweep of epsilons, and bodies as in ``bodies.json``
  (CMS: the row U, then one word per bit; HCMS: the row U, the coefficient U, then the keep
  coin U; FLH: the row U, then GRR's U);
- ``discovery.json``: the one-round discovery specs (PEM, TreeHist, SFP;
  :mod:`ldpkit.discovery`): strings to symbol grids (UTF-8 cut at a whole character, or a
  given alphabet; padding and NUL), the 64-bit key of each prefix, the public seeds of a
  group's hash family and hashes of keys, each prefix spec's g, H, integer GRR weights and
  loss, SFP's realized loss, and bodies as in ``bodies.json`` (PEM, TreeHist: the group U,
  the hash U, then GRR's U; SFP: the position U, then the fragment sketch's words, then
  the whole-string sketch's, as in ``sketch.json``); integer arithmetic only (splitmix64,
  exact weights, BLAKE2b), so the same on every CPU;
- ``multidim.json``: several attributes per user (:mod:`ldpkit.multidim`): bodies as in
  ``bodies.json`` for SPL, SMP, RSFD (GRR, OUE-z), CALM (GRR, OLH), FullDomain (HR, OLH),
  HDG, TDG, UniformGrid, GroupMean (GRR, OLH) and AttributeSampling (HM with and without
  its PM branch, PM, GRR columns), DuchiMean (d = 2 to 32) and LaplaceMean (the geometric
  counts' coin rounds) and Fourier (bit set, then the parity's flip; their own samplers
  are the client's order), the samplers replayed user by user in the
  client's order (clients/js/src/multidim.js); RSFD OUE-z's integer thresholds; SPL and SMP
  also through their own ``randomize`` on the replayed coins;
- ``encoding.json``: encoders (``Encoder.to_dict()``), labels and the items
  ``Encoder.encode`` gives them (or that it refuses them), and questions
  (``Question.to_dict()``) with their spec and question fingerprints and prepared answers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit import Encoder, Question, _crmath
from ldpkit._exact import (
    RR_MAX_EPSILON,
    coin,
    ratio_loss,
    round_to_grid,
    rr_weights,
    sample_flat_bump,
)
from ldpkit.frequency import CMS, FLH, GRR, HCMS, OLH, OUE, HadamardResponse
from ldpkit.frequency._base import index_dtype
from ldpkit.frequency._items import ITEM_KEY_FORMAT, item_key, item_keys, row_hash
from ldpkit.frequency.grr import grr_sample
from ldpkit.frequency.hashing import hash_parameters, local_hash, optimal_hash_range
from ldpkit.frequency.sketch import _cms_thresholds
from ldpkit.frequency.unary import PROBABILITY_SCALE
from ldpkit.io import reports_to_dict
from ldpkit.numeric import (
    AutoDistribution,
    DiscreteSquareWave,
    HierarchicalHistogram,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    StochasticRounding,
)
from ldpkit.numeric.auto import hh_top_level
from ldpkit.numeric.mean import _report_tables
from ldpkit.sets import PCKV, PaddingSampling, PrivKV, PrivSet, UserPairs, UserSets
from ldpkit.sets._input import sample_padded
from ldpkit.spec import Mechanism, Reports, mechanism_registry

HERE = Path(__file__).resolve().parent
_U64 = np.iinfo(np.uint64).max


def _hashing() -> dict[str, Any]:
    rng = np.random.default_rng(20261123)
    seeds = np.concatenate(
        [
            np.array([0, 1, 2, 3, _U64, 1 << 63], dtype=np.uint64),
            rng.integers(0, _U64, 10, dtype=np.uint64, endpoint=True),
        ]
    )
    items = [0, 1, 7, 1000, (1 << 32) - 1]
    ranges = [2, 3, 4, 56, 1000, (1 << 32) - 5, 1 << 32]
    a, b = hash_parameters(seeds)
    hashes = [
        {"range": g, "hashes": local_hash(seeds[:, None], np.array(items)[None, :], g).tolist()}
        for g in ranges
    ]
    eps = [0.1, 0.38, 0.5, 1.0, 2.0, 4.0, 8.0, 22.0, 23.0]
    return {
        "seeds": [str(s) for s in seeds.tolist()],
        "a": [str(x) for x in a.tolist()],
        "b": [str(x) for x in b.tolist()],
        "items": items,
        "cases": hashes,
        "optimal_hash_range": [{"epsilon": e, "g": optimal_hash_range(e)} for e in eps],
    }


#: Budgets of the weight/threshold sweeps: the edges, round and awkward values, random ones.
_EPS_SWEEP = [1e-6, 1.5e-6, 1e-4, 1e-3, 0.05, 0.1, 0.3, 0.5, 0.61, 0.75, 1.0, 1.3, 2.0, 2.5]
_EPS_SWEEP += [3.7, 5.0, 8.0, 12.5, 20.0, 22.0, 23.0, 25.0, 29.9, 30.0]
_EPS_SWEEP += [float(x) for x in np.round(np.random.default_rng(17).uniform(1e-6, 30.0, 40), 7)]


def _unary() -> dict[str, Any]:
    thresholds = []
    for e in _EPS_SWEEP:
        spec = OUE(epsilon=e, domain_size=4)
        big, small = spec._thresholds()
        loss = spec.privacy_loss()
        thresholds.append({"epsilon": e, "true": str(big), "other": str(small), "loss": loss})
    rng = np.random.default_rng(7)
    rows = [rng.integers(0, 2, d).tolist() for d in (1, 7, 8, 9, 16, 23)]
    packed = [np.packbits(np.array(r, dtype=np.uint8)).tolist() for r in rows]
    return {
        "probability_scale": str(PROBABILITY_SCALE),
        "thresholds": thresholds,
        "rows": rows,
        "packed": packed,
    }


def _coins() -> dict[str, Any]:
    others = [1, 2, 3, 5, 99, 255, 299, (1 << 20) - 1, (1 << 32) - 1, (1 << 40) - 1, 1 << 45]
    others += [1 << 62]  # overflows the 2^62 total at every epsilon: an error case
    weights = []
    for e in [*_EPS_SWEEP, 33.3, 35.0, 39.9, RR_MAX_EPSILON]:
        for n_others in others:
            case: dict[str, Any] = {"epsilon": e, "n_others": n_others}
            try:
                w_keep, w_other = rr_weights(e, n_others)
            except ValueError:  # e^eps and n_others unit weights do not fit 2^62
                case["error"] = True
            else:
                case.update(
                    w_keep=str(w_keep), w_other=str(w_other), loss=ratio_loss(w_other, w_keep)
                )
            weights.append(case)
    rng = np.random.default_rng(19)
    totals = [1, 2, 3, 7, 1000, (1 << 32) + 1, (1 << 62) - 1, 1 << 62, 3 << 60]
    totals += [int(x) for x in rng.integers(1, 1 << 62, 6, dtype=np.int64)]
    draws = []
    for total in totals:
        # a few words at or above the rejection limit first, so that rejection is exercised
        limit = ((1 << 64) // total) * total
        words = [_U64, limit] if limit <= _U64 else []
        words += [int(w) for w in rng.integers(0, _U64, 6, dtype=np.uint64, endpoint=True)]
        replay = _ReplayCoins([], words)
        got = []
        while replay.words:
            w = replay.words[0]
            if w >= limit:
                replay.words.pop(0)
                got.append(None)  # rejected
            else:
                got.append(str(replay.below(total)))
        draws.append({"total": str(total), "words": [str(w) for w in words], "u": got})
    return {"rr_weights": weights, "uniform_below": draws}


def _body(reports: Reports) -> dict[str, Any]:
    body = reports_to_dict(reports)
    if "seeds" in body["arrays"]:
        seeds = body["arrays"]["seeds"]
        seeds["data"] = [str(s) for s in seeds["data"]]
    return body


def _bodies() -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    out = []
    for spec, n in (
        (GRR(epsilon=1.0, domain_size=5), 40),
        (GRR(epsilon=0.5, domain_size=300), 40),
        (GRR(epsilon=35.0, domain_size=3), 20),
        (OUE(epsilon=1.0, domain_size=11), 6),
        (OUE(epsilon=2.0, domain_size=16), 6),
        (OLH(epsilon=1.0, domain_size=10, mix_items=False), 40),
        (OLH(epsilon=3.0, domain_size=1000, hash_range=300, mix_items=False), 40),
        (HadamardResponse(epsilon=1.0, domain_size=6), 40),
        (HadamardResponse(epsilon=0.7, domain_size=300), 40),
        (HadamardResponse(epsilon=1e-6, domain_size=3), 20),
        # appended (the cases above keep their draws): OLH hashing the items' mixed keys
        (OLH(epsilon=2.0, domain_size=40, mix_items=True), 40),
    ):
        d = spec.domain_size
        values = rng.integers(0, d, n)
        words_per_user = d if isinstance(spec, OUE) else 3  # room for rejected words
        words: list[int] = rng.integers(
            0, _U64, n * words_per_user, dtype=np.uint64, endpoint=True
        ).tolist()
        if isinstance(spec, OUE):
            big, small = spec._thresholds()
            w = np.array(words, dtype=np.uint64).reshape(n, d)
            onehot = np.arange(d)[None, :] == values[:, None]
            thresholds = np.where(onehot, np.uint64(big), np.uint64(small))
            reports = Reports(spec, bits=np.packbits(w < thresholds, axis=1))
        else:
            coins = _ReplayCoins([], words)
            ys, seeds = [], []
            for v in values.tolist():
                one = np.array([v], dtype=np.int64)
                if isinstance(spec, GRR):
                    ys.append(grr_sample(one, d, spec._weights(), coins)[0])  # type: ignore[arg-type]
                elif isinstance(spec, OLH):
                    seed = np.array([coins.words.pop(0)], dtype=np.uint64)
                    hashed = spec.hash_items(seed, one)
                    seeds.append(seed[0])
                    ys.append(grr_sample(hashed, spec.range_size, spec._weights(), coins)[0])  # type: ignore[arg-type]
                else:
                    j = coins.words.pop(0) & (spec.hadamard_size - 1)
                    w_keep, w_flip = rr_weights(spec.epsilon, 1)
                    want_inside = bool(coin(coins, 1, w_keep, w_keep + w_flip)[0])  # type: ignore[arg-type]
                    inside = (int(v + 1) & j).bit_count() % 2 == 0
                    ys.append(j ^ ((v + 1) & -(v + 1)) if inside != want_inside else j)
            dtype = spec.randomize([0], rng=0).values.dtype
            y = np.array(ys, dtype=np.int64).astype(dtype)
            if seeds:
                reports = Reports(spec, seeds=np.array(seeds, dtype=np.uint64), values=y)
            else:
                reports = Reports(spec, values=y)
        out.append(
            {
                "values": values.tolist(),
                "words": [str(x) for x in words],
                "body": _body(reports),
            }
        )
    return out


class _ReplayCoins:
    """A Generator stand-in replaying the client's coins: ``random`` pops uniforms,
    ``integers(0, T)`` makes each U from 64-bit words by the client's rejection rule."""

    def __init__(self, uniforms: list[float], words: list[int]) -> None:
        self.uniforms = list(uniforms)
        self.words = list(words)

    def random(self, n: int) -> np.ndarray:
        out, self.uniforms = self.uniforms[:n], self.uniforms[n:]
        assert len(out) == n, "ran out of uniforms"
        return np.array(out, dtype=np.float64)

    def below(self, total: int) -> int:
        limit = ((1 << 64) // total) * total
        while True:
            w = self.words.pop(0)
            if w < limit:
                return w % total

    def integers(self, low: int, high: Any, size: Any = None, dtype: Any = np.int64) -> np.ndarray:
        assert low == 0
        if size is None:  # one U per entry of an array of totals (sample_padded), in order
            return np.array([self.below(int(h)) for h in np.ravel(high)], dtype=np.int64)
        shape = (size,) if isinstance(size, int) else tuple(size)
        count = int(np.prod(shape))
        return np.array([self.below(int(high)) for _ in range(count)], dtype=np.int64).reshape(
            shape
        )

    def permuted(self, x: Any, axis: int = -1) -> np.ndarray:
        """Shuffle each row: Fisher-Yates from the last slot down (U below i + 1)."""
        assert axis in (1, -1)
        out = np.array(x, copy=True)
        for row in out:
            for i in range(row.size - 1, 0, -1):
                j = self.below(i + 1)
                row[i], row[j] = row[j], row[i]
        return out


def _numeric_grids() -> dict[str, Any]:
    eps = [1e-6, 1e-3, 0.05, 0.3, 0.5, 0.61, 0.6100001, 0.75, 1.0, 1.3, 2.0, 2.5, 3.7]
    eps += [5.0, 8.0, 12.5, 20.0, 29.9, 30.0]
    eps += [float(x) for x in np.round(np.random.default_rng(5).uniform(0.01, 10.0, 40), 6)]
    sw, pm, hm, dsw = [], [], [], []
    for e in [*eps, 35.0, 40.0]:
        for params in ({}, {"buckets": 64}, {"buckets": 7, "bandwidth": 0.1}):
            try:
                s = SquareWave(epsilon=e, **params)  # type: ignore[arg-type]
            except ValueError:  # a wide explicit bandwidth at large epsilon overflows 2^62
                refused = SquareWave(epsilon=1.0, **params).to_dict()["params"]  # type: ignore[arg-type]
                sw.append({"params": {**refused, "epsilon": e}, "error": True})
                continue
            g = s._grid
            sw.append(
                {
                    "params": s.to_dict()["params"],
                    "steps": g.steps,
                    "half": g.half,
                    "w_low": str(g.w_low),
                    "extra": str(int(g.bump[0])),
                    "total": str(g.total),
                    "privacy_loss": s.privacy_loss(),
                }
            )
        for cells in (1 << 18, 64, 1000):
            p = PiecewiseMechanism(epsilon=e, report_cells=cells)
            g = p._grid
            pm.append(
                {
                    "params": p.to_dict()["params"],
                    "plateau": g.plateau,
                    "w_low": str(g.w_low),
                    "w_high": str(g.w_high),
                    "slope": g.slope,
                    "intercept": g.intercept,
                    "privacy_loss": p.privacy_loss(),
                }
            )
        dsw_spec = DiscreteSquareWave(epsilon=e, buckets=16)
        w_low, w_high = dsw_spec._weights
        dsw.append(
            {
                "params": dsw_spec.to_dict()["params"],
                "half_width": dsw_spec.half_width,
                "w_low": str(w_low),
                "w_high": str(w_high),
            }
        )
    for e in eps:
        h = HybridMechanism(epsilon=e)
        sr = h._sr._grid
        hm.append(
            {
                "params": h.to_dict()["params"],
                "pm_probability": h.pm_probability,
                "sr_w_low": str(sr.w_low),
                "sr_w_high": str(sr.w_high),
                "sr_magnitude": sr.magnitude,
                "privacy_loss": h.privacy_loss(),
            }
        )
    # the log scale (ToPL's threshold phase): Lambda, correctly rounded on both sides
    log = []
    for e, low, high, scale in [
        (1.0, 0.0, 1000.0, 1.0),
        (0.5, 0.0, 16470.0, 16470.0 / 1024),
        (2.0, -5.0, 3e5, 0.25),
        (4.0, 0.0, 1.0, 3.0),
        (0.05, 10.0, 1e12, 1e-3),
    ]:
        s = SquareWave(epsilon=e, low=low, high=high, buckets=64, log_scale=scale)
        log.append({"params": s.to_dict()["params"], "log_span": s.log_span})
    return {
        "square_wave": sw,
        "square_wave_log": log,
        "piecewise": pm,
        "hybrid": hm,
        "discrete_square_wave": dsw,
    }


def _numeric_report(spec: Mechanism, v: float, coins: _ReplayCoins) -> Any:
    """One user's report, the Python samplers driven in the client's coin order."""
    x = np.array([v], dtype=np.float64)
    if isinstance(spec, SquareWave):
        k = spec._grid_inputs(x, coins)  # type: ignore[arg-type]
        cell = spec._sample_cells(k, coins)  # type: ignore[arg-type]
        return float(spec.report_values()[cell[0]])
    if isinstance(spec, DiscreteSquareWave):
        w_low, w_high = spec._weights
        width = 2 * spec.half_width + 1
        item = np.array([int(v)], dtype=np.int64)
        cells = sample_flat_bump(item, spec.n_outputs, w_low, w_high - w_low, width, coins)  # type: ignore[arg-type]
        return int(cells[0])
    assert isinstance(spec, (StochasticRounding, PiecewiseMechanism, HybridMechanism))
    t = spec._to_unit(x)
    values = _report_tables(spec)[0]
    if isinstance(spec, HybridMechanism) and spec.pm_probability > 0.0:
        # the client flips the branch coin first, then draws only that branch
        if coins.random(1)[0] < spec.pm_probability:
            return float(values[spec._pm._sample_cells(t, coins)[0]])  # type: ignore[arg-type]
        return float(values[spec._sr._sample_cells(t, coins)[0] + spec.report_cells])  # type: ignore[arg-type]
    return float(values[spec._sample_cells(t, coins)[0]])  # type: ignore[arg-type]


def _numeric_bodies() -> list[dict[str, Any]]:
    rng = np.random.default_rng(13)
    out = []
    specs: list[Mechanism] = [
        SquareWave(epsilon=1.0, buckets=64),
        SquareWave(epsilon=0.5, low=-10.0, high=250.5, buckets=1000),
        SquareWave(epsilon=4.0, bandwidth=0.1, buckets=7),
        DiscreteSquareWave(epsilon=1.0, buckets=16),
        StochasticRounding(epsilon=1.0, low=0.0, high=10.0),
        PiecewiseMechanism(epsilon=1.0, low=0.0, high=120.0),
        PiecewiseMechanism(epsilon=2.0, report_cells=64),
        PiecewiseMechanism(epsilon=0.05, low=-1e6, high=3e6),
        HybridMechanism(epsilon=2.0, low=-3.0, high=5.0),
        HybridMechanism(epsilon=0.5),
        HybridMechanism(epsilon=1.0, report_cells=100),
        # last: the vectors above keep their coins
        SquareWave(epsilon=1.0, high=1000.0, buckets=64, log_scale=1.0),
        SquareWave(epsilon=0.5, low=-5.0, high=16470.0, buckets=1024, log_scale=16470.0 / 1024),
    ]
    for spec in specs:
        n = 40
        if isinstance(spec, DiscreteSquareWave):
            values: list[Any] = rng.integers(0, spec.buckets, n).tolist()
        elif isinstance(spec, SquareWave) and spec.log_scale is not None:
            # spread on the log scale (the grid's own), plus the ends and two grid values
            low, high, s = spec.low, spec.high, spec.log_scale
            grid = spec.grid_values()
            values = [low, high, float(grid[1]), float(grid[spec.input_steps // 2]), low + s]
            lam = spec.log_span
            assert lam is not None
            # correctly rounded expm1, never numpy's: its SIMD paths (AVX-512 vs AVX2) differ
            # in the last bit, and the inputs must be the same on every CPU
            values += [low + s * _crmath.expm1(lam * float(u)) for u in rng.random(n - 5)]
        else:
            low, high = spec.low, spec.high  # type: ignore[attr-defined]
            values = [low, high, low + (high - low) / 3.0]
            values += (low + (high - low) * rng.random(n - 3)).tolist()
        uniforms: list[float] = rng.random(3 * n).tolist()
        words = rng.integers(0, _U64, 3 * n, dtype=np.uint64, endpoint=True).tolist()
        coins = _ReplayCoins(uniforms, words)
        data = [_numeric_report(spec, v, coins) for v in values]
        dtype = spec.randomize([values[0]], rng=0).values.dtype
        body = _body(Reports(spec, values=np.array(data, dtype=dtype)))
        out.append(
            {"values": values, "uniforms": uniforms, "words": [str(w) for w in words], "body": body}
        )
    return out


def _hh_report(
    tree: HierarchicalHistogram, v: float, coins: _ReplayCoins, top: int | None = None
) -> tuple[int, int, int]:
    """(level, item, seed) of one user's HH report, in the client's coin order: the level
    (U below h, capped at ``top``: AutoDistribution's :func:`hh_top_level`), then the level
    oracle's report of her node (GRR: U; OLH: seed word, U)."""
    leaf = int(tree.leaf_index(np.array([v]))[0])
    k = min(1 + coins.below(tree.height), tree.height if top is None else top)
    node = np.array([leaf // tree.branching ** (tree.height - k)], dtype=np.int64)
    oracle = tree.level_oracle(k)
    if isinstance(oracle, GRR):
        return k, int(grr_sample(node, oracle.domain_size, oracle._weights(), coins)[0]), 0  # type: ignore[arg-type]
    assert isinstance(oracle, OLH)
    seed = np.array([coins.words.pop(0)], dtype=np.uint64)
    hashed = local_hash(seed, node, oracle.range_size)
    item = grr_sample(hashed, oracle.range_size, oracle._weights(), coins)[0]  # type: ignore[arg-type]
    return k, int(item), int(seed[0])


def _tree_body(
    spec: HierarchicalHistogram | AutoDistribution, values: list[float], coins: _ReplayCoins
) -> dict[str, Any]:
    """The body of HierarchicalHistogram or (hybrid) AutoDistribution reports, user by user
    in the client's order (AutoDistribution: the branch coin, a uniform against hh_share,
    then the SW report or the HH report)."""
    rows: list[tuple[int, float, int, int]] = []  # level, SW value, item, seed
    for v in values:
        if isinstance(spec, HierarchicalHistogram):
            k, item, seed = _hh_report(spec, v, coins)
            rows.append((k, 0.0, item, seed))
        elif coins.random(1)[0] < float(spec.hh_share or 0.0):
            k, item, seed = _hh_report(spec.tree, v, coins, hh_top_level(spec.tree.height))
            rows.append((k, 0.0, item, seed))
        else:
            rows.append((0, _numeric_report(spec.wave, v, coins), 0, 0))
    template = spec.randomize([values[0]], rng=0).arrays  # the field names and dtypes
    column = {"levels": 0, "values": 1, "items": 2, "seeds": 3}
    if isinstance(spec, HierarchicalHistogram):
        column["values"] = 2
    arrays = {
        name: np.array([row[column[name]] for row in rows], dtype=arr.dtype)
        for name, arr in template.items()
    }
    return _body(Reports(spec, **arrays))


def _tree_bodies() -> list[dict[str, Any]]:
    """Bodies of AutoDistribution (r = 0: Square Wave alone; r = 0.25 with GRR and OLH
    levels, with GRR levels only, padded trees; r = 1) and of HierarchicalHistogram."""
    rng = np.random.default_rng(23)
    specs: list[AutoDistribution | HierarchicalHistogram] = [
        AutoDistribution(epsilon=1.0, buckets=64, hh_share=0.0),  # Square Wave alone
        AutoDistribution(epsilon=2.0, buckets=64),  # default r = 0.25: GRR, GRR, OLH
        AutoDistribution(epsilon=0.5, low=-3.0, high=5.0, buckets=256, hh_share=0.25),
        AutoDistribution(epsilon=4.0, buckets=16, hh_share=0.25),  # GRR levels only
        AutoDistribution(epsilon=1.5, expected_n=1000, hh_share=1.0),  # 128 of 256 leaves
        AutoDistribution(epsilon=3.0, low=0.0, high=52.0, expected_n=100_000),
        HierarchicalHistogram(epsilon=1.0, buckets=64),
        HierarchicalHistogram(epsilon=2.0, low=-1.0, high=9.0, buckets=100, branching=2),
        HierarchicalHistogram(epsilon=0.7, buckets=1000, oracle="OLH"),
    ]
    out = []
    for spec in specs:
        n = 40
        low, high = spec.low, spec.high
        values = [low, high, low + (high - low) / 3.0]
        values += (low + (high - low) * rng.random(n - 3)).tolist()
        uniforms: list[float] = rng.random(3 * n).tolist()
        words = rng.integers(0, _U64, 4 * n, dtype=np.uint64, endpoint=True).tolist()
        coins = _ReplayCoins(uniforms, words)
        if isinstance(spec, AutoDistribution) and not spec.hybrid:
            data = [_numeric_report(spec.wave, v, coins) for v in values]
            body = _body(Reports(spec, values=np.array(data, dtype=np.float64)))
        else:
            body = _tree_body(spec, values, coins)
        out.append(
            {"values": values, "uniforms": uniforms, "words": [str(w) for w in words], "body": body}
        )
    return out


def _set_report(spec: Mechanism, value: list[Any], coins: _ReplayCoins) -> dict[str, np.ndarray]:
    """One user's report arrays, the Python samplers run on that user alone (so that their
    draws come in the client's order: see the header of clients/js/src/sets.js)."""
    if isinstance(spec, PaddingSampling):
        sets = UserSets.from_lists([value])
        slot, real = sample_padded(sets.offsets, spec.padding, coins)  # type: ignore[arg-type]
        picked = spec.domain_size + slot  # a dummy, or her item in that slot
        if real[0]:
            picked[0] = sets.items[slot[0]]
        inner = spec.inner
        if isinstance(inner, GRR):
            y = grr_sample(picked, inner.domain_size, inner._weights(), coins)  # type: ignore[arg-type]
            return {"values": y.astype(inner.randomize([0], rng=0).values.dtype)}
        seed = np.array([coins.words.pop(0)], dtype=np.uint64)
        hashed = local_hash(seed, picked, inner.range_size)
        y = grr_sample(hashed, inner.range_size, inner._weights(), coins)  # type: ignore[arg-type]
        return {"seeds": seed, "values": y.astype(inner.randomize([0], rng=0).values.dtype)}
    # the key-value and PrivSet randomizers themselves, the replayed coins as their generator
    from unittest import mock

    from ldpkit.sets import keyvalue, privset

    if isinstance(spec, PrivSet):
        with mock.patch.object(privset, "as_generator", lambda rng: rng):
            return dict(spec.randomize(UserSets.from_lists([value]), rng=coins).arrays)  # type: ignore[arg-type]
    with mock.patch.object(keyvalue, "as_generator", lambda rng: rng):
        return dict(spec.randomize(UserPairs.from_lists([value]), rng=coins).arrays)  # type: ignore[arg-type]


def _sets() -> list[dict[str, Any]]:
    """Bodies of PaddingSampling (GRR, OLH), PCKV (UE, GRR) and PrivKV from fixed words and
    uniforms: sets with no item, fewer items than the padding, more (sampled down)."""
    rng = np.random.default_rng(29)
    specs: list[Mechanism] = [
        PaddingSampling(epsilon=1.0, domain_size=6, padding=3),  # GRR over 9 items
        PaddingSampling(epsilon=2.0, domain_size=300, padding=4, oracle="grr"),
        PaddingSampling(epsilon=1.0, domain_size=50, padding=2),  # OLH
        PaddingSampling(epsilon=0.5, domain_size=20, padding=1, oracle="olh"),
        PCKV(epsilon=1.0, domain_size=6, padding=2),
        PCKV(epsilon=3.0, domain_size=13, padding=4),
        PCKV(epsilon=1.0, domain_size=6, padding=2, method="grr"),
        PCKV(epsilon=0.5, domain_size=200, padding=3, method="grr"),
        PrivKV(epsilon=1.0, domain_size=5),
        PrivKV(epsilon=4.0, domain_size=300),
        PrivKV(epsilon=3.0, domain_size=5, rounds=3),  # PrivKVM round 0
        PrivKV(  # a later round: fair key bit, fakes from the previous means
            epsilon=3.0, domain_size=5, rounds=3, round=2, fake_means=(0.5, -1.0, 0.0, 0.25, 1.0)
        ),
        # PrivSet: Floyd's subsets (k = 1 and k = 5), then a shuffle of [0, D) (k^2 > 8 D)
        PrivSet(epsilon=1.0, domain_size=6, padding=2),
        PrivSet(epsilon=3.0, domain_size=300, padding=4),
        PrivSet(epsilon=1.0, domain_size=10, padding=1, subset_size=10),
        PrivSet(epsilon=0.5, domain_size=12, padding=3, subset_size=11),
    ]
    out = []
    for spec in specs:
        n, d = 30, spec.domain_size  # type: ignore[attr-defined]
        ell = int(getattr(spec, "padding", 3))
        sizes = [0, 1, ell, ell + 2, min(d, 2 * ell + 3)]
        sizes += rng.integers(0, min(d, ell + 3) + 1, n - len(sizes)).tolist()
        # values on the float grid k / 8 (exact everywhere) and from rng.random (exact too)
        values: list[Any] = []
        for size in sizes:
            items = rng.choice(d, size=size, replace=False).tolist()
            if isinstance(spec, (PaddingSampling, PrivSet)):
                values.append(items)
            else:
                reals = np.where(
                    rng.random(size) < 0.3,
                    rng.integers(-8, 9, size) / 8.0,
                    2.0 * rng.random(size) - 1.0,
                )
                values.append([[k, float(v)] for k, v in zip(items, reals.tolist())])
        uniforms: list[float] = rng.random(2 * n).tolist()
        per_user = 4 + (d + ell if isinstance(spec, PCKV) and spec.method == "ue" else 0)
        if isinstance(spec, PrivSet):  # shuffles, subsets, redraws: plenty, the rest cut
            per_user = 4 * (spec.k + spec.items + ell + 4)
        words = rng.integers(0, _U64, per_user * n, dtype=np.uint64, endpoint=True).tolist()
        coins = _ReplayCoins(uniforms, words)
        rows = [_set_report(spec, v, coins) for v in values]
        if isinstance(spec, PrivSet):
            words = words[: len(words) - len(coins.words)]
        arrays = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
        out.append(
            {
                "values": values,
                "uniforms": uniforms,
                "words": [str(w) for w in words],
                "body": _body(Reports(spec, **arrays)),
                # PrivKV's loss comes out of numpy's log (SIMD-dependent bits): not a vector
                "privacy_loss": None if isinstance(spec, PrivKV) else spec.privacy_loss(),
            }
        )
    return out


def _numeric() -> dict[str, Any]:
    return {"grids": _numeric_grids(), "bodies": _numeric_bodies(), "tree_bodies": _tree_bodies()}


def _encoders() -> list[dict[str, Any]]:
    cases: list[tuple[Encoder, list[Any]]] = [
        (
            Encoder(["chrome", "firefox", "safari"], unknown="other"),
            ["chrome", "lynx", "safari", "Chrome", "", 1, "firefox"],
        ),
        (
            Encoder(["a", "b", 1, 2.5], unknown="other", missing="item"),
            [1, 1.0, True, "1", 2.5, "a", None, 0, False, "\u00e9", -0.0],
        ),
        (Encoder([True, "x"], unknown="other"), [1, True, 1.0, 0, "True", "x"]),
        (Encoder([0, 1, 2]), [False, True, 0.0, 2.0, -0.0]),
        (
            Encoder(["caf\u00e9", "\u65e5\u672c"], unknown="other"),
            ["caf\u00e9", "cafe", "\u65e5\u672c"],
        ),
        (Encoder(["x", "y"]), ["x", "z"]),
        (Encoder(["x", "y"], unknown="other"), ["x", None]),
    ]
    out = []
    for enc, labels in cases:
        case: dict[str, Any] = {"encoder": enc.to_dict(), "labels": labels}
        try:
            case["items"] = enc.encode(labels).tolist()
        except ValueError:
            case["error"] = True
        out.append(case)
    return out


def _questions() -> list[dict[str, Any]]:
    questions: list[tuple[Question, list[Any]]] = [
        (
            Question(
                name="browser",
                spec=OLH(epsilon=1.0, domain_size=4, mix_items=False),
                encoder=Encoder(["chrome", "firefox", "safari"], unknown="other"),
                description="Which browser do you use most?",
            ),
            ["chrome", "lynx", "safari"],
        ),
        (
            Question(
                name="minutes",
                spec=PiecewiseMechanism(epsilon=1.0, low=0.0, high=120.0),
                clip="clip",
                description="Minutes online yesterday",
            ),
            [-3.0, 0.0, 59.5, 120.0, 1000.0],
        ),
        (
            Question(
                name="session.length",
                spec=SquareWave(epsilon=0.5, low=-1e6, high=3e16, buckets=256, bandwidth=1.5e-7),
            ),
            [-1e6, 0.0, 3e16],
        ),
        (
            Question(
                name="cafe_2",
                spec=GRR(epsilon=0.1, domain_size=4),
                encoder=Encoder(["th\u00e9", "caf\u00e9", 7], unknown="error", missing="item"),
                description="Caf\u00e9 \u2615 or th\u00e9?",
            ),
            ["caf\u00e9", 7, None],
        ),
        (Question(name="hm", spec=HybridMechanism(epsilon=2.0, low=-3.0, high=5.0)), [-3.0, 5.0]),
        (
            Question(
                name="topl-threshold",
                spec=SquareWave(epsilon=0.5, high=16470.0, buckets=1024, log_scale=16470.0 / 1024),
                clip="clip",
            ),
            [-1.0, 0.0, 38.5, 16470.0, 1e6],
        ),
        (Question(name="hr", spec=HadamardResponse(epsilon=1e-05, domain_size=1000)), [0, 999]),
        # answers are values; prepared, their buckets (bucket edges where float rounding
        # decides: 0.3 * 10 = 3.0000000000000004, 0.7 * 10 = 7.000000000000001)
        (
            Question(
                name="dsw",
                spec=DiscreteSquareWave(epsilon=1.0, buckets=10),
                clip="clip",
            ),
            [-2.0, 0.0, 0.1, 0.3, 0.29999999999999993, 0.7, 0.9999999999999999, 1.0, 5.0],
        ),
        (
            Question(
                name="dsw-span", spec=DiscreteSquareWave(epsilon=2.0, buckets=7, low=-3.0, high=7.5)
            ),
            [-3.0, -1.5, -1.5000000000000002, 0.0, 4.5, 7.499999999999999, 7.5],
        ),
        # AutoDistribution (the default numerical spec; hybrid from eps 1.5) and its tree
        (
            Question(
                name="weeks",
                spec=AutoDistribution(epsilon=2.0, high=52.0, expected_n=1000),
                clip="clip",
            ),
            [-1.0, 0.0, 26.5, 52.0, 60.0],
        ),
        (Question(name="auto-sw", spec=AutoDistribution(epsilon=1.0, low=-5.0)), [-5.0, 1.0]),
        (
            Question(name="hh", spec=HierarchicalHistogram(epsilon=1.0, buckets=64, oracle="OLH")),
            [0.0, 0.5],
        ),
    ]
    return [
        {
            "question": q.to_dict(),
            "fingerprint": q.spec.fingerprint,
            "question_fingerprint": q.fingerprint,
            "answers": answers,
            "prepared": q.prepare(answers).tolist(),
        }
        for q, answers in questions
    ]


class _ReplayWords(_ReplayCoins):
    """Words in order (the device's word source: ``u64``)."""

    def u64(self) -> int:
        return self.words.pop(0)


def _longitudinal() -> dict[str, Any]:
    import tempfile

    from ldpkit import Device
    from ldpkit.longitudinal import LGRR, LOLOHA, LOSUE, LOUE, LSOUE, LSUE

    specs: list[Any] = []
    for cls in (LGRR, LOUE, LOSUE, LSUE, LSOUE):
        for inf, one, d in ((2.0, 1.0, 8), (1.0, 0.25, 5), (6.0, 3.0, 3), (0.5, 0.1, 17)):
            specs.append(cls(epsilon_inf=inf, epsilon_1=one, domain_size=d))
    specs.append(LGRR(epsilon_inf=30.0, epsilon_1=10.0, domain_size=300))
    for inf, one, d, g in ((2.0, 1.0, 100, None), (1.0, 0.5, 40, 2), (4.0, 1.0, 9, 5)):
        specs.append(LOLOHA(epsilon_inf=inf, epsilon_1=one, domain_size=d, hash_range=g))
    specs.append(LSUE(epsilon_inf=40.0, epsilon_1=20.0, domain_size=9))
    laws = []
    for spec in specs:
        rounds = spec._rounds()
        laws.append(
            {
                "spec": spec.to_dict(),
                "fingerprint": spec.fingerprint,
                "rounds": [[str(x) for x in r] for r in rounds],
                "privacy_loss": spec.privacy_loss(),
                "longitudinal_privacy_loss": [spec.longitudinal_privacy_loss(k) for k in (1, 2)],
            }
        )
    secret = bytes(range(100, 132))
    device_cases = []
    with tempfile.TemporaryDirectory() as tmp:
        device = Device(secret, Path(tmp) / "device.json")
        for spec in [*specs[::3], *specs[-3:]]:
            values = list(range(min(spec.domain_size, 6)))
            device_cases.append(
                {
                    "spec": spec.to_dict(),
                    "values": values,
                    # uint64 rows (LOLOHA: seed, answer) as decimal strings: exact in JSON
                    "permanent": [
                        [str(x) for x in device.permanent(spec, v)["data"]]
                        if isinstance(spec, LOLOHA)
                        else device.permanent(spec, v)["data"]
                        for v in values
                    ],
                }
            )
    rng = np.random.default_rng(30)
    bodies = []
    for spec in [*specs[::2], *specs[-3:]]:
        d = spec.domain_size
        values = [int(v) for v in rng.integers(0, d, 4)]
        words = [
            int(w) for w in rng.integers(0, _U64, 4 * (2 * d + 4), dtype=np.uint64, endpoint=True)
        ]
        replay = _ReplayWords([], words)
        if isinstance(spec, LOLOHA):  # fresh devices: per value a seed word, then U
            permanent = []
            for v in values:
                seed = np.asarray([replay.u64()], dtype=np.uint64)
                key = int(spec._memo_keys(np.asarray([v]), seed)[0])
                permanent.append(spec._permanent_from_words(key, replay, seed))
        else:
            permanent = [spec._permanent_from_words(v, replay) for v in values]
        if isinstance(spec, LOLOHA):
            rows = np.asarray(permanent, dtype=np.uint64)
            ys = [
                int(
                    grr_sample(
                        rows[i : i + 1, 1].astype(np.int64),
                        spec.range_size,
                        spec._rounds()[1],
                        replay,
                    )[0]
                )  # type: ignore[arg-type]
                for i in range(4)
            ]
            body = _body(
                Reports(
                    spec,
                    seeds=rows[:, 0].copy(),
                    values=np.asarray(ys, dtype=index_dtype(spec.range_size)),
                )
            )
        elif isinstance(spec, LGRR):
            perm = np.asarray(permanent, dtype=np.int64)
            ys = [
                int(grr_sample(perm[i : i + 1], d, spec._rounds()[1], replay)[0]) for i in range(4)
            ]  # type: ignore[arg-type]
            body = _body(Reports(spec, values=np.asarray(ys, dtype=index_dtype(d))))
        else:
            tp2, tq2 = spec._rounds()[1]
            rows = []
            for row in permanent:
                bits = np.unpackbits(row)[:d]
                rows.append(np.packbits([replay.u64() < (tp2 if b else tq2) for b in bits]))
            body = _body(Reports(spec, bits=np.asarray(rows, dtype=np.uint8)))
        used = len(words) - len(replay.words)
        bodies.append(
            {
                "spec": spec.to_dict(),
                "values": values,
                "words": [str(w) for w in words[:used]],
                "permanent": [np.asarray(p).astype(str).tolist() for p in permanent],
                "body": body,
            }
        )
    memo_laws, memo_cases, states, memo_bodies = _memoized_reports(secret)
    return {
        "laws": laws,
        "device": {"secret": secret.hex(), "cases": device_cases + memo_cases, "states": states},
        "bodies": bodies,
        "memoized_laws": memo_laws,
        "memoized_bodies": memo_bodies,
    }


def _memoized_reports(secret: bytes) -> tuple[list[Any], list[Any], dict[str, Any], list[Any]]:
    """DBitFlipPM and OneBitMean: laws, device answers, device states, fresh bodies.

    The states are what the device derived (uint64 as decimal strings); the fresh bodies
    replay ``randomize``'s word order: DBitFlipPM per value its buckets (Floyd) then its bits,
    OneBitMean per value one uniform (rounding to the s-grid) then one U.
    """
    import tempfile

    from ldpkit import Device
    from ldpkit._exact import round_to_grid
    from ldpkit.longitudinal import DBitFlipPM, OneBitMean

    specs: list[Any] = [
        DBitFlipPM(epsilon=1.0, domain_size=8, sampled_bits=3),
        DBitFlipPM(epsilon=0.5, domain_size=5, sampled_bits=1),
        DBitFlipPM(epsilon=3.0, domain_size=40, sampled_bits=40),
        DBitFlipPM(epsilon=2.0, domain_size=1000, sampled_bits=7),
        OneBitMean(epsilon=1.0, low=0.0, high=10.0, points=16),
        OneBitMean(epsilon=0.25, points=1),
        OneBitMean(epsilon=4.0, low=-3.5, high=1e6, points=1 << 16),
    ]
    laws = [
        {
            "spec": spec.to_dict(),
            "fingerprint": spec.fingerprint,
            "thresholds": [str(x) for x in spec._thresholds()]
            if isinstance(spec, DBitFlipPM)
            else [str(spec._grid.w_low), str(spec._grid.w_high)],
            "privacy_loss": spec.privacy_loss(),
            "longitudinal_privacy_loss": [spec.longitudinal_privacy_loss(k) for k in (1, 2, 10**6)],
        }
        for spec in specs
    ]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        device = Device(secret, Path(tmp) / "device.json")
        for spec in specs:
            if isinstance(spec, DBitFlipPM):
                values: list[Any] = list(range(min(spec.domain_size, 12)))
            else:
                lo, hi = spec.low, spec.high
                values = [lo, hi, lo + (hi - lo) * 0.3, lo + (hi - lo) / 3, lo + (hi - lo) * 0.71]
            cases.append(
                {
                    "spec": spec.to_dict(),
                    "values": values,
                    "permanent": [device.permanent(spec, v)["data"] for v in values],
                }
            )
        states = {fp: [str(x) for x in e["data"]] for fp, e in device._states.items()}
    rng = np.random.default_rng(2017)
    bodies = []
    for spec in specs:
        words = [int(w) for w in rng.integers(0, _U64, 400, dtype=np.uint64, endpoint=True)]
        uniforms = [float(u) for u in rng.random(8)]
        replay = _ReplayWords(uniforms, words)
        perms = []
        if isinstance(spec, DBitFlipPM):
            values = [int(v) for v in rng.integers(0, spec.domain_size, 5)]
            for v in values:
                state = spec._device_state_from_words(replay)
                key = int(spec._memo_keys(np.asarray([v]), state)[0])
                perms.append(spec._permanent_from_words(key, replay, state))
        else:
            values = [float(v) for v in rng.uniform(spec.low, spec.high, 5)]
            values[0] = spec.high
            for v in values:
                k = int(round_to_grid(spec._unit(np.asarray([v])), spec.points, replay)[0])  # type: ignore[arg-type]
                perms.append(spec._permanent_from_words(k, replay, None))  # type: ignore[arg-type]
        body = _body(spec._instantaneous_round(np.stack(perms), None))  # no draw
        bodies.append(
            {
                "spec": spec.to_dict(),
                "values": values,
                "words": [str(w) for w in words[: len(words) - len(replay.words)]],
                "uniforms": uniforms[: len(uniforms) - len(replay.uniforms)],
                "body": body,
            }
        )
    return laws, cases, states, bodies


def _item_case(item: Any) -> dict[str, Any]:
    key = item_key(item)
    data = (b"s" + item.encode()) if isinstance(item, str) else None
    if data is None:
        data = b"i" + item.to_bytes((item.bit_length() + 8) // 8, "big", signed=True)
    kind = "str" if isinstance(item, str) else "int"
    return {"kind": kind, "item": str(item), "bytes": data.hex(), "key": str(key)}


def _sketch_user(spec: Mechanism, key: int, coins: _ReplayCoins) -> dict[str, Any]:
    """One user's report fields for an item key, the words replayed in the client's order."""
    k = np.array([key], dtype=np.uint64)
    if isinstance(spec, CMS):
        j = coins.below(spec.depth)
        h = int(row_hash(np.array([j]), k, spec.width)[0])
        w = np.array([coins.words.pop(0) for _ in range(spec.width)], dtype=np.uint64)
        big, small = _cms_thresholds(spec.epsilon)
        thresholds = np.where(np.arange(spec.width) == h, np.uint64(big), np.uint64(small))
        return {"rows": j, "bits": np.packbits(w < thresholds)}
    if isinstance(spec, HCMS):
        j, ell = coins.below(spec.depth), coins.below(spec.width)
        h = int(row_hash(np.array([j]), k, spec.width)[0])
        w_keep, w_other = spec._weights()
        keep = bool(coin(coins, 1, w_keep, w_keep + w_other)[0])  # type: ignore[arg-type]
        return {"rows": j, "index": ell, "bits": int(((ell & h).bit_count() % 2 == 0) == keep)}
    assert isinstance(spec, FLH)
    j = coins.below(spec.num_hashes)
    g = spec.range_size
    hashed = row_hash(np.array([j]), k, g)
    y = int(grr_sample(hashed, g, spec._weights(), coins)[0])  # type: ignore[arg-type]
    return {"rows": j, "values": y}


def _sketch_arrays(spec: Mechanism, users: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The users' fields as arrays of the dtypes the spec's own reports have."""
    template = spec.randomize([0], rng=0).arrays
    return {
        k: np.array([u[k] for u in users]).astype(v.dtype).reshape(len(users), *v.shape[1:])
        for k, v in template.items()
    }


def _sketch_body(spec: Mechanism, values: list[Any], words: list[int]) -> dict[str, Any]:
    """The body of the client's reports for these values and words (its draw order)."""
    coins = _ReplayCoins([], words)
    keys = item_keys(np.array(values, dtype=object)).tolist()
    users = [_sketch_user(spec, key, coins) for key in keys]
    return _body(Reports(spec, **_sketch_arrays(spec, users)))


def _sketch() -> dict[str, Any]:
    rng = np.random.default_rng(29)
    blake = []
    for size, digest, person in (
        (0, 8, b""),
        (3, 64, b""),
        (128, 8, b"ldpkit.item.v1"),
        (129, 32, b"0123456789abcdef"),
        (300, 8, b"ldpkit.item.v1"),
    ):
        data = bytes(rng.integers(0, 256, size).tolist())
        blake.append(
            {
                "data": data.hex(),
                "digest_size": digest,
                "person": person.hex(),
                "digest": hashlib.blake2b(data, digest_size=digest, person=person).hexdigest(),
            }
        )
    items: list[Any] = ["", "a", "1", "zoë", "日本語", "🙂 emoji", "x" * 200]
    items += [0, 1, -1, 127, 128, 255, 256, -128, -129, 2**53 + 1, 2**63, 2**64, -(2**80)]
    keys = item_keys(np.array(items, dtype=object))
    rows = [0, 1, 2, 255, 2**20 - 1]
    widths = [2, 3, 64, 1000, 1024, 2**20]
    hashes = [
        {"width": m, "hashes": row_hash(np.array(rows)[:, None], keys[None, :], m).tolist()}
        for m in widths
    ]
    eps = [1e-3, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 22.0, 40.0, 50.0]
    cms = []
    for e in eps:
        big, small = _cms_thresholds(e)
        cms.append(
            {
                "epsilon": e,
                "true": str(big),
                "other": str(small),
                "loss": CMS(epsilon=e).privacy_loss(),
            }
        )
    flh = [{"epsilon": e, "g": FLH(epsilon=e).range_size} for e in eps if e <= RR_MAX_EPSILON]
    pool = np.array(["cat", "dog", "zoë", "", "日本", 0, 7, -3, 1000], dtype=object)
    bodies = []
    for spec, n in (
        (CMS(epsilon=2.0, width=16, depth=8), 12),
        (CMS(epsilon=1.0, width=20, depth=300), 12),
        (HCMS(epsilon=1.0, width=64, depth=16), 40),
        (HCMS(epsilon=4.0, width=1024, depth=300), 40),
        (FLH(epsilon=1.0, num_hashes=64), 40),
        (FLH(epsilon=3.0, num_hashes=1000, hash_range=300), 40),
        (FLH(epsilon=2.0, num_hashes=16, domain_size=50), 20),
    ):
        if spec.domain_size is None:  # type: ignore[attr-defined]
            values = pool[rng.integers(0, pool.size, n)].tolist()
        else:
            values = rng.integers(0, spec.domain_size, n).tolist()  # type: ignore[attr-defined]
        per_user = spec.width + 2 if isinstance(spec, CMS) else 4  # room for rejected words
        words = rng.integers(0, _U64, n * per_user, dtype=np.uint64, endpoint=True).tolist()
        body = _sketch_body(spec, values, words)
        bodies.append({"values": values, "words": [str(x) for x in words], "body": body})
    return {
        "item_key_format": ITEM_KEY_FORMAT,
        "blake2b": blake,
        "items": [_item_case(x) for x in items],
        "rows": rows,
        "row_hashes": hashes,
        "cms_thresholds": cms,
        "flh_range": flh,
        "bodies": bodies,
    }


def _discovery_body(spec: Mechanism, values: list[str], words: list[int]) -> dict[str, Any]:
    """The body of the client's reports for these strings and words (its draw order)."""
    from ldpkit.discovery._strings import encode_strings, family_seeds, hash_keys, level_keys

    coins = _ReplayCoins([], words)
    grid = encode_strings(values, spec.max_length, spec.alphabet)  # type: ignore[attr-defined]
    h, g = spec.family_size, spec.range_size  # type: ignore[attr-defined]
    groups, hashes, ys = [], [], []
    for row in grid:
        level = coins.below(spec.groups)  # type: ignore[attr-defined]
        j = coins.below(h)
        key = level_keys(row[None, :], np.array([level]))
        hashed = hash_keys(key, family_seeds(level, h)[j : j + 1], g)
        ys.append(int(grr_sample(hashed, g, spec._weights(), coins)[0]))  # type: ignore[arg-type,attr-defined]
        groups.append(level)
        hashes.append(j)
    template = spec.randomize(values[:1], rng=0).arrays  # the dtypes
    arrays = {
        "groups": np.array(groups).astype(template["groups"].dtype),
        "hashes": np.array(hashes).astype(template["hashes"].dtype),
        "values": np.array(ys).astype(template["values"].dtype),
    }
    return _body(Reports(spec, **arrays))


def _sfp_body(spec: Any, values: list[str], words: list[int]) -> dict[str, Any]:
    """The body of the client's SFP reports: per user the position U, then the fragment
    sketch's words, then the whole-string sketch's (its draw order)."""
    coins = _ReplayCoins([], words)
    grid = spec._grid(values)
    items, hashes = spec._word_items(grid)
    inner = {"fragment": spec._fragment_spec(), "word": spec._word_spec()}
    users: dict[str, list[dict[str, Any]]] = {"fragment": [], "word": []}
    for i in range(grid.shape[0]):
        position = coins.below(spec.positions)
        code = int(spec._fragment_codes(grid[i : i + 1], np.array([position]))[0])
        fragment = spec._fragment_item(position, int(hashes[i]), code)
        for part, item in (("fragment", fragment), ("word", int(items[i]))):
            key = int(item_keys(np.array([item], dtype=object))[0])
            users[part].append(_sketch_user(inner[part], key, coins))
    arrays = {}
    for part, sketch in inner.items():
        for k, v in _sketch_arrays(sketch, users[part]).items():
            arrays[f"{part}_{k}"] = v
    return _body(Reports(spec, **arrays))


def _discovery() -> dict[str, Any]:
    from ldpkit.discovery import PEM, SFP, TreeHist
    from ldpkit.discovery._strings import encode_strings, family_seeds, hash_keys, level_keys

    rng = np.random.default_rng(2029)
    strings = ["", "a", "hello", "zoë", "日本語", "🙂 emoji", "a\x00b", "x" * 70, "éééé"]
    cases = []
    for max_length, alphabet in ((1, None), (3, None), (4, None), (5, None), (12, None)):
        grid = encode_strings(strings, max_length, alphabet)
        keys = [
            [str(k) for k in level_keys(grid, np.full(len(strings), level)).tolist()]
            for level in range(max_length)
        ]
        cases.append(
            {
                "max_length": max_length,
                "alphabet": alphabet,
                "strings": strings,
                "symbols": grid.tolist(),
                "keys": keys,  # keys[l][i]: string i's prefix of l + 1 symbols
            }
        )
    for max_length, alphabet, given in (
        (4, "abcdefghijklmnopqrstuvwxyz", ["", "abc", "zzzzzz", "a\x00b"]),
        (3, "é🙂日x", ["🙂", "é🙂x日", "xx"]),
    ):
        grid = encode_strings(given, max_length, alphabet)
        keys = [
            [str(k) for k in level_keys(grid, np.full(len(given), level)).tolist()]
            for level in range(max_length)
        ]
        cases.append(
            {
                "max_length": max_length,
                "alphabet": alphabet,
                "strings": given,
                "symbols": grid.tolist(),
                "keys": keys,
            }
        )
    seeds = [
        {"level": level, "h": h, "seeds": [str(x) for x in family_seeds(level, h).tolist()]}
        for level, h in ((0, 1), (0, 16), (5, 40), (63, 4096))
    ]
    keys = rng.integers(0, _U64, 6, dtype=np.uint64, endpoint=True)
    some_seeds = family_seeds(3, 5)
    hashes = [
        {
            "g": g,
            "hashes": hash_keys(keys[:, None], some_seeds[None, :], g).tolist(),
        }
        for g in (2, 3, 55, 4096, 1 << 16)
    ]
    pool = ["hello", "help", "zoë", "日本語", "", "🙂", "a longer string here", "héllo wörld"]
    letters = ["abc", "ab", "", "zzz", "cab"]
    specs: list[tuple[Mechanism, list[str], int]] = [
        (PEM(epsilon=2.0, max_length=6, top_k=3), pool, 30),
        (PEM(epsilon=1.0, max_length=12, hash_range=300, hash_functions=1000), pool, 30),
        (TreeHist(epsilon=4.0, max_length=5, alphabet="abcz"), letters, 30),
        (TreeHist(epsilon=0.5, max_length=64, hash_functions=3, pool_ended=False), pool, 20),
    ]
    laws, bodies = [], []
    for spec, chosen, n in specs:
        w_keep, w_other = spec._weights()  # type: ignore[attr-defined]
        laws.append(
            {
                "mechanism": spec.to_dict(),
                "g": spec.range_size,  # type: ignore[attr-defined]
                "h": spec.family_size,  # type: ignore[attr-defined]
                "w_keep": str(w_keep),
                "w_other": str(w_other),
                "loss": spec.privacy_loss(),
            }
        )
        values = [chosen[i] for i in rng.integers(0, len(chosen), n).tolist()]
        words = rng.integers(0, _U64, n * 4, dtype=np.uint64, endpoint=True).tolist()
        body = _discovery_body(spec, values, words)
        bodies.append({"values": values, "words": [str(x) for x in words], "body": body})
    # SFP: fragments tied to a hash of the string, two sketches (HCMS, CMS) one user at a time
    sfp_losses = []
    for spec, chosen, n in (
        (SFP(epsilon=4.0, max_length=6, depth=8, width=64), [*letters, "abcdefgh", "zz"], 20),
        (
            SFP(
                epsilon=2.0,
                max_length=5,
                fragment_length=3,
                hash_bits=4,
                sketch="cms",
                width=16,
                depth=5,
                fragment_share=0.3,
            ),
            letters,
            10,
        ),
        (
            SFP(epsilon=1.0, max_length=3, alphabet="é🙂日x", width=32, depth=300),
            ["🙂", "é🙂x日", "xx", ""],
            20,
        ),
    ):
        sfp_losses.append({"mechanism": spec.to_dict(), "loss": spec.privacy_loss()})
        values = [chosen[i] for i in rng.integers(0, len(chosen), n).tolist()]
        per_user = (2 * spec.width if spec.sketch == "cms" else 0) + 8  # with rejected words
        words = rng.integers(0, _U64, n * per_user, dtype=np.uint64, endpoint=True).tolist()
        body = _sfp_body(spec, values, words)
        bodies.append({"values": values, "words": [str(x) for x in words], "body": body})
    return {
        "sfp_losses": sfp_losses,
        "grids": cases,
        "family_seeds": seeds,
        "hash_keys": {
            "keys": [str(k) for k in keys.tolist()],
            "seeds": [str(x) for x in some_seeds.tolist()],
            "cases": hashes,
        },
        "laws": laws,
        "bodies": bodies,
    }


def _oracle_user(oracle: Mechanism, item: int, coins: _ReplayCoins) -> dict[str, Any]:
    """One user's report of ``item`` through GRR, OLH (seed word, then U) or HR (as above)."""
    one = np.array([item], dtype=np.int64)
    if isinstance(oracle, GRR):
        return {"values": int(grr_sample(one, oracle.domain_size, oracle._weights(), coins)[0])}  # type: ignore[arg-type]
    if isinstance(oracle, OLH):
        seed = np.array([coins.words.pop(0)], dtype=np.uint64)
        hashed = oracle.hash_items(seed, one)
        y = grr_sample(hashed, oracle.range_size, oracle._weights(), coins)  # type: ignore[arg-type]
        return {"seeds": int(seed[0]), "values": int(y[0])}
    assert isinstance(oracle, HadamardResponse)
    j = coins.words.pop(0) & (oracle.hadamard_size - 1)
    w_keep, w_flip = rr_weights(oracle.epsilon, 1)
    want_inside = bool(coin(coins, 1, w_keep, w_keep + w_flip)[0])  # type: ignore[arg-type]
    inside = (int(item + 1) & j).bit_count() % 2 == 0
    return {"values": j ^ ((item + 1) & -(item + 1)) if inside != want_inside else j}


def _multidim_user(spec: Mechanism, row: list[Any], coins: _ReplayCoins) -> dict[str, Any]:
    """One user's report arrays (scalars or rows), the samplers in the client's order."""
    from ldpkit.multidim import (
        CALM,
        HDG,
        RSFD,
        SMP,
        SPL,
        TDG,
        AttributeSampling,
        DuchiMean,
        Fourier,
        FullDomain,
        GroupMean,
        LaplaceMean,
        UniformGrid,
    )

    if isinstance(spec, SPL):
        return {
            "values": [_oracle_user(spec.oracle(j), v, coins)["values"] for j, v in enumerate(row)]
        }
    if isinstance(spec, SMP):
        a = coins.below(spec.attributes)
        return {"attributes": a, **_oracle_user(spec.oracle(a), row[a], coins)}
    if isinstance(spec, RSFD):
        a = coins.below(spec.attributes)
        if spec.protocol == "grr":
            out = [coins.below(k) for k in spec.domain_sizes]  # the fakes, the sampled one dropped
            w_keep, w_other = spec._grr_weights(a)
            one = np.array([row[a]], dtype=np.int64)
            out[a] = int(grr_sample(one, spec.domain_sizes[a], (w_keep, w_other), coins)[0])  # type: ignore[arg-type]
            return {"values": out}
        big, small = spec._thresholds()
        hot = int(spec.offsets[a]) + row[a]
        total = int(sum(spec.domain_sizes))
        words = [coins.words.pop(0) for _ in range(total)]
        bits = [w < (big if i == hot else small) for i, w in enumerate(words)]
        return {"bits": np.packbits(np.array(bits, dtype=bool)).tolist()}
    if isinstance(spec, CALM):
        m = coins.below(len(spec.marginal_sets))
        dims = tuple(spec.domain_sizes[a] for a in spec.marginal_sets[m])
        cell = int(np.ravel_multi_index(tuple(row[a] for a in spec.marginal_sets[m]), dims))
        return {"marginals": m, **_oracle_user(spec.marginal_oracle(m), cell, coins)}
    if isinstance(spec, FullDomain):
        return _oracle_user(
            spec.inner(), int(np.ravel_multi_index(tuple(row), spec.domain_sizes)), coins
        )
    if isinstance(spec, (HDG, TDG, UniformGrid)):
        m = coins.below(len(spec.grids))
        x = np.array([row], dtype=np.float64)
        cell = int(spec._cell(x, spec.grids[m], spec.grid_shape(m))[0])
        return {"grids": m, **_oracle_user(spec.grid_oracle(m), cell, coins)}
    if isinstance(spec, AttributeSampling):
        d, dn = spec.attributes, spec.numerical
        which = sorted(coins.permuted(np.arange(d)[None, :])[0, : spec.k].tolist())
        cells = []
        for a in which:
            if a >= dn:
                one = np.array([row[a]], dtype=np.int64)
                g = spec.category_oracle(a - dn)
                cells.append(int(grr_sample(one, g.domain_size, g._weights(), coins)[0]))  # type: ignore[arg-type]
                continue
            t = np.clip((np.array([row[a]]) - spec.low[a]) / spec._half_spans[a] - 1.0, -1.0, 1.0)
            m = spec.numeric_oracle()
            if isinstance(m, HybridMechanism) and m.pm_probability > 0.0:
                # the client flips the branch coin first, then draws only that branch
                if coins.random(1)[0] < m.pm_probability:
                    cells.append(int(m._pm._sample_cells(t, coins)[0]))  # type: ignore[arg-type]
                else:
                    cells.append(int(m._sr._sample_cells(t, coins)[0]) + m.report_cells)  # type: ignore[arg-type]
            else:
                cells.append(int(m._sample_cells(t, coins)[0]))  # type: ignore[arg-type]
        return {"attributes": which, "values": cells}
    if isinstance(spec, (DuchiMean, LaplaceMean, Fourier)):  # own samplers: the client's order
        from unittest import mock

        from ldpkit.multidim import duchi, fourier, laplace

        module = {DuchiMean: duchi, LaplaceMean: laplace, Fourier: fourier}[type(spec)]
        with mock.patch.object(module, "as_generator", lambda rng: rng):
            r = spec.randomize([row], rng=coins)  # type: ignore[arg-type]
        return {k: r.arrays[k][0].tolist() for k in r.fields}
    assert isinstance(spec, GroupMean)
    t = (row[1] - spec.low) / (spec.high - spec.low)
    bit = int(round_to_grid(np.array([t]), 1, coins)[0])  # type: ignore[arg-type]
    return _oracle_user(spec.inner(), 2 * int(row[0]) + bit, coins)


def _multidim() -> dict[str, Any]:
    """Bodies of the multi-attribute specs from fixed words and uniforms."""
    from unittest import mock

    from ldpkit.multidim import (
        CALM,
        HDG,
        RSFD,
        SMP,
        SPL,
        TDG,
        AttributeSampling,
        DuchiMean,
        Fourier,
        FullDomain,
        GroupMean,
        LaplaceMean,
        UniformGrid,
    )
    from ldpkit.multidim import split as split_module

    rng = np.random.default_rng(31)
    specs: list[Mechanism] = [
        SPL(epsilon=1.0, domain_sizes=(3, 5, 2)),
        SPL(epsilon=3.0, domain_sizes=(300, 4)),
        SMP(epsilon=1.0, domain_sizes=(3, 5, 2)),
        SMP(epsilon=2.5, domain_sizes=(2, 400)),
        RSFD(epsilon=1.0, domain_sizes=(3, 5, 2)),
        RSFD(epsilon=2.0, domain_sizes=(7, 300)),
        RSFD(epsilon=1.0, domain_sizes=(3, 5, 2), protocol="oue-z"),
        RSFD(epsilon=4.0, domain_sizes=(6, 9, 4, 2), protocol="oue-z"),
        CALM(epsilon=1.0, domain_sizes=(3, 5, 2), oracle="grr"),
        # OLH hashing the plain cell index (the earlier wire format; mixed keys below)
        CALM(epsilon=2.0, domain_sizes=(4, 3, 2, 5), ell=2, mix_items=False),
        CALM(epsilon=1.5, domain_sizes=(3, 4, 2), way=3, mix_items=False),
        FullDomain(epsilon=1.0, domain_sizes=(3, 5)),
        FullDomain(epsilon=2.0, domain_sizes=(4, 3, 2), oracle="olh", mix_items=False),
        # grids hashing the plain cell index (the earlier wire format; mixed keys below)
        HDG(
            epsilon=1.0,
            low=(0.0, -5.0, 10.0),
            high=(1.0, 5.0, 100.0),
            g1=16,
            g2=4,
            mix_items=False,
        ),
        TDG(epsilon=2.0, low=(0.0, 0.0), high=(24.0, 120.0), g2=8, mix_items=False),
        UniformGrid(epsilon=1.0, low=(0.0, 0.0, 0.0), high=(1.0, 2.0, 3.0), g=4, mix_items=False),
        GroupMean(epsilon=1.0, domain_size=4, low=-30.0, high=120.0, oracle="grr"),
        GroupMean(epsilon=2.0, domain_size=3, low=0.0, high=1.0),
        # last: they draw more uniforms (up to three per sampled attribute)
        AttributeSampling(epsilon=1.0, low=(0.0, -5.0), high=(1.0, 5.0), domain_sizes=(3,)),
        AttributeSampling(
            epsilon=6.0, low=(0.0, 10.0), high=(24.0, 100.0), domain_sizes=(4, 300), sampled=3
        ),
        AttributeSampling(
            epsilon=2.0, low=(0.0, 0.0, 0.0), high=(1.0, 2.0, 3.0), mechanism="pm", sampled=2
        ),
        AttributeSampling(
            epsilon=0.5, low=(-1.0,), high=(1.0,), domain_sizes=(5,), report_cells=64
        ),
        AttributeSampling(epsilon=8.0, low=(0.0,), high=(60.0,), domain_sizes=(2, 7, 3)),
        DuchiMean(epsilon=1.0, low=(0.0, -5.0, 10.0), high=(1.0, 5.0, 100.0)),
        DuchiMean(epsilon=2.0, low=(0.0, 0.0), high=(24.0, 120.0)),
        DuchiMean(epsilon=0.3, low=(0.0,) * 8, high=(1.0,) * 8),
        DuchiMean(epsilon=20.0, low=(0.0,) * 32, high=(1.0,) * 32),
        LaplaceMean(epsilon=1.0, low=(0.0, -5.0, 10.0), high=(1.0, 5.0, 100.0)),
        LaplaceMean(epsilon=4.0, low=(0.0, 0.0), high=(24.0, 120.0)),
        LaplaceMean(epsilon=0.05, low=(0.0,), high=(1.0,)),
        LaplaceMean(epsilon=30.0, low=(0.0,) * 4, high=(1.0,) * 4),
        Fourier(epsilon=1.0, domain_sizes=(3, 5, 2)),
        Fourier(epsilon=2.0, domain_sizes=(4, 3, 2, 5), way=3),
        Fourier(epsilon=0.5, domain_sizes=(300, 70)),
        Fourier(epsilon=3.0, domain_sizes=(4,) * 28),  # 56 bits: masks beyond 2^53
        # appended (the cases above keep their draws): CALM's chosen ell = 3 > way
        CALM(epsilon=2.0, domain_sizes=(2, 2, 3, 2, 2), mix_items=False),
        # appended: OLH hashing the cells' mixed keys (the default with OLH)
        CALM(epsilon=2.0, domain_sizes=(4, 3, 2, 5), ell=2),
        FullDomain(epsilon=2.0, domain_sizes=(4, 3, 2), oracle="olh"),
        # appended: the grids' OLH over the cells' mixed keys (their default)
        HDG(epsilon=1.0, low=(0.0, -5.0, 10.0), high=(1.0, 5.0, 100.0), g1=16, g2=4),
        TDG(epsilon=2.0, low=(0.0, 0.0), high=(24.0, 120.0), g2=8),
        UniformGrid(epsilon=1.0, low=(0.0, 0.0, 0.0), high=(1.0, 2.0, 3.0), g=4),
    ]
    out = []
    for spec in specs:
        n = 30
        if isinstance(spec, GroupMean):
            # values on the grid k / 8 (exact everywhere) and from rng.random (exact too)
            reals = (
                np.where(rng.random(n) < 0.3, rng.integers(0, 9, n) / 8.0, rng.random(n))
                * (spec.high - spec.low)
                + spec.low
            )
            values: list[Any] = [
                [int(g), float(v)]
                for g, v in zip(rng.integers(0, spec.domain_size, n).tolist(), reals.tolist())
            ]
            values[0][1], values[1][1] = spec.low, spec.high
        elif hasattr(spec, "grids"):
            lo, hi = np.asarray(spec.low), np.asarray(spec.high)  # type: ignore[attr-defined]
            x = lo + (hi - lo) * rng.random((n, lo.size))
            x[0], x[1] = lo, hi  # both ends of every attribute
            values = x.tolist()
        elif isinstance(spec, (DuchiMean, LaplaceMean)):
            lo, hi = np.asarray(spec.low), np.asarray(spec.high)
            x = lo + (hi - lo) * rng.random((n, lo.size))
            x[0], x[1] = lo, hi
            values = x.tolist()
        elif isinstance(spec, AttributeSampling):
            lo, hi = np.asarray(spec.low), np.asarray(spec.high)
            x = lo + (hi - lo) * rng.random((n, lo.size))
            x[0], x[1] = lo, hi
            sizes = np.asarray(spec.domain_sizes, dtype=np.int64)
            items = rng.integers(0, sizes[None, :], size=(n, sizes.size)).tolist()
            values = [[*r, *c] for r, c in zip(x.tolist(), items, strict=True)]
        else:
            sizes = np.asarray(spec.domain_sizes)  # type: ignore[attr-defined]
            values = rng.integers(0, sizes[None, :], size=(n, sizes.size)).tolist()
        draws = 3 * spec.k if isinstance(spec, AttributeSampling) else 1
        draws = spec.attributes if isinstance(spec, (DuchiMean, LaplaceMean)) else draws
        uniforms: list[float] = rng.random(draws * n).tolist()
        total = int(sum(getattr(spec, "domain_sizes", (0,))))
        per_user = (
            6
            + getattr(spec, "attributes", 0)
            + (total if getattr(spec, "protocol", "") == "oue-z" else 0)
        )
        if isinstance(spec, LaplaceMean):  # two geometric counts per attribute, ~rho/(1-rho) each
            per_user = 6 + 2 * spec.attributes * int(4 + 12 / (1.0 - spec.rho))
        words = rng.integers(0, _U64, per_user * n, dtype=np.uint64, endpoint=True).tolist()
        coins = _ReplayCoins(uniforms, words)
        rows = [_multidim_user(spec, v, coins) for v in values]
        if isinstance(spec, LaplaceMean):  # keep the words used only (the file stays small)
            words = words[: len(words) - len(coins.words)]
            assert not coins.uniforms
        template = spec.randomize(spec._contract_values(4, np.random.default_rng(0)), rng=0)  # type: ignore[attr-defined]
        arrays = {
            k: np.array([r[k] for r in rows], dtype=template.arrays[k].dtype)
            for k in template.fields
        }
        reports = Reports(spec, **arrays)
        spec.aggregate(reports)  # a valid batch for the server
        if isinstance(spec, (SPL, SMP)):  # the replay is the spec's own sampler
            with mock.patch.object(split_module, "as_generator", lambda rng: rng):
                replayed = _ReplayCoins(uniforms, words)
                own = [spec.randomize([v], rng=replayed) for v in values]  # type: ignore[arg-type]
            for k in arrays:
                assert np.array_equal(np.concatenate([r.arrays[k] for r in own]), arrays[k]), k
        case: dict[str, Any] = {
            "values": values,
            "uniforms": uniforms,
            "words": [str(w) for w in words],
            "body": _body(reports),
        }
        if isinstance(spec, (AttributeSampling, DuchiMean, LaplaceMean, Fourier)):
            case["loss"] = spec.privacy_loss()  # from exact integers and correctly rounded logs
        if isinstance(spec, RSFD) and spec.protocol == "oue-z":
            case["thresholds"] = [str(t) for t in spec._thresholds()]
        out.append(case)
    return out


def _params() -> dict[str, list[str]]:
    # Every spec's parameter names: a JS client refuses a spec dict with a name its class
    # does not declare (an older client must not silently ignore a newer parameter), and
    # clients/js/test/params.test.js checks that each JS class declares exactly these.
    return {
        name: [f.name for f in dataclasses.fields(cls) if f.init]
        for name, cls in sorted(mechanism_registry().items())
    }


def vectors() -> dict[str, Any]:
    """File name -> content of every vector file."""
    return {
        "hashing.json": _hashing(),
        "unary.json": _unary(),
        "coins.json": _coins(),
        "bodies.json": _bodies(),
        "numeric.json": _numeric(),
        "sketch.json": _sketch(),
        "discovery.json": _discovery(),
        "encoding.json": {"encoders": _encoders(), "questions": _questions()},
        "longitudinal.json": _longitudinal(),
        "sets.json": _sets(),
        "multidim.json": _multidim(),
        "params.json": _params(),
    }


def render(content: Any) -> str:
    return json.dumps(content, indent=1) + "\n"


def main() -> int:
    for name, content in vectors().items():
        (HERE / name).write_text(render(content))
    return 0


if __name__ == "__main__":
    sys.exit(main())
