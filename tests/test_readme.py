"""The README's commands and examples run as written, each on the install it claims.

A ```python block preceded by ``<!-- requires: MODULE -->`` needs that optional module (its extra);
every other block claims the core install (jax and numpy) and runs with every optional dependency
blocked, so an example that quietly needs flax or gymnasium fails here.
"""

import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
from helpers import subprocess_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", flags=re.S | re.M)
REQUIRES = re.compile(r"<!--\s*requires:\s*([\w.]+)\s*-->\s*\Z")
# the optional dependencies of jaxenvs' extras (pyproject.toml): none may be needed by a core example
OPTIONAL = ("flax", "optax", "chex", "gymnasium", "stable_baselines3", "sb3_contrib", "torch", "pettingzoo",
            "gymnax", "rejax", "matplotlib", "imageio", "pygame", "PIL", "scipy", "pyspiel", "pgx")
BLOCKER = f"""
import importlib.abc, sys
class _CoreOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: this example claims the core install)", name=name)
sys.meta_path.insert(0, _CoreOnly())
"""


def python_blocks() -> list[tuple[str, str | None]]:
    """The README's ```python blocks as ``(code, required module or None)``, in order."""
    blocks = []
    for m in FENCE.finditer(README):
        if m.group(1) == "python":
            req = REQUIRES.search(README[: m.start()])
            blocks.append((m.group(2), req.group(1) if req else None))
    return blocks


def _run(script: str, tmp_path: pathlib.Path, name: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    # XLA:CPU without its backend optimisations: the examples are tiny, so compiling dominates their
    # cost, and what they compute is the same (as tests/test_docs.py runs the docs' examples)
    env = subprocess_env(XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip())
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert out.returncode == 0, f"{name}:\n{script}\n{out.stderr[-3000:]}"
    return out.stdout


def test_core_examples_run_on_the_core_install(tmp_path):
    core = [code for code, needs in python_blocks() if needs is None]
    assert len(core) >= 3, "the README has a quick start, a write-your-own-environment and a wrappers example"
    stdout = _run(BLOCKER + "\n\n".join(core), tmp_path, "readme_core_examples")
    assert "targets reached:" in stdout
    payoff = float(re.search(r"mean payoff against a random opponent: (\S+)", stdout).group(1))
    # 1000 fair rounds of +-1: the mean is within 5 standard errors (5 * 1/sqrt(1000)) of 0
    assert abs(payoff) < 5 / 1000**0.5


@pytest.mark.parametrize("index", [i for i, (_, needs) in enumerate(python_blocks()) if needs is not None])
def test_examples_with_an_extra_run(index, tmp_path):
    from helpers import require

    code, needs = python_blocks()[index]
    require(needs)  # skipped where the extra is missing (the dev extra has no torch), an error under CI=true
    assert _run(code, tmp_path, f"readme_block_{index + 1}").strip(), "the example prints what it shows"


def test_readme_commands_are_what_ci_runs():
    """The README's first two commands (install + main job, install + tests) run in .ci/run verbatim."""
    commands = re.findall(r"```bash\n(.*?)```", README, flags=re.S)[0].strip().splitlines()
    assert len(commands) == 2 and "jaxenvs-train" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command.split("  #")[0].strip() in ci, command


def test_readme_jaxenvs_commands_parse():
    """Each ``jaxenvs ...`` line of the README is a valid command line of today's ``jaxenvs``."""
    from jaxenvs.cli import build_parser

    lines = [ln.split("  #")[0] for b in re.findall(r"```bash\n(.*?)```", README, flags=re.S) for ln in b.splitlines()]
    commands = [shlex.split(ln)[1:] for ln in lines if ln.startswith("jaxenvs ")]
    assert any(c[:1] == ["play"] and "--out" in c for c in commands)
    for argv in commands:
        args = build_parser().parse_args(argv)
        if argv[0] == "play" and args.render in ("gif", "mp4"):
            assert args.out, argv
