"""The package's layers as code: import-linter's contracts in pyproject.toml (a layer imports
only those below it, the slices never import each other, no cycle at any depth) hold, and fail
on a deliberately added upward import, an import between slices and a cycle; every module lives
in a layer's folder and every test in its layer's."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
LAYERS = [name.strip() for line in next(c for c in CONTRACTS if c["type"] == "layers")["layers"]
          for name in line.split("|")]
ROOT_MODULES = {"__init__.py", "__main__.py", "cli.py"}


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_contracts():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in out.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("runtime/io.py", "from sparselen.report import claims", "Each layer imports only the layers below it"),
    ("training/train.py", "def _peak():\n    from sparselen.estimate import profiles", "Each layer imports only"),
    ("ppc/report.py", "from sparselen.parity import task", "The slices are independent of each other"),
    ("estimate/display.py", "from sparselen.estimate import tables", "No import cycles"),
])
def test_a_broken_rule_fails_the_contracts(module, line, broken, tmp_path):
    """An upward import (at the top of a module, or inside a function), an import between two
    slices and an import cycle inside a layer each break their contract."""
    shutil.copytree(ROOT / "sparselen", tmp_path / "sparselen", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "sparselen" / module, "a") as f:
        f.write(f"\n\n{line}  # noqa\n")
    out = lint(tmp_path)
    assert out.returncode != 0
    assert f"{broken}" in out.stdout and "BROKEN" in out.stdout, out.stdout[-3000:]


def test_every_module_lives_in_a_layer():
    package = ROOT / "sparselen"
    at_root = {p.name for p in package.glob("*.py")}
    assert at_root == ROOT_MODULES, f"modules at the package root: {sorted(at_root - ROOT_MODULES)}"
    folders = {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LAYERS) - {"cli"}, "every folder of the package is a layer of the contract, and back"


@pytest.mark.parametrize("layer", sorted(set(LAYERS) - {"cli"}))
def test_each_layer_says_what_it_holds_and_may_import(layer):
    import ast

    doc = ast.get_docstring(ast.parse((ROOT / "sparselen" / layer / "__init__.py").read_text())) or ""
    assert "May import" in doc, f"sparselen/{layer}/__init__.py: its docstring says what it holds and may import"


def test_the_tests_are_laid_out_by_layer():
    """A module's tests are in the folder of its layer; the workflow's end-to-end tests in
    ``workflow``; only this file and the shared helpers stay at the top."""
    tests = ROOT / "tests"
    folders = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert folders <= set(LAYERS) | {"workflow"}, sorted(folders - set(LAYERS))
    assert {p.name for p in tests.glob("test_*.py")} == {Path(__file__).name}
