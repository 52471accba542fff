"""The documentation site: every ```python block of every page under ``docs/`` runs (a page's
blocks in order, in one namespace, in a fresh directory), and ``mkdocs build --strict`` passes.

Blocks that must not run use another fence (```console, ```text, ...; see
``docs/contributing.md``). The README's blocks run in tests/test_readme.py.

The pages run in ``SHARDS`` subprocesses (a few pages each, balanced by ``PAGE_SECONDS``) whose
XLA:CPU backend skips LLVM's optimisation passes (``--xla_backend_optimization_level=0``): the
examples are tiny, so compiling dominates their cost, and this halves it without changing what
they compute. The site builds in a subprocess of its own; pytest-xdist runs them side by side.
``python tests/test_docs.py OUT.json [PAGE ...]`` runs pages (all without a PAGE);
``python tests/test_docs.py OUT.json --site SITE_DIR`` builds the site.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import traceback
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "generated" not in p.relative_to(DOCS).parts)
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", flags=re.S | re.M)
# a comment right before a ```python block naming a module it needs beyond the dev extra
REQUIRES = re.compile(r"<!--\s*requires:\s*([\w.]+)\s*-->\s*\Z")
# fences the docs may use: python runs, the others are shown only
LANGUAGES = {"python", "console", "bash", "text", "json", "toml"}
FAST_COMPILE = "--xla_backend_optimization_level=0"
# seconds each page's blocks took (2 cores under heavy load): they only balance the shards; a page
# not listed counts as 20
PAGE_SECONDS = {
    "tutorials/verify.md": 87, "tutorials/turn-based-games.md": 55, "tutorials/custom-environment.md": 30,
    "guides/own-environment.md": 28, "guides/train.md": 26, "concepts.md": 25, "tutorials/games-and-traits.md": 22,
    "getting-started.md": 22, "guides/profile.md": 21, "guides/adapters.md": 18, "tutorials/multi-agent.md": 10,
    "gallery.md": 9, "guides/scale-out.md": 8, "tutorials/continuous-control.md": 7, "guides/performance.md": 3,
    "index.md": 3,
}
SHARDS = 3


def python_blocks(page: pathlib.Path) -> list[tuple[str, str | None]]:
    """The page's ```python blocks as ``(code, required module or None)``, in order."""
    text, blocks = page.read_text(), []
    for m in FENCE.finditer(text):
        if m.group(1) == "python":
            req = REQUIRES.search(text[: m.start()])
            blocks.append((m.group(2), req.group(1) if req else None))
    return blocks


def shards() -> list[list[str]]:
    """The pages with code (paths under docs/) in ``SHARDS`` groups: longest first, each into the
    group with the least seconds so far."""
    pages = sorted((str(p.relative_to(DOCS)) for p in PAGES if python_blocks(p)), key=lambda n: -PAGE_SECONDS.get(n, 20))
    groups, load = [[] for _ in range(SHARDS)], [0] * SHARDS
    for name in pages:
        i = load.index(min(load))
        groups[i].append(name)
        load[i] += PAGE_SECONDS.get(name, 20)
    return [sorted(g) for g in groups]


def run_page(page: pathlib.Path, workdir: pathlib.Path) -> dict:
    """Run the page's blocks in ``workdir``: ``{"error": traceback or None, "left_out": [...], "s": wall}``."""
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")  # a real module, as a script's
    sys.modules[module.__name__] = module  # (dataclasses look their module up)
    namespace = module.__dict__
    left_out, error, t0 = [], None, time.perf_counter()
    for i, (code, needs) in enumerate(python_blocks(page)):
        if needs is not None and importlib.util.find_spec(needs.split(".")[0]) is None:
            left_out.append(f"block {i + 1} needs {needs}")
            continue
        try:
            exec(compile(code, f"{page.relative_to(ROOT)} [python block {i + 1}]", "exec", dont_inherit=True), namespace)
        except BaseException:
            error = f"python block {i + 1} failed:\n{code}\n{traceback.format_exc()}"
            break
    return {"error": error, "left_out": left_out, "s": round(time.perf_counter() - t0, 2)}


def build_site(site_dir: pathlib.Path) -> dict:
    """``mkdocs build --strict`` into ``site_dir``: ``{"error": traceback or None, "s": wall}``."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    t0 = time.perf_counter()
    os.chdir(ROOT)  # mkdocs.yml's snippet paths are relative to the repository root
    try:
        build(load_config(str(ROOT / "mkdocs.yml"), site_dir=str(site_dir), strict=True))
        error = None
    except BaseException:
        error = traceback.format_exc()
    return {"error": error, "s": round(time.perf_counter() - t0, 2)}


def _main(out: str, *args: str) -> None:
    import jaxenvs.train  # noqa: F401  (its XLA:CPU flag, as in tests/conftest.py)

    work = pathlib.Path(out).parent
    results = {}
    if args[:1] == ("--site",):
        results["mkdocs build --strict"] = build_site(pathlib.Path(args[1]))
    else:
        for page in PAGES:
            if python_blocks(page) and (not args or str(page.relative_to(DOCS)) in args):
                results[str(page.relative_to(DOCS))] = run_page(page, work / page.relative_to(DOCS).with_suffix(""))
    pathlib.Path(out).write_text(json.dumps(results, indent=1))


# ---- the tests -------------------------------------------------------------------------------


def test_every_fence_names_a_known_language():
    bad = {
        f"{p.relative_to(ROOT)}: ```{lang or '(none)'}"
        for p in PAGES
        for lang, _ in FENCE.findall(p.read_text())
        if lang not in LANGUAGES
    }
    assert not bad, f"code fences must name one of {sorted(LANGUAGES)} (```python blocks run in the tests): {sorted(bad)}"


def _subprocess(tmp_path, *args) -> dict:
    """Run ``python tests/test_docs.py OUT.json ARGS...`` in ``tmp_path``; its results."""
    out = tmp_path / "results.json"
    from helpers import subprocess_env

    env = subprocess_env(XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip())
    proc = subprocess.run(
        [sys.executable, __file__, str(out), *map(str, args)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=900,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_the_shards_hold_every_page_with_code_once():
    names = [name for group in shards() for name in group]
    assert sorted(names) == sorted(str(p.relative_to(DOCS)) for p in PAGES if python_blocks(p))
    assert all(shards()), "a shard without pages"


@pytest.mark.parametrize("shard", range(SHARDS), ids=lambda i: f"shard{i + 1}of{SHARDS}")
def test_every_page_runs(shard, tmp_path):
    from helpers import require

    pages = shards()[shard]
    optional = {m for p in PAGES if str(p.relative_to(DOCS)) in pages for _, m in python_blocks(p) if m}
    missing = []
    for module in sorted(optional):
        try:
            require(module)  # under CI=true a missing module is an error here
        except pytest.skip.Exception:
            missing.append(module)

    results = _subprocess(tmp_path, *pages)
    assert set(pages) <= set(results), f"pages not run: {sorted(set(pages) - set(results))}"
    failed = {name: r["error"] for name, r in results.items() if r["error"]}
    assert not failed, "\n\n".join(f"== {name}: {err[-3000:]}" for name, err in failed.items())

    left_out = {name: r["left_out"] for name, r in results.items() if r.get("left_out")}
    if left_out:
        pytest.skip(f"every page ran; blocks left out for want of {missing}: {left_out}")


def test_the_site_builds_strictly(tmp_path):
    from helpers import require

    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        require(module)
    site = tmp_path / "site"
    results = _subprocess(tmp_path, "--site", site)
    assert set(results) == {"mkdocs build --strict"}
    error = results["mkdocs build --strict"]["error"]
    assert not error, error[-3000:]

    # the strict build made every page, and the gallery shows a GIF of every built-in environment
    for page in PAGES:
        rel = page.relative_to(DOCS).with_suffix("")
        html = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert html.is_file(), f"{page.relative_to(ROOT)} was not built"
    import jaxenvs

    gallery = (site / "gallery" / "index.html").read_text()
    for env_id in (i for i in jaxenvs.registry if "/" not in i):
        gif = site / "generated" / "gallery" / f"{env_id}.gif"
        assert gif.is_file() and gif.stat().st_size > 0 and f"{env_id}.gif" in gallery, env_id

    # the API reference renders Markdown: no raw Sphinx roles or reST literal markers reach a page
    raw = re.compile(r":(?:py:)?(?:class|func|mod|meth|attr|data|exc|obj|const):`")
    for html in sorted((site / "reference").rglob("*.html")):
        text = html.read_text()
        found = sorted(set(raw.findall(text)))
        assert not found, f"{html.relative_to(site)} shows raw Sphinx roles {found}: write `name` in docstrings"
    # the methods an environment author implements are documented on Environment
    reference = (site / "reference" / "jaxenvs" / "index.html").read_text()
    for method in ("reset_env", "step_env", "observation_space", "action_space", "default_params"):
        assert f"jaxenvs.core.Environment.{method}" in reference, f"Environment.{method} is missing from the reference"


if __name__ == "__main__":
    _main(*sys.argv[1:])


def test_home_and_getting_started_list_every_environment_and_the_trainer():
    import jaxenvs

    core = [i for i in jaxenvs.registry if "/" not in i]
    assert len(core) >= 8
    for page in ("index.md", "getting-started.md"):
        text = open(os.path.join(ROOT, "docs", page)).read()
        missing = [i for i in core if f"`{i}`" not in text]
        assert not missing, f"docs/{page} does not list {missing}"
        assert "jaxenvs-train" in text, f"docs/{page} does not mention jaxenvs-train"
