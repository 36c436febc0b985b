import copy
import os
import sys
from pathlib import Path

import pytest

from sparselen.runtime.device import configure_cpu

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture(autouse=True)
def _one_thread():
    """Deterministic, CI-friendly: one torch thread per test, as the CLI sets up a CPU job."""
    configure_cpu(1)


def subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


DEFAULT_CONFIG = ROOT / "config.yaml"
SMOKE_CONFIG = ROOT / "tests/smoke/config.yaml"
SMOKE = (DEFAULT_CONFIG, SMOKE_CONFIG)  # the default with the smoke overlay


def smoke_config() -> dict:
    """The configuration the smoke runs use, validated (defaults filled in)."""
    from sparselen.interface.config import load

    return load(SMOKE)


def validated(**sections) -> dict:
    """Config sections as the workflow sees them: validated, every default filled in."""
    from snakemake.utils import validate

    from sparselen.interface.config import SCHEMA

    config = copy.deepcopy(sections)
    validate(config, str(SCHEMA))
    return config


def snakemake(workdir, *args, configfile=SMOKE, timeout=900, check=True, profile=False, env=None):
    """Run the project's workflow with outputs under ``workdir`` (never the checkout);
    ``configfile``: one complete config or a list (a complete one, then overlays); ``env``:
    variables added to the jobs' environment. Without ``profile`` the workflow's default profile
    (profiles/default: quiet job blocks) is left out, so Snakemake prints every job, as the
    tests that read its output expect."""
    import subprocess

    files = [configfile] if isinstance(configfile, (str, os.PathLike)) else list(configfile)
    default = [] if profile else ["--workflow-profile", "none"]
    cmd = [PYTHON, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *default, *args,
           "--configfile", *map(str, files)]  # last: --configfile takes every word after it
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**subprocess_env(), **(env or {})})
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}")
    return out


def dry_run_jobs(workdir, *targets, configfile=SMOKE) -> list[tuple[str, dict]]:
    """(rule, wildcards) of every job a dry run would execute."""
    import re

    out = snakemake(workdir, "-n", *targets, configfile=configfile)
    jobs, current = [], None
    for line in (out.stdout + out.stderr).splitlines():
        m = re.match(r"^(?:local)?(?:rule|checkpoint) (\w+):$", line.strip())
        if m:
            current = [m.group(1), {}]
            jobs.append(current)
        m = re.match(r"^wildcards: (.*)$", line.strip())
        if m and current is not None:
            current[1] = dict(kv.split("=", 1) for kv in m.group(1).split(", "))
    return [tuple(j) for j in jobs]


TERMINAL = "terminal.txt"  # what the smoke run printed, beside its results


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The whole DAG (`all`) run once on the smoke config, as `make run` runs it (the default
    profile); tests inspect and dry-run it, and read what it printed in TERMINAL."""
    import time

    workdir = tmp_path_factory.mktemp("smoke")
    t0 = time.time()
    out = snakemake(workdir, "--cores", "2", "all", profile=True)
    (workdir / TERMINAL).write_text(out.stdout + out.stderr)
    print(f"\nsmoke run of the whole DAG: {time.time() - t0:.0f} s")
    return workdir


# `make test` runs the suite on parallel workers (pytest-xdist, --dist loadgroup). Each test
# file is one group, so a module's fixtures are built once; the tests that share the session's
# smoke run are one group, so it runs once. The longest groups are handed out first, so the
# workers finish together (make test passes --no-loadscope-reorder: pytest-xdist would otherwise
# order the groups by their number of tests, and the two longest could queue on one worker).
LONGEST_FIRST = ("test_paper_config.py", "smoke", "test_slurm.py", "test_calibration.py", "test_estimate.py",
                 "test_stack_workflow.py", "test_runlock.py")


def _group(item) -> str:
    return "smoke" if "smoke_run" in getattr(item, "fixturenames", ()) else item.path.name


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))


def pytest_configure(config):
    """Refuse --dist loadgroup where it does not group (pytest >= 9.2, pyproject.toml): the
    smoke run would then run once on every worker."""
    if getattr(config.option, "dist", "no") == "loadgroup" and tuple(map(int, pytest.__version__.split(".")[:2])) >= (9, 2):
        raise pytest.UsageError(f"pytest {pytest.__version__}: pytest-xdist's --dist loadgroup does not group tests "
                                "with it; pyproject.toml pins pytest < 9.2 (`make clean-venv test`)")
