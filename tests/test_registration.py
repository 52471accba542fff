"""The registry: register/make/spec, id resolution, kwargs routing, errors, listing."""

from __future__ import annotations

import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxenvs
from jaxenvs import spaces
from jaxenvs.core import Environment, Traits
from jaxenvs.envs.grid_world import GridWorld
from jaxenvs.registration import parse_env_id, register
from jaxenvs.wrappers import AutoReset, TimeLimit, WithParams


@pytest.fixture
def registry():
    """The live registry; entries a test adds (or replaces) are restored afterwards."""
    before = dict(jaxenvs.registry)
    yield jaxenvs.registry
    jaxenvs.registry.clear()
    jaxenvs.registry.update(before)


@struct.dataclass
class LineParams:
    step_size: int = 1


class Line(Environment):
    """Walk right on cells 0..length-1; terminated at the last cell. obs int32[] = the cell."""

    traits = Traits(chance="deterministic")

    def __init__(self, length: int = 4):
        self.length = length

    @property
    def default_params(self):
        return LineParams()

    def validate_params(self, params):
        if params.step_size < 1:
            raise ValueError(f"Line step_size must be >= 1, got {params.step_size}")

    def reset_env(self, key, params):
        return jnp.int32(0), jnp.int32(0)

    def step_env(self, key, state, action, params):
        cell = jnp.minimum(state + action * params.step_size, self.length - 1).astype(jnp.int32)
        done = cell == self.length - 1
        return cell, cell, done.astype(jnp.float32), done, jnp.zeros((), bool), {}

    def observation_space(self, params=None):
        return spaces.Box(0, self.length - 1, (), np.int32)

    def action_space(self, params=None):
        return spaces.Discrete(2)


def wrapper_chain(env):
    chain = [type(env)]
    while hasattr(env, "env") and not isinstance(env, GridWorld):
        env = env.env
        chain.append(type(env))
    return chain


# ---- register / make / spec ---------------------------------------------------------------------


def test_make_builds_the_registered_env_with_its_wrappers():
    env = jaxenvs.make("GridWorld-v0")
    assert wrapper_chain(env) == [AutoReset, TimeLimit, GridWorld]
    assert env.env.max_episode_steps == 300
    assert env.spec.id == "GridWorld-v0" and env.spec.max_episode_steps == 300
    assert (env.spec.namespace, env.spec.name, env.spec.version) == (None, "GridWorld", 0)
    assert wrapper_chain(jaxenvs.make("GridWorld-v0", autoreset=False)) == [TimeLimit, GridWorld]
    assert isinstance(env.unwrapped, GridWorld)


def test_register_callable_entry_point_and_spec(registry):
    spec = jaxenvs.register("test/Line-v0", Line, max_episode_steps=7, reward_threshold=1.0, kwargs={"length": 6})
    assert jaxenvs.spec("test/Line-v0") is spec
    assert (spec.namespace, spec.name, spec.version) == ("test", "Line", 0)
    env = jaxenvs.make("test/Line-v0")
    assert env.unwrapped.length == 6
    assert env.spec.max_episode_steps == 7 and env.spec.reward_threshold == 1.0
    assert wrapper_chain(env) == [AutoReset, TimeLimit, Line]


def test_register_string_entry_point(registry):
    jaxenvs.register("test/Grid-v0", "jaxenvs.envs.grid_world:GridWorld")
    env = jaxenvs.make("test/Grid-v0")
    assert isinstance(env.unwrapped, GridWorld)
    assert wrapper_chain(env) == [AutoReset, GridWorld]  # no max_episode_steps: no TimeLimit


def test_unversioned_id_resolves_to_the_latest_version(registry):
    for v in (0, 2, 1):
        jaxenvs.register(f"test/Line-v{v}", Line, kwargs={"length": 10 + v})
    assert jaxenvs.spec("test/Line").id == "test/Line-v2"
    assert jaxenvs.make("test/Line").unwrapped.length == 12
    assert jaxenvs.make("test/Line-v1").unwrapped.length == 11
    assert jaxenvs.spec("GridWorld").id == "GridWorld-v0"


def test_module_prefix_imports_the_module_first(registry, tmp_path, monkeypatch):
    (tmp_path / "jaxenvs_test_plugin.py").write_text(
        textwrap.dedent(
            """
            import jaxenvs
            jaxenvs.register("plugin/Grid-v0", "jaxenvs.envs.grid_world:GridWorld", max_episode_steps=9)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "jaxenvs_test_plugin", raising=False)
    assert "plugin/Grid-v0" not in registry
    env = jaxenvs.make("jaxenvs_test_plugin:plugin/Grid-v0")
    assert "jaxenvs_test_plugin" in sys.modules
    assert env.spec.id == "plugin/Grid-v0" and env.spec.max_episode_steps == 9
    sys.modules.pop("jaxenvs_test_plugin")
    with pytest.raises(ImportError, match="could not import module 'no_such_module_xyz'"):
        jaxenvs.make("no_such_module_xyz:plugin/Grid-v0")


# ---- kwargs: params fields, constructor arguments, unknown names -------------------------------


def test_params_kwargs_override_default_params():
    env = jaxenvs.make("GridWorld-v0", size=7)
    assert env.default_params.size == 7
    assert isinstance(env.env.env, WithParams)
    space = env.observation_space(env.default_params)
    assert space["agent"].high.tolist() == [6, 6] and space["target"].high.tolist() == [6, 6]
    obs, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 2000))
    cells = np.asarray(obs["agent"])
    assert cells.min() == 0 and cells.max() == 6  # 2000 uniform draws over 7 columns reach both ends


def test_constructor_kwargs_and_spec_kwargs_are_routed(registry):
    jaxenvs.register("test/Line-v0", Line, kwargs={"length": 5, "step_size": 2})
    env = jaxenvs.make("test/Line-v0")
    assert env.unwrapped.length == 5 and env.default_params.step_size == 2
    env = jaxenvs.make("test/Line-v0", length=9, step_size=3)  # make kwargs beat spec kwargs
    assert env.unwrapped.length == 9 and env.default_params.step_size == 3
    obs, state = env.reset(jax.random.key(0))
    obs, *_ = env.step(jax.random.key(1), state, 1)
    assert int(obs) == 3
    assert env.spec.kwargs == {"length": 9, "step_size": 3}


def test_unknown_kwarg_lists_valid_names():
    with pytest.raises(TypeError) as e:
        jaxenvs.make("GridWorld-v0", sise=7)
    msg = str(e.value)
    assert "'sise'" in msg
    for name in ("size", "max_episode_steps", "autoreset", "checked"):
        assert repr(name) in msg


def test_invalid_params_rejected_at_make(registry):
    with pytest.raises(ValueError, match="GridWorld size must be an integer in \\[2, 46340\\], got 1"):
        jaxenvs.make("GridWorld-v0", size=1)
    jaxenvs.register("test/Line-v0", Line)
    with pytest.raises(ValueError, match="step_size must be >= 1"):
        jaxenvs.make("test/Line-v0", step_size=0)


def test_max_episode_steps_override():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=5)
    assert env.spec.max_episode_steps == 5 and env.env.max_episode_steps == 5
    assert jaxenvs.spec("GridWorld-v0").max_episode_steps == 300  # the registered spec is untouched
    with pytest.raises(ValueError, match="max_episode_steps as an int >= 1"):
        jaxenvs.make("GridWorld-v0", max_episode_steps=0)


# ---- errors -------------------------------------------------------------------------------------


def test_misspelt_id_suggests_close_ids():
    with pytest.raises(KeyError, match="did you mean 'GridWorld-v0'"):
        jaxenvs.make("GridWorl-v0")
    with pytest.raises(KeyError, match="did you mean 'GridWorld-v0'"):
        jaxenvs.make("GridWorld-v3")  # a version that does not exist
    with pytest.raises(KeyError, match="registered: \\["):
        jaxenvs.make("Zzzzzzzzzz-v0")


def test_registering_twice_is_an_error(registry):
    jaxenvs.register("test/Line-v0", Line)
    with pytest.raises(ValueError, match="'test/Line-v0' is already registered"):
        jaxenvs.register("test/Line-v0", Line)
    with pytest.raises(ValueError, match="has no version but versioned ids"):
        jaxenvs.register("test/Line", Line)


@pytest.mark.parametrize("bad_id", ["", "1Line-v0", "my env-v0", "ns//Line-v0", "ns/", "Line-v0/", "../Up-v0",
                                    "./Up-v0", "../../x/Up-v0", "ns/../Up-v0", ".hidden-v0", "ns/.Up-v0", "a/b/Up-v0",
                                    "mod:ns/Up-v0", "-ns/Up-v0", "ns/Up v0", "ns\\Up-v0"])
def test_malformed_ids_are_rejected(registry, bad_id):
    """An id becomes part of a run directory's name: a namespace or name that is not a plain word
    (a path, a leading dot, a module prefix) is refused at registration, saying what is allowed."""
    with pytest.raises(ValueError, match="malformed environment id") as e:
        jaxenvs.register(bad_id, Line)
    assert "[namespace/]Name[-vN]" in str(e.value) and "start with a letter or '_'" in str(e.value)
    assert bad_id not in registry


def test_every_built_in_and_gymnax_id_is_well_formed():
    """The rule refuses none of the ids the package registers (its own, and gymnax's unversioned
    ones such as ``Catch-bsuite``)."""
    from jaxenvs.envs.gymnax_env import NAMESPACE

    gymnax = pytest.importorskip("gymnax")
    ids = list(jaxenvs.registry) + [f"{NAMESPACE}/{gid}" for gid in gymnax.registered_envs]
    assert len(ids) > 30 and "gymnax/Catch-bsuite" in ids
    for env_id in ids:
        parse_env_id(env_id)
    assert parse_env_id("gymnax/Catch-bsuite") == ("gymnax", "Catch-bsuite", None)


def test_id_parsing():
    assert parse_env_id("GridWorld-v0") == (None, "GridWorld", 0)
    assert parse_env_id("lab.x/Maze-v12") == ("lab.x", "Maze", 12)
    assert parse_env_id("Maze") == (None, "Maze", None)
    with pytest.raises(TypeError, match="is a string"):
        parse_env_id(3)


def test_an_entry_point_may_return_a_wrapped_env(registry):
    """The spec goes on the base env (wrappers forward it); params overrides, the spec's time limit
    and auto-reset wrap what the entry point returned."""
    jaxenvs.register("test/Wrapped-v0", lambda: TimeLimit(GridWorld(), 7), max_episode_steps=3, kwargs={"size": 4})
    env = jaxenvs.make("test/Wrapped-v0", autoreset=False)
    assert env.spec.id == "test/Wrapped-v0" and env.spec.max_episode_steps == 3 and env.spec.kwargs == {"size": 4}
    assert isinstance(env, TimeLimit) and isinstance(env.env, WithParams) and env.env.env.max_episode_steps == 7
    assert env.unwrapped.spec is env.spec and env.default_params.size == 4
    plain = jaxenvs.make("GridWorld-v0", autoreset=False, size=4, max_episode_steps=3)
    key = jax.random.key(0)
    (obs, state), (obs_p, state_p) = env.reset(key, env.default_params), plain.reset(key, plain.default_params)
    for t in range(4):  # the same steps as GridWorld-v0 with the same size and limit, truncated at step 3
        for a, b in zip(jax.tree.leaves(obs), jax.tree.leaves(obs_p), strict=True):
            np.testing.assert_array_equal(a, b)
        k = jax.random.fold_in(key, t)
        obs, state, reward, terminated, truncated, _ = env.step(k, state, jnp.int32(t % 4), env.default_params)
        obs_p, state_p, reward_p, terminated_p, truncated_p, _ = plain.step(k, state_p, jnp.int32(t % 4), plain.default_params)
        assert (float(reward), bool(terminated), bool(truncated)) == (float(reward_p), bool(terminated_p), bool(truncated_p))
        if t == 2:
            assert bool(truncated) or bool(terminated)


def test_bad_entry_points(registry):
    with pytest.raises(TypeError, match="'package.module:Attribute'"):
        jaxenvs.register("test/A-v0", "jaxenvs.envs.grid_world.GridWorld")
    with pytest.raises(ValueError, match="max_episode_steps must be None or an int >= 1"):
        jaxenvs.register("test/A-v0", Line, max_episode_steps=0)
    jaxenvs.register("test/Missing-v0", "jaxenvs.envs.grid_world:NoSuchEnv")
    with pytest.raises(ImportError, match="'jaxenvs.envs.grid_world:NoSuchEnv' of 'test/Missing-v0' cannot be loaded"):
        jaxenvs.make("test/Missing-v0")
    jaxenvs.register("test/NotAnEnv-v0", lambda: object())
    with pytest.raises(TypeError, match="returned object, not a jaxenvs Environment"):
        jaxenvs.make("test/NotAnEnv-v0")


# ---- listing ------------------------------------------------------------------------------------


def test_pprint_registry(registry, capsys):
    jaxenvs.register("test/Line-v0", Line, max_episode_steps=7)
    out = jaxenvs.pprint_registry(print_output=False)
    lines = out.splitlines()
    assert lines[0] == "===== (core) ====="
    grid = [line for line in lines if line.startswith("GridWorld-v0")]
    assert len(grid) == 1 and "max_episode_steps=300" in grid[0]
    assert grid[0].endswith("agents=1 simultaneous deterministic general_sum")  # traits, from the class
    assert "===== test =====" in lines
    assert lines[lines.index("===== test =====") + 1].split()[:2] == ["test/Line-v0", "max_episode_steps=7"]
    assert lines[lines.index(grid[0]) + 1] == "    Reach the target on a square grid (Gymnasium's custom-environment tutorial)."
    assert jaxenvs.pprint_registry() is None
    assert capsys.readouterr().out.strip() == out


def test_describe():
    text = jaxenvs.describe("GridWorld-v0")
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "GridWorld-v0  (jaxenvs.envs.grid_world.GridWorld)"
    for expected in (
        "observation_space: Dict(agent: Box(0, 4, (2,), int32), target: Box(0, 4, (2,), int32))",
        "action_space:      Discrete(4)",
        "0 = right (x+1)",
        "param size = 5",
        "trait chance: deterministic",
        "trait reward_style: terminal",
        "max_episode_steps: 300",
    ):
        assert expected in lines, expected
    assert not any(line.startswith(("agents:", "trait dynamics")) for line in lines)  # single-agent
    assert repr(jaxenvs.make("GridWorld-v0", autoreset=False).unwrapped) == (
        "<GridWorld agents=1 simultaneous deterministic perfect-information general_sum terminal-reward minimal>"
    )


def test_an_id_is_either_versioned_or_not(registry):
    register("Mixed", "jaxenvs.envs.grid_world:GridWorld")
    with pytest.raises(ValueError, match=r"'Mixed-v0' is versioned but the unversioned id 'Mixed' is registered"):
        register("Mixed-v0", "jaxenvs.envs.grid_world:GridWorld")
    register("lab/Both-v1", "jaxenvs.envs.grid_world:GridWorld")
    with pytest.raises(ValueError, match=r"'lab/Both' has no version but versioned ids of 'Both' exist"):
        register("lab/Both", "jaxenvs.envs.grid_world:GridWorld")


@pytest.mark.parametrize("flag, value", [("autoreset", "no"), ("checked", "yes"), ("autoreset", 0), ("checked", None)])
def test_make_flags_are_bools(flag, value):
    with pytest.raises(TypeError, match=f"make\\('GridWorld-v0'\\): {flag} must be True or False, got {value!r}"):
        jaxenvs.make("GridWorld-v0", **{flag: value})
