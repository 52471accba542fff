"""The notebooks in notebooks/: committed without outputs and as ``build_notebooks.py`` writes them,
and executed top to bottom in a fresh kernel (``JAXENVS_NOTEBOOK_QUICK=1``, in a temporary working
directory), with checks on what they print and display."""

from __future__ import annotations

import base64
import importlib.util
import io
import math
import os
import re
import sys
from pathlib import Path

import imageio.v3 as iio
import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from helpers import subprocess_env

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = ("01_quickstart.ipynb", "02_train_ppo.ipynb", "03_custom_env.ipynb")
CELL_TIMEOUT_S = 300


def _generator():
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOK_DIR / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK_DIR / name, as_version=nbformat.NO_CONVERT)


# ---- the committed files -------------------------------------------------------------------------


def test_notebook_set_matches_generator():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NAMES)
    assert sorted(_generator().NOTEBOOKS) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    nb = _read(name)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name} has no code cells"
    for i, cell in enumerate(code):
        assert cell.outputs == [], f"{name}: code cell {i} is committed with outputs"
        assert cell.execution_count is None, f"{name}: code cell {i} has execution_count {cell.execution_count}"
        assert "execution" not in cell.metadata, f"{name}: code cell {i} carries execution timings"
    assert nb.metadata.kernelspec.name == "python3"
    # the quick-mode variable is documented at the top and read by the first code cell, which
    # also reports the device
    assert "JAXENVS_NOTEBOOK_QUICK=1" in nb.cells[0].source and nb.cells[0].cell_type == "markdown"
    assert 'os.environ.get("JAXENVS_NOTEBOOK_QUICK") == "1"' in code[0].source
    assert "jax.devices()" in code[0].source


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_is_what_the_generator_writes(name):
    expected = nbformat.writes(_generator().build(name)) + "\n"
    assert (NOTEBOOK_DIR / name).read_text(encoding="utf-8") == expected, (
        f"{name} differs from what notebooks/build_notebooks.py writes: edit the generator and run it"
    )


def _run_setup_cell_without_jaxenvs(monkeypatch, cwd: Path, ipython_dir: Path):
    """Run the shared first cell in an in-process IPython shell that finds only an empty
    ``jaxenvs`` namespace package, as a clone's folder imports (no history, profile in
    ``ipython_dir``, ``%pip`` recording its arguments); returns those arguments and the cell's
    ``ExecutionResult``. The real install, from a clone into a fresh
    environment, is tests/test_packaging.py's Colab route."""
    import types

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    # the cell forgets jaxenvs and imports it again: keep this process's modules and put them back
    ours = {k: v for k, v in sys.modules.items() if k == "jaxenvs" or k.startswith("jaxenvs.")}
    sys.modules["jaxenvs"] = types.ModuleType("jaxenvs")  # what a clone's folder imports as: no make
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("IPYTHONDIR", str(ipython_dir))
    monkeypatch.chdir(cwd)
    pip_calls = []
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    try:
        shell.register_magic_function(pip_calls.append, "line", "pip")
        result = shell.run_cell(_generator().SETUP, silent=True)
    finally:
        InteractiveShell.clear_instance()
        for k in [k for k in sys.modules if k == "jaxenvs" or k.startswith("jaxenvs.")]:
            del sys.modules[k]
        sys.modules.update(ours)
    return pip_calls, result


# the test process started JAX long before this cell, so the workaround rightly warns it comes late
@pytest.mark.filterwarnings("ignore:JAX has already started:RuntimeWarning")
def test_setup_cell_installs_from_a_clone(monkeypatch, tmp_path):
    root = NOTEBOOK_DIR.parent
    pip_calls, result = _run_setup_cell_without_jaxenvs(monkeypatch, NOTEBOOK_DIR, tmp_path / "ipython")
    assert result.error_in_exec is None, result.error_in_exec
    assert pip_calls == [f'install -q "{root}[train]"']
    assert "--xla_cpu_enable_concurrency_optimized_scheduler=false" in os.environ["XLA_FLAGS"]


# the test process started JAX long before this cell, so the workaround rightly warns it comes late
@pytest.mark.filterwarnings("ignore:JAX has already started:RuntimeWarning")
def test_setup_cell_without_a_clone_installs_from_the_git_url(monkeypatch, tmp_path):
    pip_calls, result = _run_setup_cell_without_jaxenvs(monkeypatch, tmp_path, tmp_path / "ipython")
    assert result.error_in_exec is None, result.error_in_exec
    assert pip_calls == ['install -q "jaxenvs[train] @ git+https://github.com/jaxenvs/jaxenvs"']


@pytest.mark.parametrize("name", NAMES)
def test_colab_link_and_gpu_note(name):
    first = _read(name).cells[0].source
    link = f"https://colab.research.google.com/github/jaxenvs/jaxenvs/blob/main/notebooks/{name}"
    assert first.startswith("[![Open In Colab]") and f"({link})" in first
    assert "Change runtime type → GPU" in first
    assert _read(name).metadata.accelerator == "GPU"


# ---- executing them --------------------------------------------------------------------------------


def _execute(name: str, tmp_path: Path) -> nbformat.NotebookNode:
    """Run every cell of ``name`` in a kernel of this interpreter; CellExecutionError on an error."""
    kernels = tmp_path / "kernels"
    write_kernel_spec(path=kernels / "python3")  # argv: this interpreter -m ipykernel_launcher
    km = KernelManager(kernel_name="python3", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    workdir = tmp_path / "work"
    workdir.mkdir()
    nb = _read(name)
    # cleanup_kc: shut the kernel down afterwards (nbclient leaves a kernel manager it was given
    # running, and the kernel would hold its memory and threads until the test session ends)
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": str(workdir)}})
    client.execute(cleanup_kc=True, env=subprocess_env())  # the kernel: the session's compilation cache
    return nb


def _outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _text(nb) -> str:
    parts = []
    for o in _outputs(nb):
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type in ("execute_result", "display_data"):
            parts.append(o.data.get("text/plain", ""))
    return "".join(parts)


def _gifs(nb) -> list[bytes]:
    return [base64.b64decode(o.data["image/gif"]) for o in _outputs(nb) if "image/gif" in o.get("data", {})]


def _pngs(nb) -> list[bytes]:
    return [base64.b64decode(o.data["image/png"]) for o in _outputs(nb) if "image/png" in o.get("data", {})]


def _gif_frames(data: bytes):
    assert data[:6] in (b"GIF87a", b"GIF89a")
    return iio.imread(io.BytesIO(data), extension=".gif")


def _number(s: str) -> float:
    return float(s.replace(",", ""))


def _check_quickstart(nb, text):
    # 10,000 envs x 100 steps in quick mode; steps/s is steps / seconds (rounding of the seconds)
    m = re.search(r"([\d,]+) steps in ([\d.]+) s: ([\d,]+) steps/s \(compilation excluded\)", text)
    assert m, text
    steps, seconds, rate = (_number(g) for g in m.groups())
    assert steps == 10_000 * 100
    assert rate > 0 and math.isclose(rate, steps / seconds, rel_tol=0.01 + 0.0006 / seconds)
    gifs = _gifs(nb)
    assert len(gifs) == 2, f"expected the GridWorld and HurdleRace GIFs, got {len(gifs)}"
    grid, race = (_gif_frames(g) for g in gifs)
    assert grid.shape[1:] == (512, 512, 3) and 1 <= len(grid) <= 20
    assert race.shape[1:] == (92, 512, 3) and len(race) >= 2
    # the runner that jumps exactly at hurdles beats the random one more often than it loses
    m = re.search(r"([\d,]+) races finished: runner 0 won (\d+)%, lost (\d+)%, drew (\d+)%", text)
    assert m, text
    races, won, lost, drew = (_number(g) for g in m.groups())
    assert races >= 1_000 and won > lost and abs(won + lost + drew - 100) <= 2


def _check_train_ppo(nb, text):
    assert "trained 2 seeds x" in text  # quick mode: 2 seeds in one call
    # the tuned defaults solve GridWorld (evaluate's bar: success 1.0, length ratio <= 1.1) on
    # every seed; the bounds here leave a margin that an untrained policy is far from
    seeds = re.findall(
        r"GridWorld-v0 seed (\d) evaluation: success_rate=([\d.]+), mean_length=([\d.]+), "
        r"mean_manhattan_distance=([\d.]+), length_ratio=([\d.]+)",
        text,
    )
    assert [int(s[0]) for s in seeds] == [0, 1], text
    for _, success, length, distance, ratio in seeds:
        assert float(success) >= 0.95 and float(ratio) <= 1.2
        assert math.isclose(float(length) / float(distance), float(ratio), rel_tol=2e-3)
    m = re.search(r"HurdleRace-v0 evaluation: decision_accuracy=([\d.]+), win_rate_vs_random=([\d.]+)", text)
    assert m, text
    accuracy, win_rate = map(float, m.groups())
    assert accuracy >= 0.9 and win_rate >= 0.8  # a random runner wins about half its races
    assert len(_pngs(nb)) == 2, "expected the GridWorld and HurdleRace learning curves"
    assert len(_gifs(nb)) == 2, "expected the GridWorld and HurdleRace policy GIFs"


def _check_custom_env(nb, text):
    from jaxenvs.checker import RULES

    m = re.search(r"check_env passed: (\d+) rules", text)
    assert m and 20 <= int(m.group(1)) <= len(RULES), text
    assert "raises ValueError: CoinCorridor step_cost must be >= 0, got -1.0" in text
    # P(coin right of the agent) = 1/8: 10,000 trials, within 5 standard errors (33.1)
    m = re.search(r"one step RIGHT: ([\d,]+) coins picked up", text)
    assert m and abs(_number(m.group(1)) - 1_250) <= 5 * math.sqrt(10_000 / 8 * 7 / 8), text
    assert "reward == -step_cost wherever no coin was picked up: True" in text
    m = re.search(r"trained (-?[\d.]+), random (-?[\d.]+), best possible (-?[\d.]+)", text)
    assert m, text
    trained, random, best = map(float, m.groups())
    # best = 1 - 0.05 * E|agent - coin|, E = (8 + 1) / 3 = 3 for distinct uniform cells of 8
    assert abs(best - 0.85) <= 0.02
    assert trained >= best - 0.05 and trained > random + 0.5
    frames = _gif_frames(_gifs(nb)[-1])
    # the 48-pixel corridor, with the caption strip policy GIFs carry below it (episode and step)
    assert frames.shape[2:] == (8 * 48, 3) and frames.shape[1] > 48


CHECKS = {
    "01_quickstart.ipynb": _check_quickstart,
    "02_train_ppo.ipynb": _check_train_ppo,
    "03_custom_env.ipynb": _check_custom_env,
}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(name, tmp_path, monkeypatch):
    monkeypatch.setenv("JAXENVS_NOTEBOOK_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend makes the PNGs
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # the kernel's profile and history
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # its connection file
    # quick budgets make compiling the bulk of the time: XLA:CPU skips its backend optimisations
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    nb = _execute(name, tmp_path)
    text = _text(nb)
    assert "[quick mode]" in text
    assert re.search(r"backend \w+: \[\w*Device", text), "the first cell reports the device"
    CHECKS[name](nb, text)
