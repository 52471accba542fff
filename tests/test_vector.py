"""VectorEnv: the batched path has exactly the semantics of TimeLimit + same-step AutoReset."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxenvs
from jaxenvs.wrappers import NormalizeObservation, FlattenObservation

N = 8


def _manual_step(inner, key, state, action, stochastic):
    """What VectorEnv.step must compute, spelt out with the unbatched, non-resetting env."""
    if stochastic:  # one split: the reset key, then one step key per env
        keys = jax.random.split(key, N + 1)
        key_reset, step_keys = keys[0], keys[1:]
    else:  # a deterministic step ignores its key: the batch key serves the reset
        key_reset, step_keys = key, jnp.stack([key] * N)
    obs, st, r, term, trunc, info = jax.vmap(inner.step)(step_keys, state, action)
    reset_obs, reset_state = jax.vmap(inner.reset)(jax.random.split(key_reset, N))
    done = term | trunc
    sel = lambda new, old: jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)  # noqa: E731
    return jax.tree.map(sel, reset_obs, obs), jax.tree.map(sel, reset_state, st), r, term, trunc, obs


@pytest.mark.parametrize("env_id,stochastic", [("GridWorld-v0", False), ("HurdleRace-v0", True)])
def test_vector_env_matches_manual_autoreset(env_id, stochastic):
    env = jaxenvs.make(env_id, max_episode_steps=6)
    inner = jaxenvs.make(env_id, max_episode_steps=6, autoreset=False)
    venv = jaxenvs.VectorEnv(env, N)
    assert venv.autoreset and venv._step_needs_key == stochastic
    obs, state = venv.reset(jax.random.key(0))
    space = env.action_space()
    shape = (N, env.num_agents) if env.multi_agent else (N,)
    step, manual = jax.jit(venv.step), jax.jit(lambda k, s, a: _manual_step(inner, k, s, a, stochastic))
    resets = 0
    for t in range(20):
        key = jax.random.key(100 + t)
        action = space.sample(jax.random.key(t), batch_shape=shape)
        o, s, r, term, trunc, info = step(key, state, action)
        mo, ms, mr, mterm, mtrunc, mfinal = manual(key, state, action)
        for a, b in zip(jax.tree.leaves((o, s, r, term, trunc, info["final_obs"])), jax.tree.leaves((mo, ms, mr, mterm, mtrunc, mfinal))):
            np.testing.assert_array_equal(a, b)
        resets += int((term | trunc).sum())
        state = s
    assert resets >= N  # the 6-step limit forces every env through at least one reset


def test_vector_env_keeps_an_inner_autoreset():
    """Statistics of NormalizeObservation above AutoReset must survive episode ends."""
    env = NormalizeObservation(FlattenObservation(jaxenvs.make("GridWorld-v0", max_episode_steps=3)))
    venv = jaxenvs.VectorEnv(env, N)
    assert not venv.autoreset
    obs, state = venv.reset(jax.random.key(0))
    step = jax.jit(venv.step)
    for t in range(7):
        obs, state, *_ = step(jax.random.key(t), state, jnp.zeros(N, jnp.int32))
    # 7 updates after reset's: a count reset at an episode end would leave it at most 3 + 1
    assert np.all(np.asarray(state.obs_rms.count) > 7)


def test_vector_env_per_env_params():
    env = jaxenvs.make("GridWorld-v0")
    sizes = jnp.array([2, 3, 4, 5, 6, 7, 8, 9])
    params = jax.vmap(lambda s: env.default_params.replace(size=s))(sizes)
    venv = jaxenvs.VectorEnv(env, N, params_axis=0)
    obs, state = jax.jit(venv.reset)(jax.random.key(0), params)
    for t in range(30):
        obs, state, *_ = venv.step(jax.random.key(t), state, jnp.full((N,), t % 4, jnp.int32), params)
        assert np.all(np.asarray(obs["agent"]).max(axis=1) < np.asarray(sizes))
        assert np.all(np.asarray(obs["target"]).max(axis=1) < np.asarray(sizes))


def test_vector_env_rejects_bad_num_envs():
    with pytest.raises(ValueError, match="num_envs"):
        jaxenvs.VectorEnv(jaxenvs.make("GridWorld-v0"), 0)


def test_checked_mode_uses_traced_param_bounds():
    """A Box built from vmapped params checks each env's own bound."""
    env = jaxenvs.make("PointEnv-v0", checked=True)
    obs, state = env.reset(jax.random.key(0))
    params = jax.vmap(lambda b: env.default_params.replace(action_bound=b))(jnp.array([0.1, 0.5]))
    step = jaxenvs.checked(jax.vmap(env.step, in_axes=(None, None, 0, 0)))
    step(jax.random.key(1), state, jnp.array([[0.05, 0.0], [0.3, 0.0]]), params)  # both legal
    with pytest.raises(Exception, match="action out of the action space"):
        step(jax.random.key(1), state, jnp.array([[0.3, 0.0], [0.3, 0.0]]), params)  # 0.3 > 0.1


def test_step_keys_are_decided_on_the_whole_wrapper_stack():
    """GridWorld's step is deterministic, but an AutoReset inside the stack resets in step: the
    batch must then give every env its own key, or envs ending together restart identically."""
    assert not jaxenvs.VectorEnv(jaxenvs.make("GridWorld-v0"), N)._step_needs_key
    env = FlattenObservation(jaxenvs.make("GridWorld-v0", max_episode_steps=1))
    venv = jaxenvs.VectorEnv(env, N)
    assert venv._step_needs_key and not venv.autoreset
    obs, state = venv.reset(jax.random.key(0))
    _, state, *_ = venv.step(jax.random.key(1), state, jnp.zeros(N, jnp.int32))
    starts = np.asarray(jax.vmap(env.unwrapped_state)(state).agent)  # every env restarted this step
    assert len({tuple(a) for a in starts}) > 1


def test_reset_pool_shares_start_states_within_a_step_only():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=1)  # every step ends every episode
    venv = jaxenvs.VectorEnv(env, N, reset_pool=2)
    obs, state = venv.reset(jax.random.key(0))
    step = jax.jit(venv.step)
    starts = []
    for t in range(30):
        obs, state, _, _, truncated, info = step(jax.random.key(t), state, jnp.zeros(N, jnp.int32))
        assert np.asarray(truncated).all()
        agent, target = np.asarray(obs["agent"]), np.asarray(obs["target"])
        np.testing.assert_array_equal(agent, np.tile(agent[:2], (N // 2, 1)))  # env i takes pool entry i % 2
        np.testing.assert_array_equal(target, np.tile(target[:2], (N // 2, 1)))
        assert (agent != target).any(axis=1).all()
        starts.append((tuple(agent[0]), tuple(target[0])))
    assert len(set(starts)) > 20  # a fresh pool every step: 600 (agent, target) pairs to draw from


def test_reset_pool_rejects_bad_values():
    env = jaxenvs.make("GridWorld-v0")
    for bad in (0, N + 1, 2.0, True):
        with pytest.raises(ValueError, match=r"reset_pool must be None or an int in \[1, num_envs=8\]"):
            jaxenvs.VectorEnv(env, N, reset_pool=bad)
    with pytest.raises(ValueError, match="params_axis"):
        jaxenvs.VectorEnv(env, N, reset_pool=2, params_axis=0)


def test_vector_env_refuses_action_batches_that_do_not_fit():
    env = jaxenvs.make("GridWorld-v0")
    venv = jaxenvs.VectorEnv(env, 4)
    key = jax.random.key(0)
    _, state = venv.reset(key)
    want = r"expected shape \(4,\) \(num_envs, \*batched_action_shape\) for action space Discrete\(4\)"
    for bad, what in [
        (jnp.zeros(3, jnp.int32), r"action batch of shape \(3,\)"),
        (jnp.zeros((), jnp.int32), r"action batch of shape \(\)"),
        ("left", "action 'left' of type str is not an array of numbers"),
        (["a"] * 4, "action 'a' of type str is not an array of numbers"),
        (None, "action None holds no array"),
    ]:
        with pytest.raises(jaxenvs.core.ActionError, match=f"VectorEnv\\(GridWorld\\): {what}.*{want}"):
            venv.step(key, state, bad)
    obs, *_ = venv.step(key, state, jnp.zeros(4, jnp.int32))
    assert obs["agent"].shape == (4, 2)


def test_vector_env_forwards_like_a_wrapper():
    from jaxenvs.wrappers.base import Forwarding, Wrapper

    env = jaxenvs.make("GridWorld-v0", size=3)
    venv = jaxenvs.VectorEnv(env, 2)
    assert isinstance(venv, Forwarding) and issubclass(Wrapper, Forwarding)
    assert venv.default_params == env.default_params and venv.default_params.size == 3
    assert (venv.traits, venv.name, venv.spec, venv.unwrapped) == (env.traits, env.name, env.spec, env.unwrapped)
    assert venv.observation_space() == env.observation_space()


def _manual_compacted(inner, key, state, action, capacity):
    """What VectorEnv(reset_capacity=capacity).step must compute for a deterministic step: the j-th
    finished env (index order) restarts from the j-th of `capacity` reset keys, unless more than
    `capacity` envs finished (then env i restarts from the i-th of N keys, the full path)."""
    obs, st, r, term, trunc, info = jax.vmap(inner.step, in_axes=(None, 0, 0))(key, state, action)
    done = np.asarray(term | trunc)
    if done.sum() > capacity:
        fresh_obs, fresh_state = jax.vmap(inner.reset)(jax.random.split(key, N))
        source = np.arange(N)
    else:
        fresh_obs, fresh_state = jax.vmap(inner.reset)(jax.random.split(key, capacity))
        source = np.cumsum(done) - 1  # the slot of each finished env
    pick = lambda new, old: np.stack([np.asarray(new)[source[i]] if done[i] else np.asarray(old)[i] for i in range(N)])  # noqa: E731
    return jax.tree.map(pick, fresh_obs, obs), jax.tree.map(pick, fresh_state, st), done


def test_reset_capacity_restarts_each_finished_env_from_its_own_draw():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=4)
    inner = jaxenvs.make("GridWorld-v0", max_episode_steps=4, autoreset=False)
    venv = jaxenvs.VectorEnv(env, N, reset_capacity=3)
    obs, state = venv.reset(jax.random.key(0))
    # stagger the episodes: env i has taken i % 4 steps, so 2 envs finish per step (3 when one terminates)
    state = state.replace(time=jnp.arange(N, dtype=jnp.int32) % 4)
    step = jax.jit(venv.step)
    counts = set()
    for t in range(40):
        key, action = jax.random.key(100 + t), jax.random.randint(jax.random.key(t), (N,), 0, 4)
        want_obs, want_state, done = _manual_compacted(inner, key, state, action, 3)
        obs, state, _, term, trunc, info = step(key, state, action)
        np.testing.assert_array_equal(np.asarray(term | trunc), done)
        jax.tree.map(np.testing.assert_array_equal, obs, want_obs)
        jax.tree.map(np.testing.assert_array_equal, state, want_state)
        counts.add(int(done.sum()))
    assert counts & {1, 2, 3} and max(counts) >= 2  # the compacted branch ran with several finished envs


def test_reset_capacity_overflow_takes_the_full_path_and_every_start_is_uniform():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=1)  # every env finishes every step: 8 > capacity 2
    venv = jaxenvs.VectorEnv(env, N, reset_capacity=2)
    obs, state = venv.reset(jax.random.key(0))
    step = jax.jit(venv.step)
    agents = []
    for t in range(60):
        obs, state, *_ = step(jax.random.key(t), state, jnp.zeros(N, jnp.int32))
        agents.append(np.asarray(obs["agent"]))
    cells = np.concatenate(agents) @ np.array([1, 5])
    assert len({tuple(a) for a in agents[-1]}) > 2  # not a shared pool: the envs draw apart
    counts = np.bincount(cells, minlength=25)  # 480 starts over 25 cells: expected 19.2 each
    chi2 = ((counts - 19.2) ** 2 / 19.2).sum()
    assert chi2 < 52.6  # chi-square, 24 degrees of freedom, p = 0.001


def test_default_reset_capacity_and_bad_values():
    from jaxenvs.vector import default_reset_capacity

    assert [default_reset_capacity(n, "cpu") for n in (8, 64, 1024, 4096)] == [8, 64, 64, 256]
    # on an accelerator every env draws (no lax.cond: XLA:GPU reads a cond's predicate on the host)
    assert [default_reset_capacity(n, "gpu") for n in (8, 64, 4096)] == [8, 64, 4096]
    assert default_reset_capacity(4096) == (256 if jax.default_backend() == "cpu" else 4096)
    env = jaxenvs.make("GridWorld-v0")
    for bad in (0, N + 1, 2.0, True):
        with pytest.raises(ValueError, match=r"reset_capacity must be None or an int in \[1, num_envs=8\]"):
            jaxenvs.VectorEnv(env, N, reset_capacity=bad)


def test_one_envs_state_is_refused_at_trace_time():
    env = jaxenvs.make("GridWorld-v0")
    venv = jaxenvs.VectorEnv(env, N)
    _, state = env.reset(jax.random.key(0))  # one env's state, no batch axis
    with pytest.raises(jaxenvs.core.StateError, match=r"state\.env_state\.agent has shape \(2,\), expected a leading axis of num_envs=8"):
        jax.jit(venv.step)(jax.random.key(1), state, jnp.zeros(N, jnp.int32))
    with pytest.raises(jaxenvs.core.StateError, match="VectorEnv.reset"):
        venv.legal_action_mask(state)


def test_reset_capacity_with_per_env_params_starts_each_env_in_its_own_grid():
    env = jaxenvs.make("GridWorld-v0", max_episode_steps=2)
    sizes = jnp.asarray([2, 3, 50, 50, 50, 50, 50, 50], jnp.int32)
    params = env.default_params.replace(size=sizes)
    venv = jaxenvs.VectorEnv(env, N, params_axis=0, reset_capacity=3)
    obs, state = venv.reset(jax.random.key(0), params)
    state = state.replace(time=jnp.asarray([1, 1, 0, 0, 0, 0, 0, 0], jnp.int32))  # envs 0 and 1 finish first
    step = jax.jit(venv.step)
    seen = {0: set(), 1: set()}
    for t in range(40):
        obs, state, _, _, truncated, _ = step(jax.random.key(t), state, jnp.zeros(N, jnp.int32), params)
        agent = np.asarray(obs["agent"])
        assert (agent < np.asarray(sizes)[:, None]).all()  # every start inside its own grid
        for e in (0, 1):
            if truncated[e]:
                seen[e].add(tuple(agent[e]))
    assert seen[0] <= {(x, y) for x in range(2) for y in range(2)} and len(seen[0]) > 1
    assert len(seen[1]) > 2
