"""Per-run tables in, the paper's tables out (CSV and Markdown), for every slice."""

from __future__ import annotations

import pandas as pd

from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.statistics.stats import summarize


def read_tables(paths) -> pd.DataFrame:
    """Concatenate per-run tables; hashes stay text (a hex hash like "12e4..." is not a float)."""
    return pd.concat([pd.read_csv(p, dtype={"config_hash": str}) for p in paths], ignore_index=True)


# pandas >= 3.1 reads every float back exactly (and deprecates choosing the converter); before,
# only its round-trip converter did.
EXACT_FLOATS = {} if tuple(map(int, pd.__version__.split(".")[:2])) >= (3, 1) else {"float_precision": "round_trip"}


def read_table(path) -> pd.DataFrame:
    """A table as ``write_table`` wrote it, every float read back to the same value (a table
    built from another gives the numbers it would from the one in memory)."""
    return pd.read_csv(path, **EXACT_FLOATS)


def runs_provenance(*runs: pd.DataFrame) -> dict:
    """Provenance of a table aggregated over runs: the seeds and config hashes of the runs'
    tables that carry them."""
    def values(column):
        return sorted({v for df in runs if column in df for v in df[column].unique().tolist()})

    hashes = values("config_hash")
    return provenance(None, values("seed"), **({"config_hashes": hashes} if hashes else {}))


def summary_table(df: pd.DataFrame, by: list[str], value: str = "accuracy") -> pd.DataFrame:
    """Mean and 95% interval over seeds of ``value`` (an accuracy over each run's ``n`` samples:
    the interval is floored at their binomial noise) per ``by`` cell, with per-cell sample counts."""
    out = summarize(df, by, value, n_col="n")
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
