"""The README's image: the default config's parity figure, copied from a run together with the
table it was drawn from and what it was drawn on, and compared with another run's table within
seed noise.

    python -m sparselen.report.readme_figure --write results   # after `make run` on config.yaml
    python -m sparselen.report.readme_figure --check results   # does this run agree with the image?

The same seeds give slightly different numbers on another CPU (training amplifies differences
in the lowest bits), so a fresh run is compared cell by cell with the image's table: a cell
agrees where the difference of the two means lies within the half-width of their intervals
combined (the root of the sum of their squared half-widths, a 95% interval of the difference
where the seed sets differ), and the runs agree where at most AGREE_SHARE of the cells do not,
the share that chance alone leaves outside."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from sparselen.runtime import io
from sparselen.runtime.hardware import cpu_info

REPO = Path(__file__).resolve().parents[2]
IMAGE, TABLE, SOURCE = (Path("docs/figures") / name for name in ("parity.png", "parity.csv", "parity.json"))
RUN_IMAGE, RUN_TABLE = Path("figures/parity.png"), Path("parity/table.csv")
CELL = ["K_train", "scheme", "k_test", "length"]
AGREE_SHARE = 0.05
# what the image depends on in config.yaml: a change to it makes the image stale
CONFIG_KEYS = ("parity", "seed_offset")


def drawn_from(config: dict) -> dict:
    """The parts of a config the README's parity figure depends on."""
    return {k: config.get(k) for k in CONFIG_KEYS}


def write(results: Path, repo: Path = REPO, config: Path | None = None) -> None:
    """Copy a run's parity figure and table into docs/figures, with the config section and the
    CPU they came from (``parity.json``)."""
    for part in (RUN_IMAGE, RUN_TABLE):
        if not (results / part).is_file():
            raise SystemExit(f"{results / part} does not exist: run `make run` (config.yaml) first")
    cfg = yaml.safe_load((config or repo / "config.yaml").read_text())
    shutil.copyfile(results / RUN_IMAGE, repo / IMAGE)
    shutil.copyfile(results / RUN_TABLE, repo / TABLE)
    io.write_text(repo / SOURCE, json.dumps({"config": drawn_from(cfg), "cpu": cpu_info()["model"]}, indent=2) + "\n")


def compare(image: pd.DataFrame, fresh: pd.DataFrame) -> pd.DataFrame:
    """Per cell of the image's table: both means, their difference, the combined half-width and
    whether the difference lies within it; a cell missing from ``fresh`` does not agree."""
    both = image.merge(fresh, on=CELL, how="left", suffixes=("_image", "_run"))
    half = lambda side: (both[f"ci_high_{side}"] - both[f"ci_low_{side}"]) / 2  # noqa: E731
    both["difference"] = both["mean_run"] - both["mean_image"]
    both["allowed"] = np.sqrt(half("image") ** 2 + half("run") ** 2)
    both["agrees"] = both["difference"].abs().le(both["allowed"] + 1e-9)
    return both[[*CELL, "mean_image", "mean_run", "difference", "allowed", "agrees"]]


def agrees(cells: pd.DataFrame) -> bool:
    return (~cells["agrees"]).sum() <= AGREE_SHARE * len(cells)


def check(results: Path, repo: Path = REPO) -> int:
    """Print how a run's parity table compares with the README's; 0 where they agree."""
    if not (results / RUN_TABLE).is_file():
        raise SystemExit(f"{results / RUN_TABLE} does not exist: run `make run` (config.yaml) first")
    cells = compare(pd.read_csv(repo / TABLE), pd.read_csv(results / RUN_TABLE))
    source = json.loads((repo / SOURCE).read_text())
    off = cells[~cells["agrees"]]
    print(f"The README's image (drawn on {source['cpu']}) against {results / RUN_TABLE} (this machine: "
          f"{cpu_info()['model']}): {len(off)} of {len(cells)} cells differ by more than their combined 95% "
          f"half-width (at most {AGREE_SHARE:.0%} allowed); largest difference "
          f"{cells['difference'].abs().max():.3f}")
    if len(off):
        print(off.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ok = agrees(cells)
    print("agrees within seed noise" if ok else "does not agree: redraw it with --write after `make run`")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="RESULTS", help="copy RESULTS' parity figure into docs/figures")
    mode.add_argument("--check", type=Path, metavar="RESULTS", help="compare RESULTS' parity table with the README's")
    args = parser.parse_args(argv)
    if args.write:
        write(args.write)
        return check(args.write)
    return check(args.check)


if __name__ == "__main__":
    sys.exit(main())
