"""The suite's own scheduling under ``pytest -n 2`` (tests/conftest.py): a module's tests that share
a module-scoped fixture run on one worker, so the fixture (often a subprocess that trains) is
computed once, whichever pytest and pytest-xdist pip resolves."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import subprocess_env

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a_module_fixture_is_computed_once_under_two_workers(tmp_path):
    pytest.importorskip("xdist")
    log = tmp_path / "setups.log"
    probe = os.path.join(HERE, f"test_zz_scheduling_probe_{os.getpid()}.py")
    with open(probe, "w") as fh:
        fh.write(
            "import os\nimport pytest\n\n\n@pytest.fixture(scope='module')\ndef shared():\n"
            f"    with open({str(log)!r}, 'a') as fh:\n        fh.write(f'{{os.getpid()}}\\n')\n\n\n"
            + "".join(f"def test_{i}(shared):\n    pass\n\n\n" for i in range(6))
            + "".join(f"def test_free_{i}():\n    pass\n\n\n" for i in range(6))
        )
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", probe],
                              cwd=os.path.dirname(HERE), capture_output=True, text=True, timeout=300,
                              env=subprocess_env())
    finally:
        os.remove(probe)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "12 passed" in proc.stdout
    assert len(log.read_text().split()) == 1, "the module fixture was set up on more than one worker"
