# Every rule's `script:`: run the package function the rule names (sparselen/jobs.py).
# Snakemake inserts the `snakemake` object above this line.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's sparselen

from sparselen.jobs import run  # noqa: E402

run(snakemake)  # noqa: F821
