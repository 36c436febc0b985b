"""Bad configuration is caught before any job, with the key and the value named."""

import copy
import subprocess

import pytest
import yaml

from conftest import PYTHON, ROOT
from sparselen.config import schema_errors, semantic_errors

SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def default_config():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.mark.parametrize("path", [ROOT / "config.yaml", ROOT / "configs/paper.yaml"])
def test_shipped_configs_are_valid(path):
    cfg = yaml.safe_load(path.read_text())
    if path.name == "paper.yaml":  # merged over config.yaml, like --configfile does
        from snakemake.utils import update_config

        base = default_config()
        update_config(base, cfg)
        cfg = base
    assert schema_errors(cfg, SCHEMA) == []
    assert semantic_errors(cfg) == []


def leaf_paths(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, prefix + (key,))
        else:
            yield prefix + (key,)


def test_paper_config_inherits_only_shared_settings_from_the_cpu_default():
    """--configfile merges configs/paper.yaml over config.yaml key by key, so a CPU-sized value
    the paper config does not restate (a task's steps, a model override) would run at paper
    scale. Only settings meant to be shared may come from config.yaml."""
    paper = set(leaf_paths(yaml.safe_load((ROOT / "configs/paper.yaml").read_text())))
    inherited = {".".join(map(str, p)) for p in leaf_paths(default_config())
                 if not any(p[:i] in paper for i in range(1, len(p) + 1))}
    assert inherited <= {"threads", "theory.floor", "report.bootstrap", "report.seed", "report.level"}


def test_schema_errors_name_key_and_value():
    cfg = default_config()
    cfg["parity"]["train"]["steps"] = -5
    cfg["parity"]["model"]["position"] = "alibi"
    cfg["parity"]["eval"]["lengths"] = [20, 33]
    cfg["parity"]["trian"] = {}
    cfg["ppc"]["variable_assignment"]["model"] = {"rotary_pct": 2, "position": "nope"}
    errors = "\n".join(schema_errors(cfg, SCHEMA))
    assert "parity.train.steps = -5" in errors
    assert "parity.model.position = 'alibi'" in errors
    assert "parity.eval.lengths[1] = 33" in errors
    assert "'trian'" in errors and "unknown key" in errors
    assert "ppc.variable_assignment.model.rotary_pct = 2" in errors
    assert "'position'" in errors  # a task may not override the scheme


def test_semantic_errors():
    cfg = default_config()
    cfg["parity"]["train"]["lengths"] = [50, 20]
    cfg["parity"]["model"]["position"] = "pose"
    cfg["parity"]["pose"]["target_length"] = 100
    errors = "\n".join(semantic_errors(cfg))
    assert "parity.train.lengths = [50, 20]" in errors
    assert "parity.pose.target_length = 100" in errors


def test_snakemake_rejects_bad_config_before_any_job(tmp_path):
    bad = copy.deepcopy(yaml.safe_load((ROOT / "tests/smoke/config.yaml").read_text()))
    bad["parity"]["train"]["batch_size"] = 0
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    out = subprocess.run([PYTHON, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(path), "--cores", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "parity.train.batch_size = 0" in text and str(path) in text
    assert not (tmp_path / "results").exists()
