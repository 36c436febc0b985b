"""Per-run tables in, the paper's tables out (CSV and Markdown), for every slice."""

from __future__ import annotations

import pandas as pd

from sparselen import io
from sparselen.provenance import provenance
from sparselen.stats import summarize


def read_tables(paths) -> pd.DataFrame:
    """Concatenate per-run tables; hashes stay text (a hex hash like "12e4..." is not a float)."""
    return pd.concat([pd.read_csv(p, dtype={"config_hash": str}) for p in paths], ignore_index=True)


def runs_provenance(df: pd.DataFrame) -> dict:
    """Provenance of a table aggregated over runs: their seeds and config hashes."""
    return provenance(None, sorted(df["seed"].unique().tolist()),
                      config_hashes=sorted(df["config_hash"].unique().tolist()))


def summary_table(df: pd.DataFrame, by: list[str], value: str = "accuracy") -> pd.DataFrame:
    """Mean and 95% interval over seeds of ``value`` per ``by`` cell, with per-cell sample counts."""
    out = summarize(df, by, value)
    n = df.groupby(by, sort=True)["n"].sum().rename("n_samples").reset_index()
    return out.merge(n, on=by)


def markdown(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """A pipe table; missing values (a cell or group that was not run) blank, not "nan"."""
    return df.astype(object).where(df.notna(), None).to_markdown(index=False, floatfmt=floatfmt, missingval="")


def write_table(table: pd.DataFrame, csv_path, md_path, title: str, provenance: dict, floatfmt: str = ".3f") -> None:
    """CSV (tidy, machine-readable) and Markdown (readable, with its provenance below it)."""
    io.write_csv(table, csv_path)
    md = [f"# {title}", "", markdown(table, floatfmt), "", "Provenance:", "", "```json", io.json_dumps(provenance),
          "```", ""]
    io.write_text(md_path, "\n".join(md))
