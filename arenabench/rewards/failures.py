"""Matches that failed after the engine's retries: every constructor splits them off, counts
them and flags them, then says what a failed match means for it (never a silent tie)."""

from __future__ import annotations

from typing import TypeVar

from arenabench.types import MatchResult, RankResult

R = TypeVar("R", MatchResult, RankResult)


def split_failures(results: list[R]) -> tuple[list[R], int]:
    """The matches (or rankings) that produced a verdict (in order), and how many failed."""
    ok = [m for m in results if not m.failed]
    return ok, len(results) - len(ok)


def failure_flags(failed: int) -> list[str]:
    """The flag every constructor raises for matches that failed after the engine's retries (a
    failed ranking of a listwise constructor counts as a failed match: one judge question)."""
    return [f"failed_matches:{failed}"] if failed else []
