"""Packaging: ``python -m build`` gives a wheel and an sdist that ``twine check`` passes; the wheel
holds only the ``jaxenvs`` package (the trainer as ``jaxenvs.train``); and the notebooks' Colab
route works as a user runs it: a fresh environment, ``git clone`` of this repository, the first
notebook cell (which installs jaxenvs from the clone), then ``import jaxenvs`` pulls neither optax
nor flax.linen and ``jaxenvs-train`` runs.

The fresh environment is a venv whose only other packages are this interpreter's (jax, flax...),
seen through links that leave out every installed copy of jaxenvs; pip runs offline and without
build isolation, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.1.0"


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _checkout_files() -> list[str]:
    """The repository's tracked and new (not ignored) files."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout of the repository")
    out = _run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT)
    return [f for f in out.stdout.splitlines() if (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """(wheel, sdist) built by ``python -m build`` from a copy of the checkout."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for f in _checkout_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    _run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(src)])
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return wheel, sdist


def test_twine_check_passes(dists):
    out = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)])
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_wheel_holds_only_jaxenvs_with_the_trainer_inside(dists):
    wheel, sdist = dists
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"jaxenvs", f"jaxenvs-{VERSION}.dist-info"}
    # every module of the library and of train/ (as jaxenvs.train): pyproject's package list is complete
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "jaxenvs").rglob("*.py")}
    sources |= {"jaxenvs/train/" + p.relative_to(ROOT / "train").as_posix() for p in (ROOT / "train").rglob("*.py")}
    assert sources - set(names) == set()
    # data files the package reads (pyproject's package-data): Maze's hand-made and held-out levels
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT / "jaxenvs" / "envs" / "maze_levels").iterdir()}
    assert data and data - set(names) == set()
    meta = zipfile.ZipFile(wheel).read(f"jaxenvs-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta and "Project-URL: Source, https://github.com/" in meta
    assert f"jaxenvs-{VERSION}.dist-info/licenses/LICENSE" in names
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert sorted(r.split()[1].split(">")[0] for r in requires) == ["jax", "numpy"]  # a lean core
    entry_points = zipfile.ZipFile(wheel).read(f"jaxenvs-{VERSION}.dist-info/entry_points.txt").decode()
    assert "jaxenvs-train = jaxenvs.train.app.__main__:main" in entry_points
    members = tarfile.open(sdist).getnames()
    for f in ("LICENSE", "pyproject.toml", "README.md", "train/ppo.py", "jaxenvs/core.py"):
        assert f"jaxenvs-{VERSION}/{f}" in members


def _fresh_venv(path: Path) -> Path:
    """A venv at ``path`` that sees this interpreter's packages except jaxenvs; its python."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    python = path / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    deps = path / "deps"
    deps.mkdir()
    for site in dict.fromkeys(p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)):
        for entry in Path(site).iterdir():
            name = entry.name.lower()
            if name.startswith(("jaxenvs", "__editable__")) or name.endswith(".pth") or (deps / entry.name).exists():
                continue
            (deps / entry.name).symlink_to(entry)
    (purelib / "deps.pth").write_text(f"{deps}\n")
    return python


SETUP_AND_USE = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

nb = json.load(open("jaxenvs/notebooks/01_quickstart.ipynb"))
first = next(c for c in nb["cells"] if c["cell_type"] == "code")
config = Config()
config.HistoryManager.enabled = False
shell = InteractiveShell.instance(config=config)
for cell in ("".join(first["source"]),
             "import jaxenvs, jaxenvs.train\\n"
             "obs, state = jaxenvs.make('GridWorld-v0').reset(jax.random.key(0))\\n"
             "print('quick start from', jaxenvs.__file__, obs['agent'].shape)"):
    result = shell.run_cell(cell)
    result.raise_error()
"""


def test_colab_route_installs_from_a_clone(tmp_path):
    _checkout_files()  # skips outside a git checkout
    python = _fresh_venv(tmp_path / "venv")
    colab = tmp_path / "content"
    colab.mkdir()
    _run(["git", "clone", "-q", str(ROOT), str(colab / "jaxenvs")])
    env = dict(
        os.environ,
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # pip's spelling of --no-build-isolation
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        IPYTHONDIR=str(tmp_path / "ipython"),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="",
    )
    env.pop("PYTHONPATH", None)
    # before: the clone's folder is all there is, an empty namespace package
    probe = "import jaxenvs; print(getattr(jaxenvs, '__file__', None), hasattr(jaxenvs, 'make'))"
    assert _run([str(python), "-c", probe], cwd=colab, env=env).stdout.split() == ["None", "False"]
    out = _run([str(python), "-c", SETUP_AND_USE], cwd=colab, env=env)
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    assert f"quick start from {purelib / 'jaxenvs' / '__init__.py'} (2,)" in out.stdout, out.stdout
    # the installed wheel: only jaxenvs at the top level; a lean import; the console script runs
    assert {p.name for p in purelib.iterdir()} == {"jaxenvs", f"jaxenvs-{VERSION}.dist-info", "deps.pth"}
    lean = "import sys, jaxenvs; print(sorted(m for m in ('optax', 'flax.linen', 'chex', 'train') if m in sys.modules))"
    assert _run([str(python), "-c", lean], cwd=tmp_path, env=env).stdout.strip() == "[]"
    help_text = _run([str(python.parent / "jaxenvs-train"), "--help"], cwd=tmp_path, env=env).stdout
    assert "--env" in help_text
