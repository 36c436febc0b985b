"""`sparselen --help`: plain text, a version, the defaults, and words that say what is computed."""

import pytest

from sparselen import __version__
from sparselen.cli import build_parser


def helps() -> dict[str, str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {"": parser.format_help(), **{name: p.format_help() for name, p in sub.choices.items()}}


def test_help_is_plain_text_with_the_defaults():
    texts = helps()
    assert set(texts) == {"", "estimate", "pilot", "gpu-check", "export-hf", "clean-checkpoints"}
    for name, text in texts.items():
        assert "``" not in text and "(default: None)" not in text and "(default: [])" not in text, name
    estimate = " ".join(texts["estimate"].split())
    assert "(default: 0.4)" in estimate and "(default: 2)" in estimate and "(default: 0.9)" in estimate
    assert "predicted against the measured wall time of each job" in estimate
    assert "(default: results)" in " ".join(texts["clean-checkpoints"].split())
    pilot = " ".join(texts["pilot"].split())
    assert "(default: 300)" in pilot and "(default: pilot_profile.json)" in pilot and "whether the loss fell" in pilot
    check = " ".join(texts["gpu-check"].split())
    assert "(default: 480.0)" in check and "(default: results/gpu_check)" in check and "largest first" in check


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"sparselen {__version__}"


def test_the_pilot_refuses_a_step_count_below_one(capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["pilot", "--steps", "0"])
    assert stop.value.code == 2 and "--steps: '0' is not a whole number of at least 1" in capsys.readouterr().err
