"""Jitted rollouts: run a policy in an environment with ``jax.lax.scan`` and summarise episodes.

    env = jaxenvs.make("GridWorld-v0")
    traj = rollout(env, jax.random.key(0), random_policy(env), num_steps=100, num_envs=8)
    episodes = episode_stats(traj)          # host side: return, length and outcome per episode

A policy is a pure function ``(key, obs) -> action`` for ONE environment; for multi-agent
environments ``obs`` and ``action`` carry the agent axis. ``rollout`` vmaps it over ``num_envs``.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng
from jaxenvs._traces import TraceCounter
from jaxenvs.core import Environment, check_params
from jaxenvs.sharding import constrain_batch
from jaxenvs.vector import VectorEnv
from jaxenvs.wrappers.base import strip_autoreset

__all__ = ["Policy", "Trajectory", "Episode", "random_policy", "batch_random_policy", "rollout", "episode_stats", "benchmark", "benchmark_program", "BenchResult", "time_calls", "trace_count"]

Policy = Callable[[jax.Array, Any], Any]


class Trajectory(NamedTuple):
    """Stacked transitions of a rollout; leading axes ``[T]``, or ``[T, num_envs]`` when batched.

    ``obs`` and ``state`` are those each action was taken in (before the step); ``reward`` is
    float32 (``[..., num_agents]`` for multi-agent envs); ``terminated``/``truncated`` are bool;
    ``info`` is the env's info dict. With an auto-resetting env the state an episode ended in is
    never recorded (the next entry already belongs to the new episode; ``info["final_obs"]`` holds
    its observation); with ``make(id, autoreset=False)`` the entry after the end is that state.
    ``last_obs``/``last_state`` are NOT time-stacked: they are where the rollout stopped, ready to
    be passed back as ``initial`` to continue. ``state`` is ``None`` when not recorded.
    """

    obs: Any
    state: Any
    action: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    info: dict
    last_obs: Any
    last_state: Any


@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode of a rollout (host-side numbers).

    ``returns`` is the undiscounted sum of rewards: a float, or float64[num_agents] for multi-agent
    envs. ``outcome`` is ``"terminated"`` (also when the time limit fell on the same step),
    ``"truncated"``, or ``"unfinished"`` (the rollout stopped first). ``env_index`` is the
    position in the batch (0 for an unbatched rollout), ``start`` the step index it began at.
    """

    env_index: int
    start: int
    length: int
    returns: float | np.ndarray
    outcome: str


def random_policy(env: Environment, params: Any = None) -> Policy:
    """A policy drawing uniformly from the action space (independently per agent).

    For an env with legal actions (``traits.action_style == "full_action_set"``) it draws uniformly
    among the legal actions that ``obs["action_mask"]`` holds (rows without any, such as the
    non-movers' of a turn-based game, draw from the whole space), so it never plays an illegal move.
    In a turn-based game (``traits.dynamics == "sequential"``) only the mover's row has legal
    actions and only its row of the joint action is read: one value is drawn among the legal
    actions of the mask's rows together (the mover's) and put in every row, half the random draws
    of a two-agent game.
    """
    return _uniform_policy(env, (), params, "random_policy")


def batch_random_policy(env: Environment, num_envs: int, params: Any = None) -> Policy:
    """`random_policy` for a whole batch at once: ``policy(key, obs) -> actions`` with ``obs`` and
    the actions carrying a leading ``num_envs`` axis, from ONE draw for the batch (no per-env key
    split: at 4,096 GridWorld envs the split costs more than the environment's step). The same
    distribution as ``jax.vmap(random_policy(env))`` over per-env keys: uniform over the action
    space, or among each row's legal actions (a turn-based game's mover's row, put in every row).

    This is the sampler to use for random legal play in the games: ``jax.random.categorical`` over
    the joint mask's logits draws a float per action per row (both rows of a two-player game) and
    costs several times the step of Tic-Tac-Toe (docs/guides/performance.md)."""
    return _uniform_policy(env, (num_envs,), params, "batch_random_policy")


def _uniform_policy(env: Environment, outer: tuple, params: Any, name: str) -> Policy:
    """The policy of `random_policy` (``outer == ()``) and `batch_random_policy` (``outer ==
    (num_envs,)``): one draw of shape ``outer`` (+ the agent axis), uniform over the action space or
    among each row's legal actions; a turn-based game's mover's row is drawn once and put in every
    row."""
    space = env.action_space(params)
    lead = outer + ((env.num_agents,) if env.multi_agent else ())
    masked = env.traits.action_style == "full_action_set"
    one_mover = masked and env.multi_agent and env.traits.dynamics == "sequential"

    def policy(key, obs):
        if not masked:
            return space.sample(key, batch_shape=lead)
        if not (isinstance(obs, dict) and "action_mask" in obs):
            raise TypeError(
                f"{name} of {env.name} (action_style='full_action_set') reads obs['action_mask'], "
                f"but the observation is {type(obs).__name__}"
                + (f" with keys {sorted(obs)}" if isinstance(obs, dict) else "")
                + " (a wrapper that flattens or transforms the observation drops the mask)"
            )
        mask = jnp.asarray(obs["action_mask"])
        if one_mover:
            movers = jnp.any(mask != 0, axis=-2)  # the mover's row (the others are zero)
            return jnp.broadcast_to(space.sample(key, outer, mask=movers)[..., None], lead)
        return space.sample(key, batch_shape=lead, mask=mask)

    return policy


def _per_env(key, num_envs, mesh=None):
    return key if num_envs is None else constrain_batch(prng.split(key, num_envs), mesh)


def _vmap_if(fn, num_envs, in_axes):
    return fn if num_envs is None else jax.vmap(fn, in_axes=in_axes)


def _env_step(env, num_envs, mesh, batched_path):
    """``step(key, state, action, params)`` for one env (``num_envs=None``) or a batch: through
    `jaxenvs.VectorEnv` (``batched_path``: one key per batch step; an outermost AutoReset
    becomes the batch-level one, same semantics), or ``jax.vmap(env.step)`` with one key per env
    (the plain path)."""
    if num_envs is None:
        return env.step
    if batched_path:
        venv = VectorEnv(env, num_envs, autoreset=strip_autoreset(env) is not env)
        return lambda key, state, action, params: constrain_batch(venv.step(key, state, action, params), mesh)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    return lambda key, state, action, params: step(_per_env(key, num_envs, mesh), state, action, params)


def _policy_step(env, policy, num_envs, mesh=None, batched_path=True, batch_policy=None):
    """Scan body ``((obs, state), key) -> ((obs, state), (obs, state, action, reward, ...))``.
    ``batch_policy`` (``policy(key, batched obs)``, e.g. `batch_random_policy`) replaces the per-env
    ``policy`` vmapped over per-env keys."""
    if batch_policy is not None:
        act = lambda key, obs: constrain_batch(batch_policy(key, obs), mesh)  # noqa: E731
    else:
        per_env = _vmap_if(policy, num_envs, (0, 0))
        act = lambda key, obs: per_env(_per_env(key, num_envs, mesh), obs)  # noqa: E731
    step = _env_step(env, num_envs, mesh, batched_path)

    def body(carry, key, params):
        obs, state = carry
        key_act, key_step = prng.split(key)
        action = act(key_act, obs)
        next_obs, next_state, reward, terminated, truncated, info = step(key_step, state, action, params)
        return (next_obs, next_state), (obs, state, action, reward, terminated, truncated, info)

    return body


def _reset(env, key, params, num_envs, mesh=None):
    return _vmap_if(env.reset, num_envs, (0, None))(_per_env(key, num_envs, mesh), params)


_TRACES = TraceCounter()  # times _rollout's body ran, i.e. was traced (see trace_count)


def trace_count() -> int:
    """How many times `rollout`'s jitted program has been traced in this process.

    A repeated call with the same env, policy, shapes and static options compiles nothing, so the
    count stays put; tests use it to prove that (the count is process-wide, compare differences).
    """
    return _TRACES["rollout"]


@partial(jax.jit, static_argnames=("env", "policy", "num_steps", "num_envs", "record_states", "mesh"))
@partial(_TRACES.counted, name="rollout")
def _rollout(env, policy, num_steps, num_envs, record_states, key, params, initial, mesh=None):
    key_reset, key_run = jax.random.split(key)
    carry = _reset(env, key_reset, params, num_envs, mesh) if initial is None else initial
    body = _policy_step(env, policy, num_envs, mesh)

    def scan_body(carry, key):
        carry, (obs, state, *rest) = body(carry, key, params)
        return carry, (obs, state if record_states else None, *rest)

    (last_obs, last_state), out = jax.lax.scan(scan_body, carry, jax.random.split(key_run, num_steps))
    return Trajectory(*out, last_obs, last_state)


def rollout(
    env: Environment,
    key: jax.Array,
    policy: Policy,
    num_steps: int,
    params: Any = None,
    num_envs: int | None = None,
    initial: tuple[Any, Any] | None = None,
    record_states: bool = True,
    mesh: Any = None,
) -> Trajectory:
    """Run ``policy`` for ``num_steps`` steps in one jitted ``lax.scan``; see `Trajectory`.

    ``num_envs=None`` runs one environment; an int runs that many in parallel through
    `jaxenvs.VectorEnv` (one key per batch step, batch-level auto-reset for an env whose
    outermost wrapper is `jaxenvs.wrappers.AutoReset`; all share ``params``); the policy
    is vmapped with one key per env. The episode starts from ``env.reset`` unless ``initial=(obs, state)`` (e.g. a
    previous trajectory's ``last_obs, last_state``) is given. ``key`` may be a typed key or a raw
    ``PRNGKey``. The compiled function is cached per ``(env, policy, num_steps, num_envs)``: keep
    the same policy object to avoid recompiling. ``mesh`` (`jaxenvs.sharding.env_mesh`)
    splits the env batch over its devices; the result equals the single-device one.
    """
    if not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 1:
        raise ValueError(f"num_steps must be an int >= 1, got {num_steps!r}")
    if num_envs is not None and (not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1):
        raise ValueError(f"num_envs must be None or an int >= 1, got {num_envs!r}")
    params = check_params(env, params)
    if mesh is not None and num_envs is None:
        raise ValueError("a mesh splits the env batch: pass num_envs too")
    return _rollout(env, policy, num_steps, num_envs, record_states, key, params, initial, mesh)


def episode_stats(traj: Trajectory, include_unfinished: bool = False) -> list[Episode]:
    """Split a rollout into episodes at ``terminated | truncated``, in (env, time) order.

    Episodes still running when the rollout stopped are left out unless ``include_unfinished``.
    Only meaningful for auto-resetting environments (or for the first episode of each env).
    """
    terminated = np.asarray(traj.terminated)
    truncated = np.asarray(traj.truncated)
    reward = np.asarray(traj.reward, np.float64)
    if terminated.ndim not in (1, 2):
        raise ValueError(f"terminated has shape {terminated.shape}; expected [T] or [T, num_envs]")
    if terminated.ndim == 1:
        terminated, truncated, reward = terminated[:, None], truncated[:, None], reward[:, None]
    num_steps, num_envs = terminated.shape
    episodes = []
    for i in range(num_envs):
        ends = np.flatnonzero(terminated[:, i] | truncated[:, i])
        starts = np.concatenate([[0], ends + 1])
        stops = list(ends + 1) + ([num_steps] if include_unfinished and starts[-1] < num_steps else [])
        for start, stop in zip(starts, stops):
            last = stop - 1
            outcome = (
                "terminated" if terminated[last, i] else "truncated" if truncated[last, i] else "unfinished"
            )
            ret = reward[start:stop, i].sum(axis=0)
            episodes.append(
                Episode(i, int(start), int(stop - start), float(ret) if ret.ndim == 0 else ret, outcome)
            )
    return episodes


@dataclasses.dataclass(frozen=True)
class BenchResult:
    """Timings of `benchmark` in seconds; ``steps_per_s`` uses the median run."""

    num_envs: int
    num_steps: int
    compile_s: float
    run_s: tuple[float, ...]

    @property
    def steps_per_s(self) -> float:
        return self.num_envs * self.num_steps / float(np.median(self.run_s))


def benchmark(
    env: Environment,
    num_envs: int = 1024,
    num_steps: int = 1000,
    seed: int = 0,
    repeats: int = 3,
    params: Any = None,
    policy: Policy | None = None,
    mesh: Any = None,
) -> BenchResult:
    """Environment steps per second under ``jit(vmap)`` + ``scan`` with a random policy.

    Reset and step of ``num_envs`` envs for ``num_steps`` steps run as one compiled function that
    records nothing but a reward sum (`benchmark_program`); compile time is measured apart
    and excluded. Each of the ``repeats`` runs uses a fresh key and waits for the result
    (``block_until_ready``). ``mesh`` splits the env batch over its devices.
    """
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    run = benchmark_program(env, num_envs, num_steps, params, policy, mesh)
    keys = jax.random.split(jax.random.key(seed), repeats + 1)
    compile_s, times = time_calls(run, [(k,) for k in keys])
    return BenchResult(num_envs, num_steps, compile_s, times)


def benchmark_program(
    env: Environment,
    num_envs: int,
    num_steps: int,
    params: Any = None,
    policy: Policy | None = None,
    mesh: Any = None,
    batched_path: bool = False,
) -> Callable[[jax.Array], jax.Array]:
    """What `benchmark` times: ``run(key) -> total reward`` (not jitted), ``num_envs`` envs
    reset and stepped ``num_steps`` times by ``jax.vmap(env.step)`` with one key per env per step
    and random actions drawn for the whole batch at once (`batch_random_policy`), or the given
    per-env ``policy`` (vmapped, one key per env). ``params`` are constants of the program, as in a training
    run on one configuration (passed as traced arguments instead, GridWorld's integer arithmetic
    on ``size`` cannot be specialised and runs about 1.4x slower). ``batched_path=True`` steps
    through `jaxenvs.VectorEnv` instead (one key per batch step, batch-level auto-reset)."""
    for name, v in (("num_envs", num_envs), ("num_steps", num_steps)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    params = check_params(env, params)
    batch_policy = batch_random_policy(env, num_envs, params) if policy is None else None
    body = _policy_step(env, policy, num_envs, mesh, batched_path=batched_path, batch_policy=batch_policy)

    def run(key):
        key_reset, key_run = jax.random.split(key)
        carry = _reset(env, key_reset, params, num_envs, mesh)

        def scan_body(c, key):
            carry, total = c
            carry, (_, _, _, reward, *_) = body(carry, key, params)
            return (carry, total + jnp.sum(reward)), None

        init = (carry, jnp.zeros((), jnp.float32))
        (_, total), _ = jax.lax.scan(scan_body, init, jax.random.split(key_run, num_steps))
        return total

    return run


def time_calls(fn: Callable, calls: list[tuple]) -> tuple[float, tuple[float, ...]]:
    """``(compile seconds, run seconds per timed call)`` of ``jax.jit(fn)``.

    ``calls[0]``'s arguments compile the function ahead of time (timed apart) and warm it up
    (not timed); each later call is timed to ``block_until_ready``.
    """
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*calls[0]).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(*calls[0]))  # warm-up run (allocations), not timed
    times = []
    for args in calls[1:]:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    return compile_s, tuple(times)
