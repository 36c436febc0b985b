"""What two test modules need beyond the Python environment, set up by the test command itself
(``make test`` runs ``python tests/extras.py`` before pytest), cached, so a second run reuses it:

- **the OLMo codebase** (``tests/nn/test_olmo_codebase.py``): the ``ai2-olmo`` wheel, downloaded
  without its dependencies and unpacked under ``.cache/tests/olmo/src`` (only its model and
  config modules are imported), and ``omegaconf``, which they import, installed into a target
  folder of its own (``.cache/tests/olmo/deps``), so neither enters the project's environment
  (ai2-olmo pins numpy < 2 and pulls cloud clients);
- **headless Chromium** (``tests/report/test_figures.py``, the report read at its size in a browser):
  Debian's ``chromium`` package, installed with apt-get where this process may (root).

Where a step cannot be taken, the reason is written beside the cache and the test that needs
it skips with that reason. Every command's output goes to ``logs/test-extras.log``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "tests"
LOG = ROOT / "logs" / "test-extras.log"
OLMO = CACHE / "olmo"
OLMO_WHEEL = "ai2-olmo==0.6.0"
OLMO_DEPS = ("omegaconf",)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_UNAVAILABLE = CACHE / "chromium.unavailable"


def olmo_source() -> tuple[Path | None, Path | None, str]:
    """(the unpacked codebase, the folder of its dependencies, why not): ``SPARSELEN_OLMO_SRC``
    (with omegaconf importable) where set, else the cache this module fills."""
    if os.environ.get("SPARSELEN_OLMO_SRC"):
        return Path(os.environ["SPARSELEN_OLMO_SRC"]), None, ""
    if (OLMO / "src/olmo/model.py").exists() and (OLMO / "deps").is_dir():
        return OLMO / "src", OLMO / "deps", ""
    failed = OLMO / "unavailable"
    why = failed.read_text().strip() if failed.exists() else "not set up"
    return None, None, f"the OLMo codebase is not cached ({why}): run `python tests/extras.py` (make test does)"


def chromium() -> tuple[str | None, str]:
    """(the headless browser's path, why not)."""
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if found:
        return found, ""
    why = CHROMIUM_UNAVAILABLE.read_text().strip() if CHROMIUM_UNAVAILABLE.exists() else "not set up"
    return None, f"headless Chromium is not installed ({why}): run `python tests/extras.py` as root (make test does)"


def _run(cmd: list[str], log) -> bool:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env).returncode == 0


def set_up_olmo(log) -> str:
    if olmo_source()[0] is not None:
        return "OLMo codebase: cached"
    wheels, failed = OLMO / "wheel", OLMO / "unavailable"
    shutil.rmtree(OLMO, ignore_errors=True)
    wheels.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if not _run(pip + ["download", "--no-deps", "--only-binary", ":all:", OLMO_WHEEL, "-d", str(wheels)], log):
        failed.write_text(f"pip download {OLMO_WHEEL} failed (logs/test-extras.log)")
        return f"OLMo codebase: {failed.read_text()}"
    if not _run(pip + ["install", "--quiet", "--target", str(OLMO / "deps.part"), *OLMO_DEPS], log):
        failed.write_text(f"pip install --target {' '.join(OLMO_DEPS)} failed (logs/test-extras.log)")
        return f"OLMo codebase: {failed.read_text()}"
    with zipfile.ZipFile(next(wheels.glob("*.whl"))) as wheel:
        wheel.extractall(OLMO / "src.part")
    (OLMO / "src.part").rename(OLMO / "src")  # last: a half-done setup is never taken as done
    (OLMO / "deps.part").rename(OLMO / "deps")
    return f"OLMo codebase: {OLMO_WHEEL} unpacked into {OLMO.relative_to(ROOT)}"


def set_up_chromium(log) -> str:
    if chromium()[0] is not None:
        return f"Chromium: {chromium()[0]}"
    CHROMIUM_UNAVAILABLE.unlink(missing_ok=True)
    if not shutil.which("apt-get"):
        why = "no apt-get on this machine: install a Chromium or Chrome of its own"
    elif os.geteuid() != 0:
        why = "apt-get needs root: `sudo apt-get install chromium`"
    elif not (_run(["apt-get", "update", "-qq"], log) and
              _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"], log)):
        why = "apt-get install chromium failed (logs/test-extras.log)"
    else:
        return f"Chromium: installed from Debian's packages ({chromium()[0]})"
    CHROMIUM_UNAVAILABLE.write_text(why)
    return f"Chromium: {why}"


def main() -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "a") as log:
        for step in (set_up_olmo, set_up_chromium):
            print(f"test extras: {step(log)}", flush=True)


if __name__ == "__main__":
    main()
