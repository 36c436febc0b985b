"""How the estimate's tables read: durations as h:mm, no column that says nothing for this
run (all empty, or the same for every row where it only matters when it differs), and a dash
where a cell does not apply (a CPU job's GPU utilisation)."""

from __future__ import annotations

import math

HOUR_COLUMNS = ("hours", "max_job_h", "predicted_h", "limit_h", "gpu_hours")
ONLY_WHEN_VARIED = ("devices", "device")  # constant: said once in the header lines


def hm(hours: float) -> str:
    """``1:05`` for 1 h 5 min; ``<0:01`` for a positive time under a minute; ``-`` for none."""
    if hours is None or (isinstance(hours, float) and math.isnan(hours)):
        return "-"
    if math.isinf(hours):
        return "never"
    minutes = round(hours * 60)
    if minutes == 0 and hours > 0:
        return "<0:01"
    return f"{minutes // 60:,}:{minutes % 60:02d}"


def printable(df) -> "pd.DataFrame":
    """A copy of ``df`` to print: hour columns as h:mm (renamed ``max_job_h`` -> ``max_job``),
    columns empty on every row dropped, ``ONLY_WHEN_VARIED`` columns dropped when constant, other
    empty cells a dash."""
    out = df.copy()
    for c in list(out.columns):
        if out[c].isna().all() or (c in ONLY_WHEN_VARIED and out[c].nunique() <= 1):
            out = out.drop(columns=c)
    for c in HOUR_COLUMNS:
        if c in out.columns:
            out[c] = [hm(h) for h in out[c]]
    out = out.rename(columns={"max_job_h": "max_job", "predicted_h": "predicted", "limit_h": "limit",
                              "hours": "h:mm",
                              "gpu_hours": "gpu_h:mm"})
    return out


def markdown(df, floatfmt: str = ".3g") -> str:
    """``printable(df)`` as a markdown table; a number column with empty cells is formatted
    here (a dash among numbers makes it text to the table writer)."""
    out = printable(df)
    for c in out.columns:
        if out[c].isna().any():
            out[c] = ["-" if isinstance(v, float) and math.isnan(v) else format(v, floatfmt) for v in out[c]]
    return out.to_markdown(index=False, floatfmt=floatfmt)
