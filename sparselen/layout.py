"""Compact Markdown pipe tables (no padding), for the results the report lays out in the
paper's shapes: a slice builds the rows, the report puts the table in place."""

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
