"""Matches that failed after the engine's retries: every constructor splits them off, counts
them and flags them, then says what a failed match means for it (never a silent tie)."""

from __future__ import annotations

from arenabench.types import MatchResult


def split_failures(results: list[MatchResult]) -> tuple[list[MatchResult], int]:
    """The matches that produced a verdict (in order), and how many failed."""
    ok = [m for m in results if not m.failed]
    return ok, len(results) - len(ok)


def failure_flags(failed: int) -> list[str]:
    """The flag every constructor raises for matches that failed after the engine's retries."""
    return [f"failed_matches:{failed}"] if failed else []
