"""Numbers and tables for people: compact Markdown pipe tables (no padding) for the results the
report lays out in the paper's shapes (a slice builds the rows, the report puts the table in
place), percentages, seed counts and durations as h:mm:ss."""

from __future__ import annotations

import pandas as pd


def grid(head: list[str], rows: list[list[str]]) -> str:
    """A pipe table of strings."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(r) + " |" for r in rows)])


def percent(v) -> str:
    """A share as a whole percentage; blank when missing."""
    return "" if pd.isna(v) else f"{100 * v:.0f}"


def seeds(n) -> str:
    n = int(n)
    return f"{n} seed{'s' * (n != 1)}"


def hms(seconds: float) -> str:
    """Seconds as h:mm:ss."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
