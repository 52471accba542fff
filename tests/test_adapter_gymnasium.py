"""The Gymnasium adapters pass Gymnasium's own checker and reproduce Gymnasium's reference vector
semantics (``SyncVectorEnv`` over single adapters) exactly, for every registered single-agent env."""

import os
import subprocess
import sys

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # "human" rendering without a display
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env, data_equivalence  # noqa: E402
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

import jaxenvs  # noqa: E402
from jaxenvs.adapters import compiled, seed_to_key  # noqa: E402
from jaxenvs.adapters.gymnasium import (  # noqa: E402
    GymnasiumEnv,
    GymnasiumVectorEnv,
    gymnasium_id,
    register_gymnasium_envs,
)
from helpers import (  # noqa: E402
    GridWorldModel,
    assert_only_advice,
    box_leaves,
    registry_params,
    require,
    run_checker_recording,
    sample_actions,
)


SINGLE = registry_params(multi_agent=False)


def assert_same(a, b, what=""):
    assert data_equivalence(a, b, exact=True), f"{what}: {a!r} != {b!r}"


# ---- module boundaries ---------------------------------------------------------------------


def test_import_jaxenvs_needs_no_adapter_library():
    code = (
        "import sys, jaxenvs, jaxenvs.adapters\n"
        "bad = [m for m in ('gymnasium', 'stable_baselines3', 'pettingzoo', 'torch', 'pygame') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("module", ["pettingzoo", "sb3"])
def test_importing_another_adapter_registers_nothing_with_gymnasium(module):
    """Only importing jaxenvs.adapters.gymnasium registers the jaxenvs/ ids with Gymnasium."""
    if module == "sb3":
        require("stable_baselines3")
    code = (
        f"import sys, gymnasium, jaxenvs.adapters.{module}\n"
        "ids = [i for i in gymnasium.registry if i.startswith('jaxenvs/')]\n"
        "assert not ids and 'jaxenvs.adapters.gymnasium' not in sys.modules, ids\n"
        "import jaxenvs.adapters.gymnasium\n"
        "assert 'jaxenvs/GridWorld-v0' in gymnasium.registry\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- the single environment ----------------------------------------------------------------


def gymnasium_space_advice(env) -> set:
    """The advisory warnings Gymnasium's check_env gives for the env's *declared* spaces (not for
    anything the adapter does): infinite observation bounds."""
    out = set()
    for box in box_leaves(env.observation_space):
        if np.any(box.low == -np.inf):
            out.add("A Box observation space minimum value is -infinity")
        if np.any(box.high == np.inf):
            out.add("A Box observation space maximum value is infinity")
    return out


@pytest.mark.parametrize("env_id", SINGLE)
def test_gymnasium_check_env_without_warnings(env_id):
    """No warning at all, except the advice that follows from the env's own declared spaces."""
    env = GymnasiumEnv(env_id)
    # includes every declared render mode (through env.spec) and close()
    assert_only_advice(run_checker_recording(check_env, env), gymnasium_space_advice(env))

    def through_make():
        made = gymnasium.make(gymnasium_id(env_id))  # adds Gymnasium's PassiveEnvChecker
        made.reset(seed=0)
        made.step(made.action_space.sample())
        made.close()

    assert run_checker_recording(through_make) == set()
    assert env.metadata["render_fps"] == env.jaxenvs_env.render_fps
    assert env.spec.id == gymnasium_id(env_id)


@pytest.mark.parametrize("env_id", SINGLE)
def test_same_seed_same_trajectory_and_documented_key_chain(env_id):
    n = 12
    actions = sample_actions(GymnasiumEnv(env_id).action_space, 0, n)

    def rollout(env, seed):
        out = [env.reset(seed=seed)]
        for a in actions:
            out.append(env.step(a))
            if out[-1][2] or out[-1][3]:
                out.append(env.reset())
        return out

    first, second = rollout(GymnasiumEnv(env_id), 7), rollout(GymnasiumEnv(env_id), 7)
    assert_same(first, second, "same seed")

    # the documented rule: key chain starts at jax.random.key(seed); each call splits it once
    raw = jaxenvs.make(env_id, autoreset=False)
    params = raw.default_params
    reset, step = jax.jit(raw.reset), jax.jit(raw.step)
    space = GymnasiumEnv(env_id).observation_space
    key = jax.random.key(7)
    key, sub = jax.random.split(key)
    obs, state = reset(sub, params)
    expected = [(np_obs(space, obs), {})]
    for a in actions:
        key, sub = jax.random.split(key)
        obs, state, reward, term, trunc, info = step(sub, state, np.asarray(a), params)
        expected.append((np_obs(space, obs), float(reward), bool(term), bool(trunc), jax.tree.map(np.asarray, info)))
        if term or trunc:
            key, sub = jax.random.split(key)
            obs, state = reset(sub, params)
            expected.append((np_obs(space, obs), {}))
    assert len(expected) == len(first)
    # float results may differ in the last bits between differently fused programs
    for got, want in zip(first, expected):
        assert data_equivalence(got[0], want[0]), (got[0], want[0])
        if len(got) == 5:
            assert type(got[1]) is float and type(got[2]) is bool and type(got[3]) is bool
            assert got[1] == pytest.approx(want[1], rel=1e-6, abs=1e-6) and got[2:4] == want[2:4]
            assert got[4].keys() == want[4].keys()
            for k in got[4]:
                np.testing.assert_allclose(got[4][k], want[4][k], rtol=1e-6)


def np_obs(space, obs):
    from jaxenvs.adapters.gymnasium import obs_to_numpy

    return obs_to_numpy(space, jax.device_get(obs))


def test_observation_dtypes_follow_the_gymnasium_space():
    env = GymnasiumEnv("GridWorld-v0", size=7)
    obs, info = env.reset(seed=1)
    assert info == {}
    assert env.observation_space["agent"].high.tolist() == [6, 6]
    for k in ("agent", "target"):
        assert obs[k].dtype == env.observation_space[k].dtype == np.int32 and obs[k].flags.writeable
    obs2, reward, terminated, truncated, info = env.step(np.int64(0))
    assert isinstance(info["distance"], np.int32)
    assert info["distance"] == np.abs(obs2["agent"] - obs2["target"]).sum()


def test_truncated_comes_from_the_jaxenvs_time_limit():
    env = GymnasiumEnv("GridWorld-v0", max_episode_steps=3)
    obs, _ = env.reset(seed=3)
    flags = []
    for _ in range(3):
        away = 2 if obs["agent"][0] <= obs["target"][0] else 0  # step away in x: never reaches the target
        obs, reward, terminated, truncated, _ = env.step(away)
        flags.append((reward, terminated, truncated))
    assert flags == [(0.0, False, False), (0.0, False, False), (0.0, False, True)]
    made = gymnasium.make("jaxenvs/GridWorld-v0", max_episode_steps=3)
    assert made.spec.max_episode_steps == 3  # Gymnasium's own TimeLimit agrees with the inner one


def test_reset_without_seed_uses_np_random_then_continues_the_chain():
    a, b = GymnasiumEnv("GridWorld-v0"), GymnasiumEnv("GridWorld-v0")
    a.np_random, _ = gymnasium.utils.seeding.np_random(5)
    b.np_random, _ = gymnasium.utils.seeding.np_random(5)
    assert_same([a.reset()[0], a.reset()[0]], [b.reset()[0], b.reset()[0]], "np_random-seeded resets")
    starts = {tuple(np.concatenate([o["agent"], o["target"]])) for o in (a.reset()[0] for _ in range(20))}
    assert len(starts) > 10  # a continued chain, not the same start again (600 possible starts)


def test_large_seeds_give_distinct_keys():
    k = [jax.random.key_data(seed_to_key(s)).tolist() for s in (5, 5 + 2**32, 5 + 2**64)]
    assert k[0] == jax.random.key_data(jax.random.key(5)).tolist()
    assert len({tuple(x) for x in k}) == 3
    with pytest.raises(ValueError, match="non-negative integer"):
        seed_to_key(-1)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_bad_reset_seeds_name_our_call(seed):
    # refused before Gymnasium's own seeding sees them, with the call that was given the seed named
    with pytest.raises(ValueError, match=r"^GymnasiumEnv\.reset\(seed=\.\.\.\): a seed must be a non-negative integer"):
        GymnasiumEnv("GridWorld-v0").reset(seed=seed)
    vec = GymnasiumVectorEnv("GridWorld-v0", 2)
    with pytest.raises(ValueError, match=r"^GymnasiumVectorEnv\.reset\(seed=.*a seed must be a non-negative integer"):
        vec.reset(seed=seed)
    with pytest.raises(ValueError, match=r"^GymnasiumVectorEnv\.reset\(seed=\[\.\.\.\]\): .* got -1$"):
        vec.reset(seed=[0, -1])


def test_bad_actions_name_the_action_space():
    env = GymnasiumEnv("GridWorld-v0")
    env.reset(seed=0)
    with pytest.raises(jaxenvs.ActionError, match=r"dtype float64.*Discrete\(4\)"):
        env.step(1.0)
    with pytest.raises(ValueError, match=r"action 4 is outside the action space Discrete\(4\)"):
        env.step(4)
    with pytest.raises(jaxenvs.ActionError, match=r"shape \(2,\), expected \(\) for the action space Discrete\(4\)"):
        env.step([0, 1])
    with pytest.raises(jaxenvs.ActionError, match="integers"):
        env.step(True)
    with pytest.raises(gymnasium.error.ResetNeeded):
        GymnasiumEnv("GridWorld-v0").step(0)


def test_box_actions_are_cast_and_checked():
    env = GymnasiumEnv("PointEnv-v0")
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError, match=r"NaN; the action space is Box\(-0.1, 0.1, \(2,\), float32\)"):
        env.step(np.array([np.nan, 0.0]))
    with pytest.raises(jaxenvs.ActionError, match=r"shape \(3,\), expected \(2,\)"):
        env.step(np.zeros(3))
    # float64 is cast to float32; out-of-bounds values pass through to the env's documented clipping
    new_obs, *_ = env.step(np.array([0.5, -0.05]))
    np.testing.assert_allclose(new_obs - obs, [0.1, -0.05], atol=1e-6)


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"render_mode='rgb'.*supported: \['human', 'rgb_array', 'ansi'\]"):
        GymnasiumEnv("GridWorld-v0", render_mode="rgb")
    with pytest.raises(TypeError, match="unknown keyword argument"):
        GymnasiumEnv("GridWorld-v0", sise=3)
    with pytest.raises(TypeError, match="environment id, not with an Environment"):
        GymnasiumEnv(jaxenvs.make("GridWorld-v0"), size=3)


def test_environment_object_with_autoreset_is_stripped():
    env = GymnasiumEnv(jaxenvs.make("GridWorld-v0", max_episode_steps=2))
    env.reset(seed=0)
    obs1 = env.step(2)[0]
    _, _, _, truncated, _ = env.step(2)
    assert truncated  # the inner TimeLimit counts; no silent auto-reset
    assert env.step(2)[0]["target"].tolist() == obs1["target"].tolist()


def test_render_modes_match_the_environment():
    raw = jaxenvs.make("GridWorld-v0", autoreset=False)
    frames = {}
    for mode in ("rgb_array", "ansi", "human"):
        env = GymnasiumEnv("GridWorld-v0", render_mode=mode)
        env.reset(seed=4)
        env.step(1)
        frames[mode] = env.render()
        state = env.state
        env.close()
    np.testing.assert_array_equal(frames["rgb_array"], np.asarray(jax.jit(raw.render)(state)))
    assert frames["rgb_array"].shape == (512, 512, 3) and frames["rgb_array"].dtype == np.uint8
    assert frames["ansi"] == raw.render_text(state)
    assert frames["human"] is None


def test_registration_covers_single_agent_ids_only():
    for env_id in [p for p in SINGLE if isinstance(p, str)]:
        assert gymnasium_id(env_id) in gymnasium.registry
    for p in registry_params(multi_agent=True):
        if isinstance(p, str):
            assert gymnasium_id(p) not in gymnasium.registry
    register_gymnasium_envs()  # picks up ids registered since the import (gymnax's, after a gymnax test)
    assert register_gymnasium_envs() == []  # idempotent
    env = gymnasium.make("jaxenvs.adapters.gymnasium:jaxenvs/GridWorld-v0", size=6)
    assert isinstance(env.unwrapped, GymnasiumEnv)
    assert env.observation_space["agent"].high.tolist() == [5, 5]
    assert gymnasium_id("lab/Maze-v2") == "jaxenvs-lab/Maze-v2"


# ---- the vector environment ------------------------------------------------------------------

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", SINGLE)
def test_vector_env_equals_sync_vector_env(env_id, mode):
    """Gymnasium's reference SyncVectorEnv over single adapters: same obs, rewards, flags and the
    same info layout (masks, final_obs/final_info) step by step, through episode ends (a short
    time limit where the env has one), a partial reset and a reset with a list of seeds."""
    n, kw = 4, {}
    if jaxenvs.spec(env_id).max_episode_steps is not None:
        kw["max_episode_steps"] = 5
    ours = GymnasiumVectorEnv(env_id, n, autoreset_mode=mode, **kw)
    ref = SyncVectorEnv([lambda: GymnasiumEnv(env_id, **kw) for _ in range(n)], autoreset_mode=mode)
    assert ours.metadata["autoreset_mode"] == mode
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.observation_space == ref.observation_space and ours.action_space == ref.action_space
    assert_same(ours.reset(seed=11), ref.reset(seed=11), "reset")
    ends = 0
    for t, a in enumerate(sample_actions(ours.action_space, 1, 24)):
        if t == 12:
            mask = np.array([True, False, True, False])
            got, want = ours.reset(options={"reset_mask": mask}), ref.reset(options={"reset_mask": mask.copy()})
            assert_same(got, want, "partial reset")
        if t == 18:  # new seeds for two copies, continued chains for the others
            assert_same(ours.reset(seed=[5, None, 7, None]), ref.reset(seed=[5, None, 7, None]), "seed list")
        got, want = ours.step(a), ref.step(a)
        for name, x, y in zip(("obs", "reward", "terminated", "truncated", "infos"), got, want):
            assert_same(x, y, f"step {t} {name}")
        ends += int(np.sum(got[2] | got[3]))
    assert ends > 0
    assert compiled(ours.jaxenvs_env, True).traces["step_next"] <= 1
    assert compiled(ours.jaxenvs_env, True).traces["step_same"] <= 1


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_vector_autoreset_against_a_manual_rollout(mode):
    n, size, limit = 6, 5, 4
    envs = GymnasiumVectorEnv("GridWorld-v0", n, autoreset_mode=mode, max_episode_steps=limit)
    model = GridWorldModel(size, limit, n)
    obs, _ = envs.reset(seed=2)
    pending = np.zeros(n, bool)
    rng = np.random.default_rng(0)
    seen = {"terminated": 0, "truncated": 0, "reset_step": 0}
    for _ in range(40):
        actions = rng.integers(0, 4, n)
        new_obs, reward, terminated, truncated, infos = envs.step(actions)
        for i in range(n):
            if mode == AutoresetMode.NEXT_STEP and pending[i]:
                # the step after an episode end: a reset, action ignored
                assert (reward[i], terminated[i], truncated[i]) == (0.0, False, False)
                assert not infos.get("_distance", np.zeros(n, bool))[i]
                model.t[i] = 0
                seen["reset_step"] += 1
                continue
            agent, term, trunc = model.predict(obs["agent"][i], obs["target"][i], actions[i], i)
            assert (reward[i], terminated[i], truncated[i]) == (float(term), term, trunc)
            done = term or trunc
            if mode == AutoresetMode.SAME_STEP and done:
                assert infos["_final_obs"][i] and infos["_final_info"][i] and not infos.get("_distance", [False] * n)[i]
                np.testing.assert_array_equal(infos["final_obs"][i]["agent"], agent)
                np.testing.assert_array_equal(infos["final_obs"][i]["target"], obs["target"][i])
                assert infos["final_info"]["distance"][i] == np.abs(agent - obs["target"][i]).sum()
                assert not np.array_equal(new_obs["agent"][i], new_obs["target"][i])  # a fresh start
                model.t[i] = 0
            else:
                np.testing.assert_array_equal(new_obs["agent"][i], agent)
                np.testing.assert_array_equal(new_obs["target"][i], obs["target"][i])
                assert infos["_distance"][i] and infos["distance"][i] == np.abs(agent - obs["target"][i]).sum()
                model.t[i] += 1
            seen["terminated"] += term
            seen["truncated"] += trunc
        if mode == AutoresetMode.SAME_STEP:
            ended = list(terminated | truncated)
            assert "final_obs" not in infos or [x is not None for x in infos["final_obs"]] == ended
        pending = terminated | truncated
        obs = new_obs
    assert seen["terminated"] > 0 and seen["truncated"] > 0
    assert (seen["reset_step"] > 0) == (mode == AutoresetMode.NEXT_STEP)


def test_vector_env_errors_and_rendering():
    with pytest.raises(ValueError, match="autoreset_mode must be one of"):
        GymnasiumVectorEnv("GridWorld-v0", 2, autoreset_mode="Sometimes")
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1"):
        GymnasiumVectorEnv("GridWorld-v0", 0)
    envs = GymnasiumVectorEnv("GridWorld-v0", 3, render_mode="rgb_array")
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"action value 7 at index \(1,\) is outside the action space Discrete\(4\)"):
        envs.step(np.array([0, 7, 1]))
    with pytest.raises(jaxenvs.ActionError, match=r"shape \(2,\), expected \(3,\)"):
        envs.step(np.array([0, 1]))
    with pytest.raises(ValueError, match="reset_mask"):
        envs.reset(options={"reset_mask": np.array([1, 0, 1])})
    frames = envs.render()
    raw = jaxenvs.make("GridWorld-v0", autoreset=False)
    assert len(frames) == 3
    np.testing.assert_array_equal(frames[2], np.asarray(jax.jit(raw.render)(jax.tree.map(lambda x: x[2], envs._state))))
    vec = gymnasium.make_vec("jaxenvs/GridWorld-v0", num_envs=3)
    assert isinstance(vec, GymnasiumVectorEnv) and vec.num_envs == 3


def test_adapters_take_make_envs_but_refuse_an_autoreset_below_other_wrappers():
    from jaxenvs.wrappers import FlattenObservation

    made = GymnasiumEnv(jaxenvs.make("GridWorld-v0"))  # the outermost AutoReset is removed
    obs, _ = made.reset(seed=0)
    assert set(obs) == {"agent", "target"}
    with pytest.raises(ValueError, match="contains an AutoReset wrapper below other wrappers"):
        GymnasiumEnv(FlattenObservation(jaxenvs.make("GridWorld-v0")))


def test_stepping_a_closed_environment_raises():
    env = GymnasiumEnv("GridWorld-v0", render_mode="rgb_array")
    env.reset(seed=0)
    env.close()
    for call, name in [(lambda: env.step(0), "step"), (lambda: env.reset(seed=0), "reset"), (env.render, "render")]:
        with pytest.raises(gymnasium.error.ClosedEnvironmentError, match=rf"GridWorld: {name}\(\) after close\(\)"):
            call()
    envs = GymnasiumVectorEnv("GridWorld-v0", 2)
    envs.reset(seed=0)
    envs.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError, match=r"step\(\) after close\(\)"):
        envs.step(np.zeros(2, np.int64))


def test_box_bounds_that_do_not_fit_float32_or_int32_are_refused():
    from jaxenvs.spaces import from_gymnasium

    with pytest.raises(ValueError, match=r"high bound\(s\) outside float32's range .*max 1e\+40.*-inf/inf for unbounded"):
        from_gymnasium(gymnasium.spaces.Box(-1.0, 1e40, (2,), np.float64))
    with pytest.raises(ValueError, match=r"low bound\(s\) outside int32's range"):
        from_gymnasium(gymnasium.spaces.Box(-(2**40), 0, (2,), np.int64))
    box = from_gymnasium(gymnasium.spaces.Box(-np.inf, 3e38, (2,), np.float64))  # inf stays, 3e38 fits
    assert box.dtype == np.float32 and np.isneginf(box.low).all() and np.allclose(box.high, 3e38)
