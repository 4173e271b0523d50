"""Per-user client and server rates: ldpkit's open-domain specs against pure-ldp's.

The speed target is a ratio of per-user rates ("client and server at least 100x
pure-ldp's per-user rates for the same method"), so both libraries are timed the same way
in the same process, three times each, and the spread is reported:

* **clients**: ``randomize`` of ldpkit at ``--n`` users (default 10^6) against pure-ldp's
  ``[client.privatise(x) for x in users]`` at ``--peer-n`` users (default 20,000; its
  client is a Python call per user, so its rate does not depend on n), set-up (client
  and server construction, the spec) excluded on both sides, the first call warmed up;
  ldpkit once with the users as a list of ``str`` (what pure-ldp gets) and once as a
  numpy ``U`` array (a column as telemetry often arrives); FLH also with what pure-ldp's
  FLH client gets, each user's index in an enumerated domain (an int64 array; pure-ldp
  cannot take the strings, ldpkit hashes either);
* **servers** (CMS, HCMS): ldpkit's ``aggregate`` + ``estimate`` of the 50 most frequent
  names at ``--n`` against pure-ldp's ``aggregate_all`` + ``estimate`` at ``--peer-n``
  (FLH's and the discovery servers are compared in heavy_hitters.md and
  heavy_hitters_discovery.md: pure-ldp's loop over a domain per report puts them at
  thousands of times).

Data: US baby names (``ldpkit.datasets.babyname_counts``, lowercased, ASCII letters only, so
that pure-ldp's 26-letter alphabet holds them) drawn by their birth counts. Parameters: the
benchmarks' (PEM, TreeHist, SFP: max_length 12, eps 4; CMS/HCMS: depth 256 x width 1024;
FLH: 1000 hash functions; eps 1, 2, 4, 8 for the oracles). pure-ldp needs two shims to run
on today's numpy and xxhash (see heavy_hitters.py); they do not touch the timed code paths
beyond encoding a ``str`` before hashing it.

Usage: ``python benchmarks/heavy_hitters_rates.py`` (quick: n = 10^5, peers at 5,000) or
``--full`` (writes docs/results/heavy_hitters_rates.md).

``--secure`` measures instead ldpkit's oracle clients (CMS, HCMS, FLH) with the secure
generator a device uses (``rng=None``: a fresh AES-CTR generator per call) against a seed,
alternated in the same run, 3 runs each; with ``--full`` it rewrites only the file's
"Secure generator" section (a full run without ``--secure`` keeps that section).
"""

from __future__ import annotations

import argparse
import os
import random
import string
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heavy_hitters as hh  # the pure-ldp shims (numpy 2, xxhash 4)

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "heavy_hitters_rates.md"
SECURE_HEADING = "## Secure generator (rng=None) against a seed"
LENGTH = 12
REPEATS = 3
SYMBOLS = [*string.ascii_lowercase, "*"]  # pure-ldp pads with "*"


def names(n: int, seed: int) -> np.ndarray:
    """``n`` lowercase ASCII names drawn by birth counts (an object array of str)."""
    from ldpkit.datasets import babyname_counts

    counts = babyname_counts()
    lower = counts.index.str.lower()
    merged = counts.groupby(lower).sum()
    keep = [s.isascii() and s.isalpha() for s in merged.index]
    labels = merged.index.to_numpy(dtype=object)[keep]
    weights = merged.to_numpy().astype(np.float64)[keep]
    rng = np.random.default_rng(seed)
    return labels[rng.choice(labels.size, size=n, p=weights / weights.sum())]


def index27(x: str) -> int:
    """A padded prefix of letters and "*" as an integer (pure-ldp's index mapper)."""
    return sum(SYMBOLS.index(c) * 27**i for i, c in enumerate(x))


def pure_client(method: str, eps: float) -> Any:
    """pure-ldp's client of ``method`` at the benchmarks' parameters (set-up, not timed)."""
    from pure_ldp.frequency_oracles.local_hashing import LHClient

    common: dict[str, Any] = dict(max_string_length=LENGTH, fragment_length=1)
    common.update(index_mapper=index27, padding_char="*")
    if method == "PEM":
        from pure_ldp.heavy_hitters.prefix_extending.pem_client import PEMClient

        return PEMClient(epsilon=eps, start_length=0, alphabet=SYMBOLS[:-1], **common)
    if method == "TreeHist":
        from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient

        fo = LHClient(eps / 2, d=27**LENGTH, use_olh=True, index_mapper=index27)
        return TreeHistClient(epsilon=eps, fo_client=fo, alphabet=SYMBOLS[:-1], **common)
    if method == "SFP":
        from pure_ldp.heavy_hitters.apple_sfp import SFPClient

        fo = LHClient(eps / 2, d=27**LENGTH, use_olh=True, index_mapper=index27)
        fo.sketch_based = False
        return SFPClient(eps, fo_client=fo, alphabet=SYMBOLS[:-1], **common)
    if method in ("CMS", "HCMS"):
        from pure_ldp.frequency_oracles.apple_cms import CMSClient

        server, _ = hh._pure_cms_server(eps, method == "HCMS")
        return CMSClient(eps, server.get_hash_funcs(), hh.WIDTH, is_hadamard=method == "HCMS")
    from pure_ldp.frequency_oracles.local_hashing import FastLHClient

    return FastLHClient(eps, 10_000, hh.HASHES, use_olh=True)


def ldpkit_spec(method: str, eps: float) -> Any:
    from ldpkit import CMS, FLH, HCMS
    from ldpkit.discovery import PEM, SFP, TreeHist

    return {
        "PEM": lambda: PEM(epsilon=eps, max_length=LENGTH),
        "TreeHist": lambda: TreeHist(epsilon=eps, max_length=LENGTH),
        "SFP": lambda: SFP(epsilon=eps, max_length=LENGTH),
        "CMS": lambda: CMS(epsilon=eps, width=hh.WIDTH, depth=hh.DEPTH),
        "HCMS": lambda: HCMS(epsilon=eps, width=hh.WIDTH, depth=hh.DEPTH),
        "FLH": lambda: FLH(epsilon=eps, num_hashes=hh.HASHES),
    }[method]()


def _rates(fn: Any, n: int) -> list[float]:
    out = []
    for rep in range(REPEATS):
        t0 = time.perf_counter()
        fn(rep)
        out.append(n / (time.perf_counter() - t0))
    return out


def client_rates(method: str, eps: float, users: np.ndarray, peer_users: np.ndarray) -> dict:
    """Per-user client rates (3 runs each) of both libraries, set-up excluded."""
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - pure-ldp draws from numpy's global state
    hh._patch_xxhash()
    client = pure_client(method, eps)
    if method == "FLH":  # its client takes the item's index in its enumerable domain
        index = {s: i % 10_000 for i, s in enumerate(dict.fromkeys(peer_users.tolist()))}
        items: list[Any] = [index[s] for s in peer_users.tolist()]
    else:
        items = peer_users.tolist()
    client.privatise(items[0])  # warm-up
    peer = _rates(lambda _: [client.privatise(x) for x in items], len(items))
    spec = ldpkit_spec(method, eps)
    as_list = users.tolist()
    as_u = np.array(as_list)
    spec.randomize(as_u, rng=0)  # warm-up at full size: numba's import and cached code
    spec.randomize(as_list, rng=0)
    ours_list = _rates(lambda rep: spec.randomize(as_list, rng=rep), len(as_list))
    ours_u = _rates(lambda rep: spec.randomize(as_u, rng=rep), len(as_list))
    out = {"peer": peer, "list": ours_list, "U": ours_u}
    if method == "FLH":  # the peer's own input: each user's index in the enumerated domain
        order = {s: i % 10_000 for i, s in enumerate(dict.fromkeys(as_list))}
        as_int = np.array([order[s] for s in as_list], dtype=np.int64)
        spec.randomize(as_int, rng=0)
        out["int"] = _rates(lambda rep: spec.randomize(as_int, rng=rep), len(as_list))
    return out


def server_rates(method: str, eps: float, users: np.ndarray, peer_users: np.ndarray) -> dict:
    """Per-user server rates (aggregate + estimate of the top 50) of CMS/HCMS, 3 runs each."""
    cands = [str(s) for s in dict.fromkeys(users[:5000].tolist())][:50]
    hh._patch_xxhash()
    peer = []
    for _ in range(REPEATS):
        server, _ = hh._pure_cms_server(eps, method == "HCMS")
        client = pure_client(method, eps)
        reports = [client.privatise(x) for x in peer_users.tolist()]
        t0 = time.perf_counter()
        server.aggregate_all(reports)
        [server.estimate(c, suppress_warnings=True) for c in cands]
        peer.append(len(reports) / (time.perf_counter() - t0))
    spec = ldpkit_spec(method, eps)
    ours = []
    spec.aggregate(spec.randomize(users[:20_000], rng=0))  # warm-up
    for rep in range(REPEATS):
        reports = spec.randomize(users, rng=rep)
        t0 = time.perf_counter()
        spec.estimate(spec.aggregate(reports), candidates=cands)
        ours.append(len(users) / (time.perf_counter() - t0))
    return {"peer": peer, "ours": ours}


def secure_rates(method: str, eps: float, users: np.ndarray) -> dict:
    """ldpkit's client users/s with ``rng=None`` and with a seed, alternated, 3 runs each."""
    spec = ldpkit_spec(method, eps)
    as_list = users.tolist()
    as_u = np.array(as_list)
    out: dict[str, list[float]] = {"seeded list": [], "secure list": [], "seeded U": []}
    out["secure U"] = []
    for data in (as_list, as_u):
        spec.randomize(data, rng=0)  # warm-up at full size: numba's import and cached code
        spec.randomize(data, rng=None)
    for rep in range(REPEATS):
        for kind, data in (("list", as_list), ("U", as_u)):
            for mode, rng in (("seeded", rep), ("secure", None)):
                t0 = time.perf_counter()
                spec.randomize(data, rng=rng)
                out[f"{mode} {kind}"].append(len(as_list) / (time.perf_counter() - t0))
    return out


def secure_section(n: int, users: np.ndarray, methods: list[str]) -> str:
    """The "Secure generator" section: users/s and ns per user, secure vs seeded."""
    load_start = os.getloadavg()
    rows = [
        "| method | eps | seeded, list of str | rng=None, list of str | seeded, numpy U "
        "| rng=None, numpy U | rng=None time / seeded time (U) |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in methods:
        for eps in (1.0, 4.0, 8.0):
            r = secure_rates(method, eps, users)
            cells = []
            for key in ("seeded list", "secure list", "seeded U", "secure U"):
                ns = [1e9 / x for x in r[key]]
                cells.append(f"{_spread(r[key])} ({min(ns):.0f}-{max(ns):.0f} ns)")
            slow = [a / b for a in r["seeded U"] for b in r["secure U"]]
            rows.append(
                f"| {method} | {eps:g} | "
                + " | ".join(cells)
                + f" | {min(slow):.1f}x-{max(slow):.1f}x |"
            )
            print(rows[-1], flush=True)
    load_end = os.getloadavg()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"{SECURE_HEADING}\n\n(`benchmarks/heavy_hitters_rates.py --secure --full`, {stamp}.) "
        f"ldpkit's clients at n = {n:,}: users/s (ns per user), 3 runs each, min-max, the two "
        f"generators alternated in the same run; `rng=None` builds a fresh AES-CTR generator per "
        f"call, as a device does. Load average (1 / 5 / 15 min) at the start "
        f"{' / '.join(f'{x:.1f}' for x in load_start)}, at the end "
        f"{' / '.join(f'{x:.1f}' for x in load_end)} on {os.cpu_count()} cores.\n\n"
        + "\n".join(rows)
        + "\n"
    )


def _split_secure(text: str) -> tuple[str, str]:
    """Return the file's text before the secure section, and that section ("" if none)."""
    at = text.find(SECURE_HEADING)
    return (text, "") if at < 0 else (text[:at].rstrip("\n") + "\n", text[at:])


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


def _ratio(ours: list[float], peer: list[float]) -> str:
    # worst and best pairing of the runs: the ratio's spread
    return f"{min(ours) / max(peer):.0f}x-{max(ours) / min(peer):.0f}x"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="n = 10^6, peers at 20,000")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--peer-n", type=int, default=None)
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--secure", action="store_true", help="rng=None against a seed")
    args = parser.parse_args(argv)
    n = args.n or (10**6 if args.full else 10**5)
    peer_n = args.peer_n or (20_000 if args.full else 5_000)
    users = names(n, seed=1)
    if args.secure:
        section = secure_section(n, users, args.methods or ["CMS", "HCMS", "FLH"])
        if args.full and args.n is None and args.methods is None:
            kept = _split_secure(OUT.read_text(encoding="utf-8"))[0] if OUT.exists() else ""
            OUT.write_text((kept + "\n" if kept else "") + section, encoding="utf-8")
        return 0
    peer_users = names(peer_n, seed=2)
    # pure-ldp runs on one thread and ldpkit's kernels on every core, so other load on the
    # machine lowers ldpkit's ratios: the load is part of the result
    load_start = os.getloadavg()
    lines = [
        "| method | eps | pure-ldp client users/s | ldpkit list of str | ldpkit numpy U "
        "| ratio (list) | ratio (U) | ldpkit int64 indices (the peer's input) | ratio (int64) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    server_lines = [
        "| method | eps | pure-ldp server users/s | ldpkit server users/s | ratio |",
        "|---|---|---|---|---|",
    ]
    methods = args.methods or ["PEM", "TreeHist", "SFP", "CMS", "HCMS", "FLH"]
    for method in methods:
        epsilons = (4.0,) if method in ("PEM", "TreeHist", "SFP") else (1.0, 2.0, 4.0, 8.0)
        for eps in epsilons:
            c = client_rates(method, eps, users, peer_users)
            lines.append(
                f"| {method} | {eps:g} | {_spread(c['peer'])} | {_spread(c['list'])} | "
                f"{_spread(c['U'])} | {_ratio(c['list'], c['peer'])} | "
                f"{_ratio(c['U'], c['peer'])} | "
                + (
                    f"{_spread(c['int'])} | {_ratio(c['int'], c['peer'])} |"
                    if "int" in c
                    else "- | - |"
                )
            )
            print(lines[-1], flush=True)
            if method in ("CMS", "HCMS") and not args.no_server:
                s = server_rates(method, eps, users, peer_users)
                server_lines.append(
                    f"| {method} | {eps:g} | {_spread(s['peer'])} | {_spread(s['ours'])} | "
                    f"{_ratio(s['ours'], s['peer'])} |"
                )
                print(server_lines[-1], flush=True)
    text = "\n".join(lines) + "\n\n" + "\n".join(server_lines) + "\n"
    if args.full and args.n is None and args.peer_n is None:
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load_end = os.getloadavg()
        header = (
            f"# Per-user rates, ldpkit vs pure-ldp (`benchmarks/heavy_hitters_rates.py "
            f"--full`, {stamp})\n\nldpkit at n = {n:,}, pure-ldp at n = {peer_n:,}; "
            f"{REPEATS} runs each, min-max (ratios: worst and best pairing of the runs). "
            f"Load average (1 / 5 / 15 min) at the start "
            f"{' / '.join(f'{x:.1f}' for x in load_start)}, at the end "
            f"{' / '.join(f'{x:.1f}' for x in load_end)} on {os.cpu_count()} cores.\n\n"
        )
        secure = _split_secure(OUT.read_text(encoding="utf-8"))[1] if OUT.exists() else ""
        OUT.write_text(header + text + ("\n" + secure if secure else ""), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
