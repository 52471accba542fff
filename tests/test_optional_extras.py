"""Every optional dependency jaxenvs imports fails, when missing, with a message naming the extra
that installs it (`jaxenvs._optional.require`). Each module is blocked in turn
(``sys.modules[name] = None``, which makes its import fail as if it were not installed) in one
subprocess, so that this process keeps its modules."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# (blocked module, what needs it, the extra the message must name)
CASES = [
    ("gymnasium", "import jaxenvs.adapters.gymnasium", "gymnasium"),
    ("gymnasium", "import jaxenvs.adapters.host", "gymnasium"),
    ("gymnasium", "jaxenvs.spaces.to_gymnasium(jaxenvs.spaces.Discrete(2))", "gymnasium"),
    ("gymnasium", "jaxenvs.spaces.from_gymnasium(None)", "gymnasium"),
    ("pettingzoo", "import jaxenvs.adapters.pettingzoo", "pettingzoo"),
    ("stable_baselines3", "import jaxenvs.adapters.sb3", "sb3"),
    ("gymnax", "jaxenvs.envs.gymnax_env._import_gymnax()", "gymnax"),
    ("gymnax", "jaxenvs.envs.gymnax_env.from_gymnax_space(None)", "gymnax"),
    ("gymnax", "jaxenvs.adapters.gymnax.to_gymnax_space(jaxenvs.spaces.Discrete(2))", "gymnax"),
    ("pygame", "jaxenvs.rendering.pygame_window.import_pygame()", "render"),
    ("imageio", "jaxenvs.rendering.io.save_gif(FRAMES, TMP + '/a.gif')", "render"),
    ("imageio_ffmpeg", "jaxenvs.rendering.io.check_video_path(TMP + '/a.mp4')", "render"),
    ("PIL", "jaxenvs.rendering.legend._pil()", "render"),
]

SCRIPT = textwrap.dedent(
    """
    import importlib, json, sys, tempfile
    import numpy as np
    import jaxenvs, jaxenvs.rendering.io, jaxenvs.rendering.pygame_window, jaxenvs.rendering.legend
    import jaxenvs.envs.gymnax_env, jaxenvs.adapters.gymnax
    from jaxenvs._optional import MissingExtraError
    FRAMES, TMP = np.zeros((2, 4, 4, 3), np.uint8), tempfile.mkdtemp()
    out = []
    for blocked, code in json.loads(sys.argv[1]):
        saved = {k: v for k, v in sys.modules.items() if k == blocked or k.startswith(blocked + ".")}
        adapters = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("jaxenvs.adapters.") and k != "jaxenvs.adapters.gymnax"}
        for k in saved:
            del sys.modules[k]
        sys.modules[blocked] = None
        try:
            exec(code)
            out.append(["no error", ""])
        except MissingExtraError as e:
            out.append(["MissingExtraError", str(e)])
        except Exception as e:
            out.append([type(e).__name__, str(e)])
        finally:
            del sys.modules[blocked]
            sys.modules.update(saved)
            sys.modules.update(adapters)
    # the CLI: `jaxenvs play --render gif` without imageio is one line naming the extra, exit 1
    sys.modules["imageio"] = None
    from jaxenvs.cli import main
    import contextlib, io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(["play", "GridWorld-v0", "--render", "gif", "--out", TMP + "/b.gif"])
    out.append([status, err.getvalue()])
    print(json.dumps(out))
    """
)


def test_each_missing_optional_module_names_its_extra():
    cases = [[blocked, code] for blocked, code, _ in CASES]
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(cases)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for (blocked, code, extra), (kind, message) in zip(CASES, results):
        assert kind == "MissingExtraError", (code, kind, message)
        assert f"needs '{blocked}" in message and "which is not installed" in message, (code, message)
        assert f'pip install "jaxenvs[{extra}]"' in message, (code, message)
        # torch's default wheel is several GB of CUDA libraries: the sb3 hint installs a CPU build first
        cpu_torch = "pip install torch --index-url https://download.pytorch.org/whl/cpu && pip install"
        assert (cpu_torch in message) == (extra == "sb3"), (code, message)
    status, stderr = results[-1]
    assert status == 1 and stderr.count("\n") == 1, stderr
    assert stderr.startswith("jaxenvs: error: saving a GIF needs 'imageio") and 'pip install "jaxenvs[render]"' in stderr
