"""The README's commands and examples run as written."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_python_blocks_run_as_written(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) >= 2, "the README has a quick-start and a write-your-own-environment example"
    script = tmp_path / "readme_examples.py"
    script.write_text("\n\n".join(blocks))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "targets reached:" in out.stdout
    payoff = float(re.search(r"mean payoff against a random opponent: (\S+)", out.stdout).group(1))
    # 1000 fair rounds of +-1: the mean is within 5 standard errors (5 * 1/sqrt(1000)) of 0
    assert abs(payoff) < 5 / 1000**0.5


def test_readme_test_command_is_what_ci_runs():
    commands = re.findall(r"```bash\n(.*?)```", README, flags=re.S)[0].strip().splitlines()
    assert len(commands) == 2 and "jaxenvs-train" in commands[0] and "pytest" in commands[1]
    test_cmd = commands[1].split("#")[0].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd.replace("pip install", "python -m pip install -q") in ci


def test_readme_jaxenvs_commands_parse():
    """Each ``jaxenvs ...`` line of the README is a valid command line of today's ``jaxenvs``."""
    from jaxenvs.cli import build_parser

    lines = [ln.split("  #")[0].split() for b in re.findall(r"```bash\n(.*?)```", README, flags=re.S) for ln in b.splitlines()]
    commands = [ln[1:] for ln in lines if ln and ln[0] == "jaxenvs"]
    assert any(c[:1] == ["play"] and "--out" in c for c in commands)
    for argv in commands:
        args = build_parser().parse_args(argv)
        if argv[0] == "play" and args.render in ("gif", "mp4"):
            assert args.out, argv
