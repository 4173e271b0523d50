"""Event-loop stall accounting for latency work (off unless ``LDPKIT_DEBUG_LOOP_STALLS`` is set).

With ``LDPKIT_DEBUG_LOOP_STALLS=<ms>`` in its environment, each collector process watches its
event loop while it serves: a task that sleeps 1 ms measures how late it wakes (a stall: the
loop ran something else that long without yielding), and :data:`gc.callbacks` time the
garbage collector's pauses. At shutdown one WARNING log line
sums them up (logger ``ldpkit.service.stalls``)::

    loop stalls > 5 ms: 12 (max 31.0 ms, total 0.20 s; 2 with a GC pause >= half of it);
    GC pauses: gen0 911 (max 0.6 ms), gen1 83 (max 1.2 ms), gen2 4 (max 149.6 ms)

``benchmarks/collector.py`` sets it and prints the line for each collector run. A stall
with a large GC pause in it is the collector's; the others are the loop's own work (a
group commit's fsync on SQLite, decoding a burst of requests) or the machine's (the
process descheduled).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from typing import Any

logger = logging.getLogger("ldpkit.service.stalls")

ENV = "LDPKIT_DEBUG_LOOP_STALLS"


class LoopStalls:
    """Counts loop stalls over ``threshold_ms`` and GC pauses (see the module docstring)."""

    def __init__(self, threshold_ms: float) -> None:
        self.threshold = threshold_ms / 1e3
        self.stalls: list[float] = []
        self.with_gc = 0
        self.gc_count = [0, 0, 0]
        self.gc_max = [0.0, 0.0, 0.0]
        self._gc_start = 0.0
        self._gc_in_tick = 0.0  # longest GC pause since the watcher last woke
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_env(cls) -> LoopStalls | None:
        value = os.environ.get(ENV)
        if not value:
            return None
        try:
            threshold = float(value)
        except ValueError:
            raise ValueError(f"{ENV} must be a number of milliseconds, got {value!r}") from None
        return cls(threshold)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_start
        gen = int(info["generation"])
        self.gc_count[gen] += 1
        self.gc_max[gen] = max(self.gc_max[gen], took)
        self._gc_in_tick = max(self._gc_in_tick, took)

    async def _watch(self) -> None:
        while True:
            start = time.perf_counter()  # uvloop's loop.time() ticks in whole milliseconds
            self._gc_in_tick = 0.0
            await asyncio.sleep(0.001)
            late = time.perf_counter() - start - 0.001
            if late > self.threshold:
                self.stalls.append(late)
                self.with_gc += self._gc_in_tick >= late / 2

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
        logger.warning("%s", self.summary())

    def summary(self) -> str:
        s = self.stalls
        pauses = ", ".join(
            f"gen{g} {self.gc_count[g]} (max {self.gc_max[g] * 1e3:.1f} ms)" for g in range(3)
        )
        return (
            f"loop stalls > {self.threshold * 1e3:g} ms: {len(s)} (max "
            f"{max(s, default=0.0) * 1e3:.1f} ms, total {sum(s):.2f} s; {self.with_gc} with a "
            f"GC pause >= half of it); GC pauses: {pauses}"
        )
