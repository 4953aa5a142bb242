"""The built wheel carries the twistd plugin: install it into a scratch venv and ask
twistd from another directory (running from the checkout would find it by accident).

Building a wheel and a venv takes a fifth of ``make test``'s time, so this runs with the
slow set (``make test-long``); ``.ci/run`` checks the same through ``make check-plugin``."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.brokerproc import REPO


@pytest.mark.slow
def test_wheel_ships_the_plugin(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheels = list(dist.glob("brokerd-*.whl"))
    assert len(wheels) == 1
    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "twisted/plugins/brokerd_plugin.py" in names
    assert "twisted/plugins/__init__.py" not in names
    assert "twisted/__init__.py" not in names
    assert not any(n.endswith("dropin.cache") for n in names)
    assert "brokerd/storage/log/partition_log.py" in names, "subpackages must be in the wheel"

    scratch = tmp_path / "venv"
    venv.create(scratch, with_pip=True)
    subprocess.run(
        [str(scratch / "bin" / "pip"), "install", "-q", str(wheels[0])],
        check=True,
        capture_output=True,
        timeout=600,
    )
    out = subprocess.run(
        [str(scratch / "bin" / "twistd"), "--help"],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert any(line.split()[:1] == ["broker"] for line in out.stdout.splitlines()), out.stdout
