"""The import graph of the library (`jaxenvs/`) and the trainer (`train/`, installed as
`jaxenvs.train`), read from the source with `ast`: imports at module level and inside functions
count alike (an ``if TYPE_CHECKING:`` block does not). The rules (docs/contributing.md, "The layer
rules"):

- no module of `jaxenvs/` outside the command lines (`jaxenvs/cli/`) imports the trainer;
- no import cycle among the modules;
- an import of a project module inside a function says why on its line (``# lazy: <reason>``),
  and there are at most `MAX_LAZY` of them;
- what users read and copy (the docs' and README's examples, the notebooks, `benchmarks/`,
  `examples/`) imports public modules only, never a ``_private`` one;
- no two modules share a file name, other than `SHARED_NAMES`.

Each check is shown able to fail on a small planted package that breaks it.
"""

from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"jaxenvs": ROOT / "jaxenvs", "jaxenvs.train": ROOT / "train"}
ALIASES = {"train": "jaxenvs.train"}  # `train` is the trainer's folder; installed, it is `jaxenvs.train`
TRAINER = "jaxenvs.train"
APPLICATIONS = ("jaxenvs.cli",)  # the command lines may import the trainer
MAX_LAZY = 60
LAZY = re.compile(r"#\s*lazy:\s*\S")
SHARED_NAMES = {  # file names two modules may share, each with its reason
    "__init__.py": "every package has one",
    "__main__.py": "`python -m` runs a package's",
    "base.py": "the base class a package's members subclass (wrappers' `Wrapper`, the trainers' `Trainer`)",
    "profile.py": "`jaxenvs.profile`, the documented module, and `jaxenvs/cli/profile.py`, the command running it",
    "connect_four.py": "a game's environment (`jaxenvs/envs/`) and its solver (`jaxenvs/games/`) share its name",
    "kuhn_poker.py": "a game's environment (`jaxenvs/envs/`) and its solver (`jaxenvs/games/`) share its name",
    "tic_tac_toe.py": "a game's environment (`jaxenvs/envs/`) and its solver (`jaxenvs/games/`) share its name",
}
USER_FACING = ("README.md", "docs/**/*.md", "notebooks/*.ipynb", "benchmarks/**/*.py", "examples/**/*.py")


@dataclass(frozen=True)
class Import:
    """One edge of the graph: an import statement of module ``source`` naming module ``target``."""

    source: str
    target: str
    path: Path
    line: int
    lazy: bool  # inside a function (or lambda): it runs when called, not at import time
    reason: bool  # a ``# lazy: <reason>`` comment on one of the statement's lines

    def __str__(self):
        return f"{self.source} -> {self.target} ({self.path.name}:{self.line}{', in a function' if self.lazy else ''})"


def module_files(packages: dict[str, Path]) -> dict[str, Path]:
    """Every module of ``packages`` (dotted name -> folder) by its dotted name."""
    found = {}
    for name, folder in packages.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            found[".".join([name, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return found


def _import_statements(tree: ast.AST):
    """(statement, inside a function) for every import, ``if TYPE_CHECKING:`` bodies left out."""
    todo = [(tree, False)]
    while todo:
        node, lazy = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
            continue
        lazy = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        skip = node.body if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING") else ()
        todo.extend((child, lazy) for child in ast.iter_child_nodes(node) if not any(child is s for s in skip))


def imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dotted names a statement imports (``from a import b``: ``a.b``, which is ``a``'s name
    ``b`` or its submodule); relative imports resolved against ``package``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
    return [f"{base}.{a.name}" for a in node.names] + [base]


def imports(packages: dict[str, Path], aliases: dict[str, str] = ALIASES) -> list[Import]:
    """The import statements of the modules of ``packages`` that name one of those modules; each
    names the longest dotted prefix that is a module (``from a import b``: ``a.b`` if it is a
    module, else ``a``). ``aliases`` spells a package another way (``train`` for ``jaxenvs.train``)."""
    files = module_files(packages)

    def canonical(name: str) -> str:
        for alias, real in aliases.items():
            if name == alias or name.startswith(alias + "."):
                return real + name[len(alias):]
        return name

    def module_of(name: str) -> str | None:
        parts = canonical(name).split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in files), None)

    found = []
    for source, path in files.items():
        text = path.read_text()
        lines = text.splitlines()
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        for node, lazy in _import_statements(ast.parse(text, str(path))):
            names = imported_names(node, package)
            if isinstance(node, ast.ImportFrom):  # `from a import b`: the submodule a.b, else a itself
                base = names.pop()
                targets = [canonical(n) if canonical(n) in files else module_of(base) for n in names]
            else:
                targets = [module_of(n) for n in names]
            reason = any(LAZY.search(line) for line in lines[node.lineno - 1: node.end_lineno])
            for target in dict.fromkeys(t for t in targets if t and t != source):
                found.append(Import(source, target, path, node.lineno, lazy, reason))
    return found


def trainer_imports(edges: list[Import], trainer: str = TRAINER, applications=APPLICATIONS) -> list[Import]:
    """The library's imports of the trainer (the applications' allowed)."""
    inside = lambda name, pkg: name == pkg or name.startswith(pkg + ".")
    return [e for e in edges if inside(e.target, trainer) and not inside(e.source, trainer)
            and not any(inside(e.source, a) for a in applications)]


def cycles(edges: list[Import]) -> list[list[str]]:
    """The import cycles: each strongly connected set of two or more modules (Tarjan's algorithm,
    iterative), sorted."""
    graph = defaultdict(set)
    for e in edges:
        graph[e.source].add(e.target)
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def lazy_imports(edges: list[Import]) -> dict[tuple[Path, int], Import]:
    """The function-level import statements of project modules, one per statement."""
    return {(e.path, e.line): e for e in edges if e.lazy}


def _code_blocks(path: Path) -> list[str]:
    """The Python a user reads in ``path``: a script, a page's ```python blocks, a notebook's code
    cells (IPython's ``%`` and ``!`` lines left out)."""
    if path.suffix == ".py":
        return [path.read_text()]
    if path.suffix == ".md":
        return re.findall(r"^```python[^\n]*\n(.*?)^```", path.read_text(), flags=re.M | re.S)
    cells = json.loads(path.read_text())["cells"]
    return ["".join(line for line in (c["source"] if isinstance(c["source"], list) else c["source"].splitlines(True))
                    if not line.lstrip().startswith(("%", "!")))
            for c in cells if c["cell_type"] == "code"]


def private_imports(paths: list[Path], packages=("jaxenvs", "train")) -> list[str]:
    """``path: module`` for each import of a ``_private`` module of ``packages`` in ``paths``."""
    found = []
    for path in paths:
        for code in _code_blocks(path):
            try:
                tree = ast.parse(code)
            except SyntaxError:  # a block that is not meant to run whole (the docs' tests run them)
                continue
            for node, _ in _import_statements(tree):
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue
                for name in imported_names(node, ""):
                    parts = name.split(".")
                    private = [i for i, p in enumerate(parts) if i and p.startswith("_") and not p.startswith("__")]
                    # `from jaxenvs.x import _name` names a private module or a private name: both refused
                    if parts[0] in packages and private:
                        found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {'.'.join(parts[: private[0] + 1])}")
    return sorted(set(found))


def user_facing(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in USER_FACING for p in root.glob(pattern) if "generated" not in p.parts})


def shared_names(folders: list[Path], allowed=SHARED_NAMES) -> dict[str, list[str]]:
    """File names that two or more modules of ``folders`` share, ``allowed`` aside."""
    where = defaultdict(list)
    for folder in folders:
        for path in folder.rglob("*.py"):
            where[path.name].append(str(path.relative_to(folder.parent)))
    return {name: sorted(paths) for name, paths in sorted(where.items()) if len(paths) > 1 and name not in allowed}


# ---- the project keeps the rules


EDGES = imports(PACKAGES)


def test_the_graph_is_read():
    assert len(module_files(PACKAGES)) > 100
    assert any(e.source == "jaxenvs.cli.players" and e.target.startswith(TRAINER) for e in EDGES)
    assert any(e.source.startswith(TRAINER) and e.target == "jaxenvs.games" for e in EDGES)


def test_the_library_never_imports_the_trainer():
    found = trainer_imports(EDGES)
    assert not found, "the library imports the trainer (only jaxenvs/cli/ may): " + "; ".join(map(str, found))


def test_no_import_cycle():
    found = cycles(EDGES)
    assert not found, "import cycles (function-level imports count): " + "; ".join(" <-> ".join(c) for c in found)


def test_function_level_imports_are_few_and_each_says_why():
    lazy = lazy_imports(EDGES)
    silent = [str(e) for e in lazy.values() if not e.reason]
    assert not silent, "a function-level import of a project module needs '# lazy: <reason>' on its line: " + "; ".join(silent)
    assert len(lazy) <= MAX_LAZY, f"{len(lazy)} function-level imports of project modules, at most {MAX_LAZY}: hoist some"


def test_user_facing_code_imports_public_modules_only():
    paths = user_facing()
    assert {p.suffix for p in paths} == {".md", ".ipynb", ".py"} and ROOT / "README.md" in paths
    found = private_imports(paths)
    assert not found, "user-facing code imports private modules or names: " + "; ".join(found)


def test_no_two_modules_share_a_file_name():
    found = shared_names([ROOT / "jaxenvs", ROOT / "train"])
    assert not found, "modules that share a file name (rename one, or add it to SHARED_NAMES with a reason): " + str(found)
    assert all(reason.strip() for reason in SHARED_NAMES.values())


# ---- each check can fail


def _plant(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return {"jaxenvs": root / "jaxenvs", "jaxenvs.train": root / "train"}


def test_a_library_import_of_the_trainer_is_caught(tmp_path):
    packages = _plant(tmp_path, {
        "jaxenvs/__init__.py": "",
        "jaxenvs/games/__init__.py": "",
        "jaxenvs/games/opponents.py": "def load(run):\n    from jaxenvs.train.policy import load_policy  # lazy: x\n",
        "jaxenvs/games/matches.py": "import train.policy\n",
        "jaxenvs/cli/__init__.py": "from jaxenvs.train import policy\n",
        "train/__init__.py": "",
        "train/policy.py": "from jaxenvs.games import matches\n",
    })
    found = {(e.source, e.target, e.lazy) for e in trainer_imports(imports(packages))}
    assert found == {("jaxenvs.games.opponents", "jaxenvs.train.policy", True),
                     ("jaxenvs.games.matches", "jaxenvs.train.policy", False)}  # the CLI's import is allowed


def test_a_cycle_through_a_function_level_import_is_caught(tmp_path):
    packages = _plant(tmp_path, {
        "jaxenvs/__init__.py": "",
        "jaxenvs/a.py": "from jaxenvs import b\n",
        "jaxenvs/b.py": "def f():\n    from . import c\n",
        "jaxenvs/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jaxenvs import d\n"
                        "def g():\n    import jaxenvs.a\n",
        "jaxenvs/d.py": "from jaxenvs.c import g\n",  # c -> d only under TYPE_CHECKING: no cycle c <-> d
    })
    assert cycles(imports(packages)) == [["jaxenvs.a", "jaxenvs.b", "jaxenvs.c"]]


def test_function_level_imports_without_a_reason_or_too_many_are_caught(tmp_path):
    packages = _plant(tmp_path, {
        "jaxenvs/__init__.py": "",
        "jaxenvs/low.py": "",
        "jaxenvs/high.py": "def f():\n    from jaxenvs import low  # lazy: heavy\n"
                           "def g():\n    from jaxenvs.low import (\n        x,\n    )\n"
                           "def h():\n    import numpy  # a third-party module is not counted\n",
    })
    lazy = lazy_imports(imports(packages))
    assert sorted((e.line, e.reason) for e in lazy.values()) == [(2, True), (4, False)]


def test_private_imports_in_user_facing_code_are_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "text\n```python\nimport jaxenvs\nfrom jaxenvs._backend import platform\n```\n"
        "```console\nfrom jaxenvs._cache import x\n```\n")
    (tmp_path / "nb.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["%matplotlib inline\n", "import jaxenvs.testing.runs\n", "import train._x\n"]},
        {"cell_type": "markdown", "source": "from jaxenvs import _traces"}]}))
    (tmp_path / "bench.py").write_text("from jaxenvs.testing import _stats, verify_port\nfrom jaxenvs import __version__\n")
    found = private_imports([tmp_path / "docs" / "page.md", tmp_path / "nb.ipynb", tmp_path / "bench.py"])
    assert [f.rsplit(": ", 1)[1] for f in found] == ["jaxenvs.testing._stats", "jaxenvs._backend", "train._x"]


def test_shared_file_names_are_caught(tmp_path):
    _plant(tmp_path, {"jaxenvs/__init__.py": "", "jaxenvs/cli/__init__.py": "", "jaxenvs/cli/phases.py": "",
                      "jaxenvs/checker/phases.py": "", "train/__init__.py": "", "train/phases.py": "",
                      "train/base.py": "", "jaxenvs/wrappers/base.py": ""})
    assert shared_names([tmp_path / "jaxenvs", tmp_path / "train"]) == {
        "phases.py": ["jaxenvs/checker/phases.py", "jaxenvs/cli/phases.py", "train/phases.py"]}
