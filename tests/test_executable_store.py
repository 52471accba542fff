"""jaxenvs._cache.ExecutableStore: compiled programs kept on disk whole. A hit gives the same
results as compiling; anything that changes the program (its description, the arguments' shapes, the
environment key) misses; a torn file or a store that is off compiles as usual."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxenvs import _cache


def _program(scale):
    @jax.jit
    def f(key, x):
        return {"y": x * scale + jax.random.uniform(key, x.shape), "n": jnp.sum(x > 0)}

    return f


ARGS = (jax.random.key(3), jnp.arange(6, dtype=jnp.float32))


def _same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_second_store_loads_what_the_first_compiled(tmp_path):
    first = _cache.ExecutableStore(tmp_path)
    compiled = first.compile("prog", _program(2.0), ARGS, "scale 2")
    assert first.misses == ["prog"] and first.hits == [] and len(list(tmp_path.glob("prog-*.exe"))) == 1
    second = _cache.ExecutableStore(tmp_path)
    loaded = second.compile("prog", _program(2.0), ARGS, "scale 2")
    assert second.hits == ["prog"] and second.misses == []
    _same(loaded(*ARGS), compiled(*ARGS))
    _same(loaded(*ARGS), _program(2.0)(*ARGS))


@pytest.mark.parametrize(
    "description, args",
    [("scale 3", ARGS), ("scale 2", (ARGS[0], jnp.arange(7, dtype=jnp.float32))), ("scale 2", (ARGS[0], jnp.arange(6)))],
    ids=["another description", "another shape", "another dtype"],
)
def test_what_changes_the_program_misses(tmp_path, description, args):
    _cache.ExecutableStore(tmp_path).compile("prog", _program(2.0), ARGS, "scale 2")
    store = _cache.ExecutableStore(tmp_path)
    scale = float(description.split()[1])
    got = store.compile("prog", _program(scale), args, description)
    assert store.misses == ["prog"] and store.hits == []
    _same(got(*args), _program(scale)(*args))


def test_another_environment_misses(tmp_path, monkeypatch):
    _cache.ExecutableStore(tmp_path).compile("prog", _program(2.0), ARGS, "scale 2")
    monkeypatch.setattr(_cache, "_SOURCE_DIGEST", "another version of the library")
    store = _cache.ExecutableStore(tmp_path)
    store.compile("prog", _program(2.0), ARGS, "scale 2")
    assert store.misses == ["prog"]


def test_a_torn_file_compiles_and_an_off_store_never_writes(tmp_path):
    _cache.ExecutableStore(tmp_path).compile("prog", _program(2.0), ARGS, "scale 2")
    (path,) = tmp_path.glob("prog-*.exe")
    path.write_bytes(path.read_bytes()[:100])
    store = _cache.ExecutableStore(tmp_path)
    _same(store.compile("prog", _program(2.0), ARGS, "scale 2")(*ARGS), _program(2.0)(*ARGS))
    assert store.misses == ["prog"]
    assert _cache.ExecutableStore(tmp_path).compile("prog", _program(2.0), ARGS, "scale 2") is not None
    off = _cache.ExecutableStore(None)
    off.compile("prog", _program(2.0), ARGS, "scale 2")
    assert off.misses == ["prog"] and not off.save("prog", "scale 2", ARGS, None)


def test_the_environment_key_names_versions_devices_and_source():
    key = _cache._environment_key()
    for part in ("jax=", "jaxlib=", "backend ", "devices ", "XLA_FLAGS", "jax_enable_x64=", "source "):
        assert part in key
    assert len(_cache._source_digest()) == 64


_SCRIPT = """
import sys
import jax, jax.numpy as jnp
from jaxenvs import _cache
f = jax.jit(lambda key, x: {"y": jnp.tanh(x @ x.T).sum() + jax.random.uniform(key), "n": jnp.sum(x > 0)})
args = (jax.random.key(3), jnp.arange(12.0).reshape(3, 4))
if sys.argv[1] == "jax-cache":  # the program in JAX's persistent cache, under its plain key
    f.lower(*args).compile()
else:
    store = _cache.ExecutableStore(sys.argv[2])
    out = store.compile("prog", f, args, "tanh")
    print(sys.argv[1], store.hits, store.misses, float(out(*args)["y"]) == float(f(*args)["y"]))
"""


def test_a_program_in_jax_cache_is_compiled_afresh_and_its_stored_bytes_run(tmp_path):
    """An executable JAX loaded from its persistent cache serializes to bytes that load but fail when
    run (XLA:CPU); the store compiles what it lacks under a key of its own, so what it stores runs."""
    import subprocess
    import sys

    from helpers import subprocess_env

    env = subprocess_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                         JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    lines = []
    for step in ("jax-cache", "store", "load"):
        out = subprocess.run([sys.executable, "-c", _SCRIPT, step, str(tmp_path / "store")], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        lines.append(out.stdout.strip())
    assert lines[1:] == ["store [] ['prog'] True", "load ['prog'] [] True"]


def test_the_store_is_off_for_an_environment_whose_code_its_key_does_not_see(tmp_path):
    """The key covers the package's own source (and gymnax's version), not a user's module: a run of
    a ``module:id`` environment must recompile after its code is edited, so the store turns off."""
    import jaxenvs
    from jaxenvs.envs.grid_world import GridWorld

    class Edited(GridWorld):  # defined here, outside the package, like a --env module:id class
        pass

    assert _cache.store_covers(jaxenvs.make("GridWorld-v0"))
    assert not _cache.store_covers(Edited())
    previous = _cache.active_store()
    try:
        store = _cache.activate_executable_store(tmp_path)
        assert _cache.keep_store_for(jaxenvs.make("GridWorld-v0")) is store
        assert _cache.keep_store_for(Edited()) is None and _cache.active_store() is None
    finally:
        _cache._ACTIVE = previous


_WRITES = """
import sys
from pathlib import Path
import jax, jax.numpy as jnp
from jaxenvs import _cache
cache = Path(sys.argv[1])
def entries():
    return len([p for p in cache.rglob("*") if p.is_file()])
store = _cache.ExecutableStore(Path(sys.argv[2]))
f = jax.jit(lambda x: {"y": jnp.sin(x) * 3.0 + 1.0})
x = jnp.arange(5, dtype=jnp.float32)
before = entries()
store.compile("prog", f, (x,), "sin")
after_store = entries()
jax.jit(lambda x: jnp.cos(x) * 2.0)(x).block_until_ready()
print(after_store - before, entries() - after_store, len(list(Path(sys.argv[2]).glob("prog-*.exe"))))
"""


def test_a_stored_program_is_not_written_to_jax_cache_too(tmp_path):
    """The store keeps its programs itself: compiling one writes its file and nothing into JAX's
    persistent cache (it would be a second copy under a key no other compile has); a compile
    outside the store is still written there."""
    import subprocess
    import sys

    from helpers import subprocess_env

    env = subprocess_env(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                         JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    out = subprocess.run([sys.executable, "-c", _WRITES, str(tmp_path / "jax"), str(tmp_path / "store")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    store_writes, other_writes, stored = map(int, out.stdout.split())
    assert (store_writes, stored) == (0, 1) and other_writes >= 1
