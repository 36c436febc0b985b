"""Configuration: the shipped configs are valid, one source of defaults, the conda
environment matches the package, and bad configuration is caught before any job, with the
key and the value named."""

import copy
import dataclasses
import re
import shutil
import subprocess
import tomllib

import pytest
import yaml
from conftest import PYTHON, ROOT, SMOKE, dry_run_jobs

from sparselen.interface.config import SCHEMA, load, schema_errors
from sparselen.jobs.checks import semantic_errors
from sparselen.nn.model import ModelConfig
from sparselen.nn.olmo import OlmoConfig
from sparselen.training.train import OptimConfig

CONFIGS = [ROOT / "config.yaml", *sorted((ROOT / "configs").glob("*.yaml"))]


def default_config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_are_valid_on_their_own(path):
    """Each shipped config is complete: it is valid without being merged over another."""
    cfg = yaml.safe_load(path.read_text())
    assert schema_errors(cfg) == []
    assert semantic_errors(load([path])) == []


@pytest.mark.parametrize("path", sorted((ROOT / "configs/overlays").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_overlays_are_valid_over_the_config_they_name(path):
    """An overlay's first line names the config it is merged over; the merge is valid."""
    base = re.search(r"Overlay of (configs/\S+\.yaml)", path.read_text().splitlines()[0]).group(1)
    assert semantic_errors(load([ROOT / base, path])) == []


def schema_defaults(name: str) -> dict:
    props = yaml.safe_load(SCHEMA.read_text())["$defs"][name]["properties"]
    return {k: v["default"] for k, v in props.items() if "default" in v}


@pytest.mark.parametrize("schema_def, cls", [("model", ModelConfig), ("olmo_model", OlmoConfig),
                                             ("optimizer", OptimConfig)])
def test_the_schema_and_the_dataclasses_state_the_same_defaults(schema_def, cls):
    """The schema is the source of defaults; the dataclasses' defaults (for code that builds
    them directly) must agree with it, and every schema key must be a field."""
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    for key, value in schema_defaults(schema_def).items():
        assert key in fields, f"{schema_def}.{key} is not a field of {cls.__name__}"
        assert fields[key] == (tuple(value) if isinstance(value, list) else value), key


def requirement_names(reqs) -> dict:
    """{normalised name: the requirement as written} of PEP 508 strings."""
    return {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower().replace("_", "-"): r.replace(" ", "") for r in reqs}


def test_the_conda_environment_pins_what_the_package_needs():
    """envs/sparselen.yaml (the rules' `conda:` environment) installs exactly the package's
    runtime dependencies at the same pins, except Snakemake and its plugin, which run the
    workflow and are not needed inside a job."""
    deps = requirement_names(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    env = yaml.safe_load((ROOT / "envs/sparselen.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert requirement_names(pip) == {k: v for k, v in deps.items() if not k.startswith("snakemake")}


@pytest.mark.skipif(shutil.which("conda") is None, reason="conda is not installed (no registry here offers it)")
def test_every_job_runs_in_the_conda_environment_with_sdm_conda(tmp_path):
    out = subprocess.run([PYTHON, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                          "--workflow-profile", "none", "-n", "--sdm", "conda", "fig_parity", "--configfile",
                          *map(str, SMOKE)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    jobs = [r for r, _ in dry_run_jobs(tmp_path, "fig_parity") if r != "fig_parity"]
    assert out.stdout.count("conda-env:") == len(jobs)


def test_schema_errors_name_key_and_value():
    cfg = default_config()
    cfg["parity"]["train"]["steps"] = -5
    cfg["parity"]["scheme"] = "alibi"
    cfg["parity"]["eval"]["lengths"] = [20, 33]
    cfg["parity"]["trian"] = {}
    cfg["ppc"]["variable_assignment"]["model"] = {"rotary_pct": 2, "position": "nope"}
    errors = "\n".join(schema_errors(cfg))
    assert "parity.train.steps = -5" in errors
    assert "parity.scheme = 'alibi'" in errors
    assert "parity.eval.lengths[1] = 33" in errors
    assert "'trian'" in errors and "unknown key" in errors
    assert "ppc.variable_assignment.model.rotary_pct = 2" in errors
    assert "'position'" in errors  # a task may not set a scheme


def test_semantic_errors():
    cfg = load()
    cfg["parity"]["train"]["lengths"] = [50, 20]
    cfg["parity"]["scheme"] = "pose"
    cfg["parity"]["pose"]["target_length"] = 100
    errors = "\n".join(semantic_errors(cfg))
    assert "parity.train.lengths = [50, 20]" in errors
    assert "parity.pose.target_length = 100" in errors
    cfg = load()
    cfg["gpus_per_job"], cfg["packing"]["jobs_per_gpu"] = 2, 4
    assert semantic_errors(cfg) == ["packing.jobs_per_gpu = 4: jobs share one GPU, but gpus_per_job = 2 gives each "
                                    "job several; set gpus_per_job: 1 or packing.jobs_per_gpu: 0"]
    cfg = load()
    cfg["gpus_per_job"], cfg["resources"]["runtime_gpu"] = 1, "tpu"  # the GPU of the stacks' time limits
    assert semantic_errors(cfg)[0].startswith("resources.runtime_gpu = 'tpu': neither a GPU of the datasheets (")
    cfg["resources"]["runtime_gpu"] = "H100"
    assert semantic_errors(cfg) == []


def test_ppc_runs_are_schemes_or_named_variants():
    cfg = load()
    cfg["ppc"]["schemes"] = ["rope", "rope_base100", "alibi", "pose"]
    cfg["ppc"]["variants"] = {"rope_base100": {"scheme": "rope", "model": {"n_head": 3}}, "coupled": {"scheme": "rope"}}
    del cfg["ppc"]["pose"]
    errors = "\n".join(semantic_errors(cfg))
    assert "ppc.schemes lists 'alibi'" in errors
    assert "ppc.variants.rope_base100.model: d_model = 64 is not divisible by n_head = 3" in errors
    assert "ppc.variants.coupled: a variant cannot take the name of a position scheme" in errors
    assert "the section ppc.pose is missing" in errors
    assert "lists 'rope_base100'" not in errors and "lists 'rope'" not in errors


def test_snakemake_rejects_bad_config_before_any_job(tmp_path):
    bad = copy.deepcopy(yaml.safe_load((ROOT / "tests/smoke/config.yaml").read_text()))
    bad["parity"]["train"]["batch_size"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    out = subprocess.run([PYTHON, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--cores", "1", "--configfile", str(ROOT / "config.yaml"), str(path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "parity.train.batch_size = 0" in text and str(path) in text
    assert not (tmp_path / "results").exists()


def test_the_usage_overlay_example_changes_only_its_nested_key_and_the_seeds(tmp_path):
    usage = (ROOT / "docs/usage.md").read_text()
    example = usage.split("**An overlay for a nested key**")[1].split("```yaml\n")[1].split("```")[0]
    (tmp_path / "my-overlay.yaml").write_text(example)
    base, changed = load([ROOT / "config.yaml"]), load([ROOT / "config.yaml", tmp_path / "my-overlay.yaml"])
    assert changed["parity"]["train"]["optimizer"]["lr"] == 1.0e-3 and changed["parity"]["seeds"] == [0, 1, 2, 3]
    changed["parity"]["train"]["optimizer"]["lr"] = base["parity"]["train"]["optimizer"]["lr"]
    changed["parity"]["seeds"] = base["parity"]["seeds"]
    assert changed == base
