"""Aggregation of per-run evaluation tables into the paper's tables (CSV and Markdown)."""

from __future__ import annotations

import pandas as pd

from sparselen import io
from sparselen.stats import summarize


def read_tables(paths) -> pd.DataFrame:
    """Concatenate per-run tables; hashes stay text (a hex hash like "12e4..." is not a float)."""
    return pd.concat([pd.read_csv(p, dtype={"config_hash": str}) for p in paths], ignore_index=True)


def summary_table(df: pd.DataFrame, by: list[str], value: str = "accuracy") -> pd.DataFrame:
    """Mean and 95% interval over seeds of ``value`` per ``by`` cell, with per-cell sample counts."""
    out = summarize(df, by, value)
    n = df.groupby(by, sort=True)["n"].sum().rename("n_samples").reset_index()
    return out.merge(n, on=by)


def write_table(table: pd.DataFrame, csv_path, md_path, title: str, provenance: dict) -> None:
    """CSV (tidy, machine-readable) and Markdown (readable, with its provenance below it)."""
    io.write_csv(table, csv_path)
    pretty = table.copy()
    for col in ("mean", "ci_low", "ci_high"):
        if col in pretty:
            pretty[col] = pretty[col].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
    md = [f"# {title}", "", pretty.to_markdown(index=False), "", "Provenance:", "",
          "```json", io.json_dumps(provenance), "```", ""]
    io.write_text(md_path, "\n".join(md))
