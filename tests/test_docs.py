"""The documentation site: ``mkdocs build --strict`` passes, and every ```python block of every
page under ``docs/`` runs (a page's blocks in order, in one namespace, in a fresh directory).

Blocks that must not run use another fence (```console, ```text, ...; see
``docs/contributing.md``). The README's blocks run in tests/test_readme.py.
"""

import pathlib
import re

import pytest

from conftest import require

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "generated" not in p.relative_to(DOCS).parts)
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```\s*$", flags=re.S | re.M)
# a comment right before a ```python block naming a module it needs beyond the dev extra
REQUIRES = re.compile(r"<!--\s*requires:\s*([\w.]+)\s*-->\s*\Z")
# fences the docs may use: python runs, the others are shown only
LANGUAGES = {"python", "console", "bash", "text", "json", "toml"}


def python_blocks(page: pathlib.Path) -> list[tuple[str, str | None]]:
    """The page's ```python blocks as ``(code, required module or None)``, in order."""
    text, blocks = page.read_text(), []
    for m in FENCE.finditer(text):
        if m.group(1) == "python":
            req = REQUIRES.search(text[: m.start()])
            blocks.append((m.group(2), req.group(1) if req else None))
    return blocks


def test_every_fence_names_a_known_language():
    bad = {
        f"{p.relative_to(ROOT)}: ```{lang or '(none)'}"
        for p in PAGES
        for lang, _ in FENCE.findall(p.read_text())
        if lang not in LANGUAGES
    }
    assert not bad, f"code fences must name one of {sorted(LANGUAGES)} (```python blocks run in the tests): {sorted(bad)}"


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_page_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    left_out = []
    for i, (code, module) in enumerate(python_blocks(page)):
        if module is not None:
            try:
                require(module)
            except pytest.skip.Exception:
                left_out.append(f"block {i + 1} ({module} is not installed)")
                continue
        try:
            exec(compile(code, f"{page.relative_to(ROOT)} [python block {i + 1}]", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{page.relative_to(ROOT)}: python block {i + 1} failed:\n{code}") from error
    if left_out:
        pytest.skip(f"{page.relative_to(ROOT)}: every other block ran; left out: {', '.join(left_out)}")


def test_site_builds_strictly(tmp_path):
    require("mkdocs")
    require("material")
    require("mkdocstrings_handlers.python")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(tmp_path / "site"), strict=True)
    build(config)
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    for page in PAGES:
        rel = page.relative_to(DOCS).with_suffix("")
        html = site / ("index.html" if rel.name == "index" else rel / "index.html")
        assert html.is_file(), f"{page.relative_to(ROOT)} was not built"
    import jaxenvs

    gallery = (site / "gallery" / "index.html").read_text()
    for env_id in (i for i in jaxenvs.registry if "/" not in i):
        assert (site / "generated" / "gallery" / f"{env_id}.gif").is_file(), env_id
        assert f"{env_id}.gif" in gallery, env_id
