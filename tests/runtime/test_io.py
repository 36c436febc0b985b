"""Atomic writes: whole files only, readable as the umask says."""

import os
import stat

import pytest

from sparselen.runtime import io


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_outputs_get_the_umasks_mode_not_the_temporary_files(tmp_path, umask022):
    io.write_text(tmp_path / "a.txt", "x")
    io.write_json(tmp_path / "b.json", {"a": 1})
    with io.atomic_path(tmp_path / "c.bin") as tmp:
        tmp.write_bytes(b"y")
    assert {mode(tmp_path / f) for f in ("a.txt", "b.json", "c.bin")} == {0o644}
    assert io.umask() == 0o022


def test_a_stricter_umask_is_kept(tmp_path):
    old = os.umask(0o077)
    try:
        io.write_text(tmp_path / "a.txt", "x")
        assert io.umask() == 0o077
    finally:
        os.umask(old)
    assert mode(tmp_path / "a.txt") == 0o600


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), io.atomic_path(tmp_path / "a.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_the_smoke_runs_results_are_readable_by_others(smoke_run):
    """Every file of a run is readable by group and others when the umask lets it be (022)."""
    if io.umask() & 0o044:
        pytest.skip(f"umask {io.umask():03o} keeps files from others")
    private = [str(p.relative_to(smoke_run)) for p in (smoke_run / "results").rglob("*")
               if p.is_file() and mode(p) & 0o044 != 0o044]
    assert private == []
