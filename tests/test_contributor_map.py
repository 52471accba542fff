"""The contributor map (docs/contributing.md, section "Every file's place") places every module of
`jaxenvs/` and `train/`, and names no file that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "contributing.md"
SECTION = "### Every file's place"


def _placed() -> set[str]:
    """The module paths the map's section names in backticks; ``folder/<name>.py`` stands for any
    module of that folder."""
    text = MAP.read_text()
    assert SECTION in text, f"{MAP} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`((?:jaxenvs|train)/[\w/<>]+\.py)`", section))


def _unplaced(modules, placed) -> list[str]:
    folders = {p.rsplit("/", 1)[0] for p in placed if p.endswith("/<name>.py")}
    return [m for m in modules if m not in placed and m.rsplit("/", 1)[0] not in folders]


def _modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in ("jaxenvs", "train") for p in (ROOT / d).rglob("*.py"))


def test_every_module_is_placed_in_the_contributor_map():
    modules, placed = _modules(), _placed()
    assert "jaxenvs/core.py" in modules and "train/base.py" in modules
    missing = _unplaced(modules, placed)
    assert not missing, (
        f"{MAP.relative_to(ROOT)} (section {SECTION.strip('# ')!r}) does not place {', '.join(missing)}: "
        "add a line '- `<path>`: what it does' there"
    )
    # the check can fail: a new module, or one in a new folder, is caught; an environment is not
    assert _unplaced(["jaxenvs/new_module.py", "train/games/arena.py", "jaxenvs/envs/new_game.py"], placed) == [
        "jaxenvs/new_module.py", "train/games/arena.py"]


def test_the_map_names_no_missing_file():
    placed = _placed()
    gone = sorted(p for p in placed if "<name>" not in p and not (ROOT / p).is_file())
    assert not gone, f"{MAP.relative_to(ROOT)} names {', '.join(gone)}, which do not exist: update the map"
    assert all((ROOT / p.rsplit("/", 1)[0]).is_dir() for p in placed if "<name>" in p)
