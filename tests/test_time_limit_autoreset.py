"""TimeLimit and AutoReset on GridWorld, driven by policies computed from the observation.

``greedy`` walks straight to the target (x first), so an episode that starts at Manhattan
distance d terminates after exactly d steps; ``away`` never lets the distance shrink, so its
episodes only ever end by truncation.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxenvs
from jaxenvs.wrappers import AutoReset, FlattenObservation, RecordEpisodeStatistics, TimeLimit, TransformReward

FAST_JIT = functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})
SIZE = 5


def greedy(obs):
    d = obs["target"] - obs["agent"]
    return jnp.select([d[0] > 0, d[0] < 0, d[1] > 0], [0, 2, 1], 3).astype(jnp.int32)


def away(obs):
    d = obs["target"] - obs["agent"]
    return jnp.select([d[0] > 0, d[0] < 0, d[1] > 0], [2, 0, 3], 1).astype(jnp.int32)


def distance(obs):
    return np.abs(np.asarray(obs["target"]) - np.asarray(obs["agent"])).sum(-1)


def rollout(env, policy, num_steps: int, num_envs: int, seed: int = 0):
    """(obs0, traj): ``num_envs`` envs (vmap) follow ``policy`` for ``num_steps`` steps (scan).

    ``traj`` has leading axes [step, env] and holds obs, reward, terminated, truncated, info and
    the TimeLimit step counter ``time`` of the returned state."""

    @FAST_JIT
    def run(key):
        k_reset, k_step = jax.random.split(key)
        obs, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_envs))

        def body(carry, keys):
            obs, state = carry
            actions = jax.vmap(policy)(obs)
            obs, state, reward, terminated, truncated, info = jax.vmap(env.step)(keys, state, actions)
            out = dict(obs=obs, reward=reward, terminated=terminated, truncated=truncated, info=info, time=state.time)
            return (obs, state), out

        keys = jax.random.split(k_step, (num_steps, num_envs))
        return obs, jax.lax.scan(body, (obs, state), keys)[1]

    return jax.tree.map(np.asarray, run(jax.random.key(seed)))


# ---- TimeLimit ----------------------------------------------------------------------------------


def test_truncated_exactly_at_max_episode_steps():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=6, autoreset=False)
    _, traj = rollout(env, away, num_steps=10, num_envs=64)
    t = np.arange(1, 11)[:, None]
    np.testing.assert_array_equal(traj["truncated"], np.broadcast_to(t >= 6, (10, 64)))
    assert not traj["terminated"].any()
    np.testing.assert_array_equal(traj["time"], np.broadcast_to(t, (10, 64)))


def test_truncation_repeats_every_episode_with_autoreset():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=6)
    _, traj = rollout(env, away, num_steps=30, num_envs=64)
    t = np.arange(1, 31)[:, None]
    np.testing.assert_array_equal(traj["truncated"], np.broadcast_to(t % 6 == 0, (30, 64)))
    np.testing.assert_array_equal(traj["time"], np.broadcast_to(t % 6, (30, 64)))  # reset to 0 with the episode
    assert not traj["terminated"].any()
    assert (traj["reward"] == 0).all()


def test_termination_is_not_truncation():
    env = jaxenvs.make("GridWorld-v0", autoreset=False)  # limit 300: greedy episodes end by termination
    obs0, traj = rollout(env, greedy, num_steps=8, num_envs=256)
    d = distance(obs0)
    t = np.arange(1, 9)[:, None]
    # greedy is optimal: the agent first stands on the target at step d (later steps lie outside
    # the episode: without AutoReset the caller resets)
    t, d = np.broadcast_arrays(t, d[None, :])
    in_episode = t <= d
    np.testing.assert_array_equal(traj["terminated"][in_episode], (t == d)[in_episode])
    np.testing.assert_array_equal(traj["reward"][in_episode], (t == d)[in_episode].astype(np.float32))
    assert not traj["truncated"].any()
    assert set(d[0]) == set(range(1, 9))  # 256 draws cover every distance of a 5x5 grid


def test_terminating_on_the_last_allowed_step_sets_both_flags():
    base = jaxenvs.make("GridWorld-v0", autoreset=False)
    obs0, traj = rollout(base, greedy, num_steps=1, num_envs=256)
    env_index = int(np.argmax(distance(obs0) == 4))
    assert distance(obs0)[env_index] == 4
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=4, autoreset=False)
    _, traj = rollout(env, greedy, num_steps=4, num_envs=256)
    last = traj["terminated"][3, env_index], traj["truncated"][3, env_index]
    assert last == (True, True)
    assert not traj["terminated"][:3, env_index].any() and not traj["truncated"][:3, env_index].any()


def test_time_limit_rejects_bad_limits():
    env = jaxenvs.make("GridWorld-v0", autoreset=False).unwrapped
    for bad in (0, -3, 2.0, True, None):
        with pytest.raises(ValueError, match="max_episode_steps as an int >= 1"):
            TimeLimit(env, bad)


# ---- AutoReset ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def greedy_autoreset():
    env = jaxenvs.make("GridWorld-v0")
    return rollout(env, greedy, num_steps=40, num_envs=256)


def test_autoreset_resets_in_the_same_step(greedy_autoreset):
    obs0, traj = greedy_autoreset
    done = traj["terminated"] | traj["truncated"]
    final, obs = traj["info"]["final_obs"], traj["obs"]
    assert done.sum() > 256  # most envs finish several episodes in 40 steps
    # the episode ended on the target; the returned obs is a fresh initial state
    np.testing.assert_array_equal(final["agent"][done], final["target"][done])
    assert (distance(obs)[done] >= 1).all()
    assert (traj["time"][done] == 0).all()
    np.testing.assert_array_equal(traj["reward"], done.astype(np.float32))
    # on the other steps final_obs is the returned observation
    for k in ("agent", "target"):
        np.testing.assert_array_equal(final[k][~done], obs[k][~done])


def test_each_episode_runs_from_the_returned_reset_state(greedy_autoreset):
    """Episode lengths equal the distance at the episode's first observation, so the state
    behind the returned reset observation is the one the next episode starts from."""
    obs0, traj = greedy_autoreset
    done = traj["terminated"]
    dist = distance(traj["obs"])
    checked = 0
    for e in range(done.shape[1]):
        start, d = 0, distance(obs0)[e]
        for t in np.flatnonzero(done[:, e]):
            assert t + 1 - start == d, (e, t, start, d)
            start, d = t + 1, dist[t, e]
            checked += 1
    assert checked > 256


def test_every_episode_starts_from_a_fresh_draw():
    """K=1: every step ends an episode; 6000 consecutive episodes of one env start from draws with
    reset's distribution: agent uniform over the 25 cells, target uniform over the other 24."""
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=1)
    n = 6000
    _, traj = rollout(env, away, num_steps=n, num_envs=1, seed=3)
    agent = traj["obs"]["agent"][:, 0]
    target = traj["obs"]["target"][:, 0]
    assert traj["truncated"].all()
    assert (agent != target).any(axis=1).all()
    pair = (agent[:, 0] + SIZE * agent[:, 1]) * SIZE * SIZE + target[:, 0] + SIZE * target[:, 1]
    counts = np.bincount(pair, minlength=SIZE**4).reshape(SIZE * SIZE, SIZE * SIZE)
    assert (np.diag(counts) == 0).all()
    observed = counts[~np.eye(SIZE * SIZE, dtype=bool)]
    expected = n / observed.size  # 10 per (agent, target) pair
    chi2 = ((observed - expected) ** 2 / expected).sum()
    dof = observed.size - 1  # 599
    assert chi2 < dof + 3.09 * np.sqrt(2 * dof)  # normal approximation, p ~ 0.001
    # a cached initial state would repeat: consecutive episodes share their start with prob. 1/600
    repeats = ((agent[1:] == agent[:-1]).all(1) & (target[1:] == target[:-1]).all(1)).sum()
    mean = (n - 1) / 600
    assert repeats < mean + 5 * np.sqrt(mean)


def test_dtypes_are_stable_across_reset_and_autoreset_steps():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=2)
    key = jax.random.key(0)
    obs, state = jax.eval_shape(env.reset, key)
    out = jax.eval_shape(env.step, key, state, jnp.int32(0))
    for a, b in zip(jax.tree.leaves((obs, state, obs)), jax.tree.leaves((out[0], out[1], out[5]["final_obs"]))):
        assert (a.shape, a.dtype, a.weak_type) == (b.shape, b.dtype, b.weak_type)
    assert jax.tree.structure((obs, state)) == jax.tree.structure(out[:2])
    assert (out[2].dtype, out[3].dtype, out[4].dtype) == (jnp.float32, jnp.bool_, jnp.bool_)


# ---- wrapper composition ------------------------------------------------------------------------


def test_time_limit_over_an_autoreset_is_refused():
    with pytest.raises(ValueError, match=r"max_episode_steps=N\), or AutoReset\(TimeLimit\("):
        TimeLimit(jaxenvs.make("GridWorld-v0"), 5)
    with pytest.raises(ValueError, match="would count across episodes"):
        TimeLimit(RecordEpisodeStatistics(jaxenvs.make("GridWorld-v0")), 5)  # found below other wrappers too
    assert TimeLimit(TimeLimit(jaxenvs.make("GridWorld-v0", autoreset=False), 300), 5).max_episode_steps == 5


def test_autoreset_over_an_autoreset_is_refused():
    with pytest.raises(ValueError, match=r"already resets its episodes itself.*autoreset=False"):
        AutoReset(jaxenvs.make("GridWorld-v0"))
    with pytest.raises(ValueError, match="already resets"):
        AutoReset(FlattenObservation(jaxenvs.make("GridWorld-v0")))


WRAPPERS = {
    "AutoReset": AutoReset,
    "RecordEpisodeStatistics": RecordEpisodeStatistics,
    "FlattenObservation": FlattenObservation,
    "TransformReward": lambda env: TransformReward(env, lambda r: 2.0 * r),
    **{f"TimeLimit({n})": functools.partial(TimeLimit, max_episode_steps=n) for n in (2, 3, 5)},
}


def _agent_target(obs):
    """(agent, target) int arrays from a GridWorld observation, dict or flattened."""
    if isinstance(obs, dict):
        return np.asarray(obs["agent"]), np.asarray(obs["target"])
    obs = np.asarray(obs)
    return obs[..., :2].astype(np.int64), obs[..., 2:4].astype(np.int64)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(sorted(WRAPPERS)), max_size=4))
def test_any_wrapper_composition_keeps_the_time_limit_and_final_observation_rules(names):
    """Wrappers applied in the listed order over a 3x3 GridWorld (which has make's 300-step limit
    and no auto-reset) either build an environment that keeps the rules, or are refused at
    construction, exactly when a TimeLimit or an AutoReset goes over an AutoReset. Rules, over 16
    random steps (with no AutoReset, up to the end of the first episode):
    truncated exactly when the episode has run as many steps as the tightest limit; terminated
    only on the target; each step moves the agent at most one cell from the previous observation
    to the observation the step ended on (``info["final_obs"]`` with an AutoReset, which equals
    ``obs`` unless the episode ended; a new episode never starts on its target);
    RecordEpisodeStatistics counts the episode's steps."""
    env = jaxenvs.make("GridWorld-v0", size=3, autoreset=False)
    below_autoreset = False
    limits = [300]
    for name in names:
        if below_autoreset and (name == "AutoReset" or name.startswith("TimeLimit")):
            with pytest.raises(ValueError, match="AutoReset inside"):
                WRAPPERS[name](env)
            return
        env = WRAPPERS[name](env)
        below_autoreset |= name == "AutoReset"
        if name.startswith("TimeLimit"):
            limits.append(env.max_episode_steps)
    limit, num_steps = min(limits), 16

    @FAST_JIT
    def run(key):
        obs, state = env.reset(jax.random.key(1))

        def body(carry, key):
            obs, state = carry
            action = jax.random.randint(key, (), 0, 4)
            out = env.step(jax.random.fold_in(key, 1), state, action)
            return out[:2], (out[0], out[2], out[3], out[4], out[5])

        return obs, jax.lax.scan(body, (obs, state), jax.random.split(key, num_steps))[1]

    obs0, (obs, reward, terminated, truncated, info) = jax.tree.map(np.asarray, run(jax.random.key(len(names))))
    final = info["final_obs"] if below_autoreset else obs
    prev_agent, _ = _agent_target(obs0)
    agent, target = _agent_target(obs)
    final_agent, final_target = _agent_target(final)
    length = 0
    for t in range(num_steps):
        length += 1
        assert truncated[t] == (length == limit), (t, length, limit)
        done = terminated[t] or truncated[t]
        if terminated[t]:
            np.testing.assert_array_equal(final_agent[t], final_target[t])
        assert np.abs(final_agent[t] - prev_agent).sum() <= 1, t
        if "RecordEpisodeStatistics" in names:
            assert info["episode_length"][t] == length
        if below_autoreset:
            if done:
                assert (agent[t] != target[t]).any()
            else:
                np.testing.assert_array_equal(final[t] if not isinstance(final, dict) else final["agent"][t],
                                              obs[t] if not isinstance(obs, dict) else obs["agent"][t])
        elif done:
            break
        if done:
            length = 0
        prev_agent = agent[t]
