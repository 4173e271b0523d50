"""Running compiled kernels over row blocks on plain Python threads.

The numba kernels are serial and compiled with ``nogil=True``; this module splits rows into
contiguous blocks and runs one block per thread. We do not use numba's ``parallel=True``:
the only threading layer numba finds on a stock Linux install is GNU OpenMP, which kills
any process that forks after a parallel region ran ("fork() called from a process already
using GNU OpenMP") and hangs ``multiprocessing`` pools; plain threads are fork- and
thread-safe. Kernels that seed or count per row give results independent of the split.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["WORKERS", "workers", "row_blocks", "run_blocks", "numba_available", "use_compiled"]

#: Threads used for large batches; None means the CPUs this process may run on.
WORKERS: int | None = None

# Below this many rows per block, thread start-up costs more than it saves.
MIN_BLOCK_ROWS = 8192


def workers() -> int:
    """Return the number of threads for large batches (``WORKERS`` or the usable CPUs)."""
    if WORKERS is not None:
        return max(1, int(WORKERS))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def row_blocks(
    n: int, n_workers: int | None = None, min_rows: int = MIN_BLOCK_ROWS
) -> list[tuple[int, int]]:
    """Split rows 0..n-1 into at most ``n_workers`` contiguous blocks of >= ``min_rows`` rows."""
    if n <= 0:
        return []
    k = max(1, min(n_workers or workers(), n // max(1, min_rows)))
    step = -(-n // k)
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def run_blocks(task: Callable[[int, int], Any], blocks: list[tuple[int, int]]) -> list[Any]:
    """Run ``task(start, stop)`` for every block; on threads when there are several."""
    if len(blocks) <= 1:
        return [task(a, b) for a, b in blocks]
    from concurrent.futures import ThreadPoolExecutor  # only for multi-block batches

    # A fresh pool per call: never inherited half-dead across fork(), and its cost
    # (~0.1 ms) is negligible next to blocks of >= 8192 rows.
    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        return list(pool.map(lambda ab: task(*ab), blocks))


def numba_available() -> bool:
    """Whether numba can be imported (without importing it)."""
    if "numba" in sys.modules:
        return sys.modules["numba"] is not None
    return _numba_installed()


@functools.lru_cache(maxsize=1)
def _numba_installed() -> bool:
    # find_spec searches sys.path (~0.2 ms): once per process, not on every small batch
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def use_compiled(work: int, min_work: int) -> bool:
    """Whether a kernel with a bit-exact numpy twin should run compiled.

    Yes when numba is installed and either it is already loaded (its import is paid) or
    ``work >= min_work`` (the batch is large enough to repay loading it).
    """
    if not numba_available():
        return False
    return work >= min_work or sys.modules.get("numba") is not None
