"""Gymnasium adapters: `GymnasiumEnv` (a ``gymnasium.Env``) and `GymnasiumVectorEnv`
(a ``gymnasium.vector.VectorEnv`` stepping all copies in one jitted, vmapped call).

Importing this module registers every single-agent jaxenvs id with Gymnasium under the
``jaxenvs`` namespace (`register_gymnasium_envs`)::

    import gymnasium, jaxenvs.adapters.gymnasium
    env = gymnasium.make("jaxenvs/GridWorld-v0")
    env = gymnasium.make("jaxenvs.adapters.gymnasium:jaxenvs/GridWorld-v0")  # imports this module itself
    envs = gymnasium.make_vec("jaxenvs/GridWorld-v0", num_envs=64)          # GymnasiumVectorEnv

Conventions shared by the adapters: observations are numpy data of the dtypes of the Gymnasium
space (``jaxenvs.spaces.to_gymnasium``: a Discrete observation is an ``np.int64`` scalar, a
MultiBinary one int8), freshly allocated on every call; info values are numpy scalars/arrays.
The episode's time limit is the jaxenvs ``TimeLimit`` of the spec (Gymnasium's registry entry has
``max_episode_steps=None`` so that ``gymnasium.make`` does not add a second one). Reset
``options`` are accepted and ignored: jaxenvs environments take none.
"""

from __future__ import annotations

from typing import Any

from jaxenvs._optional import require

require("gymnasium", extra="gymnasium", purpose="the Gymnasium adapter (jaxenvs.adapters.gymnasium)")

import gymnasium  # noqa: E402
import jax
import numpy as np
from gymnasium.envs.registration import EnvSpec as GymEnvSpec
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from jaxenvs import registration
from jaxenvs.adapters import Runner, check_seed, reset_keys, resolve_env, seed_to_key
from jaxenvs.adapters.host import (  # noqa: F401  (also importable from here, as before)
    ActionMasks,
    HumanWindow,
    check_action,
    check_render_mode,
    info_to_numpy,
    obs_rows,
    obs_to_numpy,
    supported_render_modes,
    tree_index,
)
from jaxenvs.core import Environment, Traits
from jaxenvs.spaces import to_gymnasium

__all__ = ["GymnasiumEnv", "GymnasiumVectorEnv", "register_gymnasium_envs", "gymnasium_id"]

NAMESPACE = "jaxenvs"


# ---- ids and registration --------------------------------------------------------------------


def gymnasium_id(env_id: str) -> str:
    """The Gymnasium id of a jaxenvs id: ``GridWorld-v0`` -> ``jaxenvs/GridWorld-v0``,
    ``lab/Maze-v2`` -> ``jaxenvs-lab/Maze-v2`` (Gymnasium's namespaces allow no ``.``)."""
    ns, name, version = registration.parse_env_id(env_id)
    full = name if version is None else f"{name}-v{version}"
    return f"{NAMESPACE}/{full}" if ns is None else f"{NAMESPACE}-{ns}/{full}"


def _make_vector(num_envs: int = 1, env_or_id: Any = None, **kwargs) -> "GymnasiumVectorEnv":
    """``vector_entry_point`` of the registered ids (``gymnasium.make_vec`` passes keywords only)."""
    return GymnasiumVectorEnv(env_or_id, num_envs, **kwargs)


def register_gymnasium_envs() -> list[str]:
    """Register every single-agent jaxenvs id with Gymnasium; returns the Gymnasium ids added.

    ``gymnasium.make(gymnasium_id(id), **kwargs)`` builds ``GymnasiumEnv(id, **kwargs)`` and
    ``gymnasium.make_vec`` a `GymnasiumVectorEnv`. Ids already registered are skipped,
    so calling this again picks up environments registered since; ids whose entry point cannot
    be imported are skipped too. An entry point with a ``traits`` attribute tells whether the
    env is multi-agent without building it; others are built once (those that cannot be built
    without arguments are skipped). Called when this module is imported.
    """
    added = []
    for env_id, spec in list(registration.registry.items()):
        gid = gymnasium_id(env_id)
        if gid in gymnasium.registry:
            continue
        try:
            traits = getattr(spec.load(), "traits", None)  # a class attribute: nothing is built
            if not isinstance(traits, Traits):
                traits = registration.make(env_id, autoreset=False).traits
        except (ImportError, TypeError):
            continue
        if traits.num_agents > 1:
            continue
        gymnasium.register(
            id=gid,
            entry_point="jaxenvs.adapters.gymnasium:GymnasiumEnv",
            vector_entry_point="jaxenvs.adapters.gymnasium:_make_vector",
            reward_threshold=spec.reward_threshold,
            nondeterministic=spec.nondeterministic,
            max_episode_steps=None,
            kwargs={"env_or_id": env_id},
        )
        added.append(gid)
    return added


def _gym_spec(env_or_id, env: Environment, kwargs: dict) -> GymEnvSpec:
    jspec = env.spec
    env_id = env_or_id if isinstance(env_or_id, str) else (jspec.id if jspec is not None else env.name)
    return GymEnvSpec(
        id=gymnasium_id(env_id),
        entry_point="jaxenvs.adapters.gymnasium:GymnasiumEnv",
        reward_threshold=None if jspec is None else jspec.reward_threshold,
        nondeterministic=False if jspec is None else jspec.nondeterministic,
        max_episode_steps=None,
        kwargs={"env_or_id": env_or_id, **kwargs},
        vector_entry_point="jaxenvs.adapters.gymnasium:_make_vector",
    )


# ---- the single environment ------------------------------------------------------------------


class GymnasiumEnv(gymnasium.Env):
    """A single-agent jaxenvs environment as a ``gymnasium.Env``.

    Args:
        env_or_id: a registered id (built with ``jaxenvs.make(id, autoreset=False, **make_kwargs)``:
            the spec's TimeLimit sets ``truncated``) or a jaxenvs Environment (an outermost
            AutoReset is removed; Gymnasium users call ``reset`` themselves).
        params: the environment's params (``None``: its ``default_params``).
        render_mode: ``"rgb_array"`` (uint8[H, W, 3]), ``"ansi"`` (the env's ``render_text``),
            ``"human"`` (a pygame window, drawn after every reset and step) or None; the
            supported ones are in ``metadata["render_modes"]``.
        **make_kwargs: passed to ``jaxenvs.make`` (params fields, constructor arguments,
            ``max_episode_steps``).

    ``reset(seed=s)`` seeds ``np_random`` (``super().reset``) and starts the JAX key chain at
    ``jax.random.key(s)``; ``reset()`` continues the chain (the first one draws a seed from
    ``np_random``). Rewards are Python floats, flags Python bools. ``jaxenvs_env``, ``params``
    and ``state`` give the underlying environment, its params and the current state pytree.

    An environment with legal actions (``traits.action_style == "full_action_set"``, e.g. a
    turn-based game seen through `jaxenvs.wrappers.PlayAgainst`) puts its mask in
    ``info["action_mask"]`` (int8[n], 1 = legal) at reset and every step, and ``action_masks()``
    returns it as bool[n] (what sb3-contrib's ``MaskablePPO`` reads).
    """

    metadata = {"render_modes": ["human", "rgb_array", "ansi"], "render_fps": 4}

    def __init__(self, env_or_id, params=None, render_mode: str | None = None, **make_kwargs):
        user_params = params
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if env.multi_agent:
            raise ValueError(
                f"{env.name} has {env.num_agents} agents; GymnasiumEnv takes single-agent environments "
                "(use jaxenvs.adapters.pettingzoo.ParallelEnv)"
            )
        self.jaxenvs_env, self.params = env, params
        self.metadata = {"render_modes": supported_render_modes(env), "render_fps": env.render_fps}
        check_render_mode(render_mode, self.metadata["render_modes"], env.name)
        self.render_mode = render_mode
        self.observation_space = to_gymnasium(env.observation_space(params))
        self.action_space = to_gymnasium(env.action_space(params))
        self.spec = _gym_spec(env_or_id, env, dict(make_kwargs, **({} if user_params is None else {"params": params})))
        self._run = Runner(env, False)
        self._key = self.state = None
        self._masks = ActionMasks(env, batched=False)
        self._window = HumanWindow(env.name, env.render_fps) if render_mode == "human" else None

    def _mask_info(self, info: dict) -> dict:
        if self._masks.active:
            info["action_mask"] = self._masks.int8()
        return info

    def action_masks(self) -> np.ndarray:
        """bool[n]: the legal actions of the current state (envs with ``action_style="full_action_set"``;
        AttributeError for the others)."""
        return self._masks.bool()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        _check_open(self, "reset")
        if seed is not None:
            seed = check_seed(seed, f"{type(self).__name__}.reset(seed=...)")
        super().reset(seed=seed)
        if seed is not None:
            key = seed_to_key(seed)
        elif self._key is None:
            key = seed_to_key(int(self.np_random.integers(2**32)))
        else:
            key = self._key
        (self._key, _, self.state), obs = self._run("reset", key, self.params)
        self._masks.update(obs, self.state, self.params)
        if self._window is not None:
            self._window.show(self._frame())
        return obs_to_numpy(self.observation_space, obs), self._mask_info({})

    def step(self, action):
        _check_open(self, "step")
        if self.state is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        action = check_action(self.action_space, action, where=f"{self.jaxenvs_env.name}.step")
        (self._key, _, self.state), (obs, reward, terminated, truncated, info) = self._run(
            "step", self._key, self.state, action, self.params
        )
        self._masks.update(obs, self.state, self.params)
        if self._window is not None:
            self._window.show(self._frame())
        return (
            obs_to_numpy(self.observation_space, obs),
            float(reward),
            bool(terminated),
            bool(truncated),
            self._mask_info(info_to_numpy(info)),
        )

    def _frame(self) -> np.ndarray:
        return np.array(self._run.fns.render(self.state, self.params))

    def render(self):
        """rgb_array: uint8[H, W, 3]; ansi: str; human and None: None (human draws in reset/step)."""
        return _render(self, self.state, batched=False)

    def close(self):
        if self._window is not None:
            self._window.close()
        self._closed = True


def _check_open(adapter, method: str) -> None:
    if getattr(adapter, "_closed", False) or getattr(adapter, "closed", False):
        raise gymnasium.error.ClosedEnvironmentError(
            f"{adapter.jaxenvs_env.name}: {method}() after close(); make a new environment"
        )


def _render(adapter, state, batched: bool):
    """The render() of both adapters. rgb_array: uint8[H, W, 3] (a tuple of them, one per copy, when
    ``batched``); ansi: a string (a tuple of them); other modes and None: None."""
    if adapter.render_mode is None:
        gymnasium.logger.warn("render() called without a render_mode; pass render_mode to the constructor")
        return None
    _check_open(adapter, "render")
    if state is None:
        raise gymnasium.error.ResetNeeded("call reset() before render()")
    env, params = adapter.jaxenvs_env, adapter.params
    if adapter.render_mode == "rgb_array":
        frames = np.array(adapter._run.fns.render(state, params))
        return tuple(frames) if batched else frames
    if adapter.render_mode == "ansi":
        if not batched:
            return env.render_text(state, params)
        host_state = jax.device_get(state)
        return tuple(env.render_text(tree_index(host_state, i), params) for i in range(adapter.num_envs))
    return None


# ---- the vector environment ------------------------------------------------------------------


def _vector_infos(info: dict, mask: np.ndarray) -> dict:
    """Gymnasium's vector info layout for keys present in the envs where ``mask`` is set: value
    arrays (zero elsewhere) plus ``"_key"`` masks; keys present nowhere are left out."""
    out = {}
    if not mask.any():
        return out
    for k, v in info.items():
        v = np.asarray(v)
        out[k] = np.where(mask.reshape((-1,) + (1,) * (v.ndim - 1)), v, np.zeros_like(v))
        out[f"_{k}"] = mask.copy()
    return out


class GymnasiumVectorEnv(VectorEnv):
    """``num_envs`` copies of a single-agent jaxenvs environment as a ``gymnasium.vector.VectorEnv``.

    One jitted, vmapped call steps (and auto-resets) every copy, with one host -> device transfer
    of the actions and one device -> host transfer of the results per step.

    Args:
        env_or_id, params, render_mode, **make_kwargs: as `GymnasiumEnv` (render modes
            rgb_array and ansi return a tuple with one frame per copy).
        num_envs: number of copies (>= 1).
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (Gymnasium's default: the step after an
            episode ended resets that copy, ignoring its action, with reward 0 and both flags
            false) or ``AutoresetMode.SAME_STEP`` (the copy is reset in the step that ended the
            episode; ``infos["final_obs"]`` (an object array, None elsewhere) and
            ``infos["final_info"]`` hold the last observation and info, with ``"_final_obs"`` /
            ``"_final_info"`` masks). Also ``metadata["autoreset_mode"]``.

    Seeds follow ``SyncVectorEnv``: ``reset(seed=s)`` seeds copy ``i`` with ``s + i`` (a list gives
    one seed per copy, None entries continue that copy's chain), so the trajectories are those of
    ``SyncVectorEnv`` over `GymnasiumEnv` copies. ``reset(options={"reset_mask": m})``
    resets only the copies where the bool[num_envs] ``m`` is set. Rewards are float64, flags bool.

    Envs with legal actions (``traits.action_style == "full_action_set"``) add
    ``infos["action_mask"]`` (int8[num_envs, n], the masks of the returned observations, a reset
    copy's included; ``"_action_mask"`` all true) at reset and every step, and ``action_masks()``
    returns them as bool[num_envs, n].
    """

    _MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)

    def __init__(
        self,
        env_or_id,
        num_envs: int,
        params=None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        **make_kwargs,
    ):
        if isinstance(num_envs, (bool, np.bool_)) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            mode = None
        if mode not in self._MODES:
            raise ValueError(
                f"autoreset_mode must be one of {[m.value for m in self._MODES]} (or the AutoresetMode members), "
                f"got {autoreset_mode!r}"
            )
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if env.multi_agent:
            raise ValueError(
                f"{env.name} has {env.num_agents} agents; GymnasiumVectorEnv takes single-agent environments"
            )
        self.jaxenvs_env, self.params, self.num_envs = env, params, int(num_envs)
        self.autoreset_mode = mode
        modes = [m for m in supported_render_modes(env) if m != "human"]
        self.metadata = {"autoreset_mode": mode, "render_modes": modes, "render_fps": env.render_fps}
        check_render_mode(render_mode, modes, f"{env.name} (vectorised)")
        self.render_mode = render_mode
        self.single_observation_space = to_gymnasium(env.observation_space(params))
        self.single_action_space = to_gymnasium(env.action_space(params))
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.spec = _gym_spec(env_or_id, env, dict(make_kwargs))
        self._run = Runner(env, True)
        self._keys = self._state = self._obs = None
        self._pending = np.zeros(self.num_envs, bool)
        self._masks = ActionMasks(env, batched=True)

    def _mask_infos(self, infos: dict) -> dict:
        if self._masks.active:
            infos["action_mask"], infos["_action_mask"] = self._masks.int8(), np.ones(self.num_envs, bool)
        return infos

    def action_masks(self) -> np.ndarray:
        """bool[num_envs, n]: the legal actions of every copy's current state (envs with
        ``action_style="full_action_set"``; AttributeError for the others)."""
        return self._masks.bool()

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        _check_open(self, "reset")
        n = self.num_envs
        single = isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_))
        if single:
            seed = check_seed(seed, f"{type(self).__name__}.reset(seed=...)")
        super().reset(seed=seed if single else None)
        if seed is None:
            seeds = [None] * n
        elif single:
            seeds = [int(seed) + i for i in range(n)]
        elif not isinstance(seed, (list, tuple, np.ndarray)):
            raise ValueError(
                f"{type(self).__name__}.reset(seed=...): a seed must be a non-negative integer, a list of "
                f"{n} of them (one per copy) or None, got {seed!r}"
            )
        else:
            seeds = [None if s is None else check_seed(s, f"{type(self).__name__}.reset(seed=[...])") for s in seed]
            if len(seeds) != n:
                raise ValueError(f"reset(seed=...) got {len(seeds)} seeds for num_envs={n}")
        keys = reset_keys(self._keys, seeds, lambda size: self.np_random.integers(2**32, size=size))
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            mask = self._check_reset_mask(mask)
        (new_keys, obs, state), host_obs = self._run("reset", keys, self.params)
        if mask is not None:
            new_keys, obs, state = self._run.fns.select(
                mask, (new_keys, obs, state), (self._keys, self._obs, self._state)
            )
            host_obs = jax.device_get(obs)
            self._pending = self._pending & ~mask
        else:
            self._pending = np.zeros(n, bool)
        self._keys, self._obs, self._state = new_keys, obs, state
        self._pending_dev = jax.device_put(self._pending)
        self._masks.update(host_obs, self._state, self.params)
        return obs_to_numpy(self.observation_space, host_obs), self._mask_infos({})

    def _check_reset_mask(self, mask) -> np.ndarray:
        if self._state is None:
            raise gymnasium.error.ResetNeeded("reset_mask needs a previous full reset()")
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must be a numpy bool array of shape ({self.num_envs},), got {mask!r}"
            )
        if not mask.any():
            raise ValueError("options['reset_mask'] must select at least one environment")
        return mask

    def step(self, actions):
        _check_open(self, "step")
        if self._state is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        actions = check_action(
            self.single_action_space, actions, (self.num_envs,), where=f"{self.jaxenvs_env.name} vector step"
        )
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            was_reset = self._pending
            device, host = self._run("step_next", self._keys, self._state, self._pending_dev, actions, self.params)
            self._keys, self._obs, self._state, self._pending_dev = device
            obs, reward, terminated, truncated, info = host
            infos = _vector_infos(info, ~was_reset)
        else:
            device, host = self._run("step_same", self._keys, self._state, actions, self.params)
            self._keys, self._obs, self._state = device
            obs, reward, terminated, truncated, info, final_obs = host
            done = terminated | truncated
            infos = _vector_infos(info, ~done)
            if done.any():
                final = np.full(self.num_envs, None, dtype=object)
                rows = np.flatnonzero(done)
                for i, o in zip(rows, obs_rows(self.single_observation_space, final_obs, rows)):
                    final[i] = o
                infos["final_obs"], infos["_final_obs"] = final, done.copy()
                infos["final_info"], infos["_final_info"] = _vector_infos(info, done), done.copy()
        self._pending = terminated | truncated
        self._masks.update(obs, self._state, self.params)
        return (
            obs_to_numpy(self.observation_space, obs),
            np.asarray(reward, np.float64),
            np.array(terminated, bool),
            np.array(truncated, bool),
            self._mask_infos(infos),
        )

    def render(self):
        """rgb_array: a tuple of uint8[H, W, 3] frames; ansi: a tuple of strings; None: None."""
        return _render(self, self._state, batched=True)


register_gymnasium_envs()
