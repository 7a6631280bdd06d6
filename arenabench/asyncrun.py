"""Run a coroutine to completion from synchronous code, whether or not a loop is running."""

from __future__ import annotations

import asyncio
import threading


def run_coroutine(coro, name: str = "arenabench-async"):
    """``asyncio.run(coro)`` from sync code; from inside a running loop, in a short-lived thread
    (which blocks the calling loop until done). The engine's pipelined schedule and
    :class:`~arenabench.judges.openai_compat.OpenAIJudge`'s sync entry point share it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict = {}

    def worker() -> None:
        try:
            box["out"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["exc"] = exc

    thread = threading.Thread(target=worker, name=name, daemon=True)
    thread.start()
    thread.join()
    if "exc" in box:
        raise box["exc"]
    return box["out"]
