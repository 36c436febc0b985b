"""The calibration's file of false "holds" (``sparselen.statistics.rates.FILE``), written from
its rows: per claim, config and false-claim scenario, the count of "holds" at the sizes run at.
``benchmarks/calibration.py --no-effect --write`` makes it; the report reads it
(``sparselen.statistics.rates``)."""

from __future__ import annotations

from pathlib import Path

from sparselen import __version__
from sparselen.calibration import DEVELOPED, FALSE, claim_of
from sparselen.runtime import io
from sparselen.runtime.provenance import config_hash
from sparselen.statistics.rates import config_sizes, upper_bound


def entries(rows, sizes_by_config: dict) -> list[dict]:
    """The file's entries from the calibration's rows (``calibration.run``'s dicts) where the
    claim is false; ``sizes_by_config``: config name -> ``config_sizes``. Each entry: the
    scenario's kind, condition and form, its "holds" with the stability rule (``holds``, what the
    report says) and by the intervals alone (``holds_interval``), and the one-sided 95% upper
    bound of the first (``upper_bound``)."""
    out = []
    for r in rows:
        if r["truth"] != FALSE:
            continue
        n = int(r["replicates"])
        holds = round(r["holds"] * n)
        out.append({"claim": r["claim"], "config": r["config"], "scenario": r["scenario"],
                    "kind": r.get("kind", DEVELOPED), "condition": r.get("condition", ""), "form": r.get("form", ""),
                    "sizes": sizes_by_config[r["config"]][claim_of(r["claim"]).slice],
                    "holds": holds, "holds_interval": round(r.get("holds_interval", r["holds"]) * n),
                    "replicates": n, "upper_bound": round(upper_bound(holds, n), 4)})
    return out


def write(path: Path, rows, configs: dict, command: str, n_boot: dict, seed: int) -> None:
    """The file: per claim, config and false-claim scenario, the count of "holds" and the sizes
    run at; provenance without a date (the command, the package's version, the configs' hashes
    and bootstrap replicates)."""
    sizes = {name: config_sizes(cfg) for name, cfg in configs.items()}
    table = {"command": command, "version": __version__, "seed": seed,
             "configs": {name: {"config_hash": config_hash(cfg), "n_boot": n_boot[name], "sizes": sizes[name]}
                         for name, cfg in configs.items()},
             "entries": entries(rows, sizes)}
    io.write_json(path, table)
