"""Running compiled kernels over row blocks on plain Python threads.

The numba kernels are serial and compiled with ``nogil=True``; this module splits rows into
contiguous blocks and runs one block per thread. We do not use numba's ``parallel=True``:
the only threading layer numba finds on a stock Linux install is GNU OpenMP, which kills
any process that forks after a parallel region ran ("fork() called from a process already
using GNU OpenMP") and hangs ``multiprocessing`` pools; plain threads are fork- and
thread-safe. Kernels that seed or count per row give results independent of the split.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["WORKERS", "workers", "row_blocks", "run_blocks"]

#: Threads used for large batches; None means the CPUs this process may run on.
WORKERS: int | None = None

# Below this many rows per block, thread start-up costs more than it saves.
MIN_BLOCK_ROWS = 8192


def workers() -> int:
    """Number of threads for large batches (``WORKERS`` or the usable CPUs)."""
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
    # A fresh pool per call: never inherited half-dead across fork(), and its cost
    # (~0.1 ms) is negligible next to blocks of >= 8192 rows.
    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        return list(pool.map(lambda ab: task(*ab), blocks))
