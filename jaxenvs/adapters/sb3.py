"""Stable-Baselines3 adapter: `SB3VecEnv`, ``num_envs`` copies of a single-agent jaxenvs
environment as a ``stable_baselines3`` VecEnv, stepped by one jitted, vmapped call.

SB3 takes its own VecEnv (not Gymnasium's VectorEnv)::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from jaxenvs.adapters.sb3 import SB3VecEnv

    venv = VecMonitor(SB3VecEnv("GridWorld-v0", num_envs=8, seed=0))
    PPO("MultiInputPolicy", venv).learn(10_000)
"""

from __future__ import annotations

from typing import Any

from jaxenvs._optional import require

require("stable_baselines3", extra="sb3", purpose="the Stable-Baselines3 adapter (jaxenvs.adapters.sb3)")
require("gymnasium", extra="sb3", purpose="the Stable-Baselines3 adapter (jaxenvs.adapters.sb3)")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices  # noqa: E402

from jaxenvs.adapters import Runner, reset_keys, resolve_env
from jaxenvs.adapters.host import (ActionMasks, check_action, check_render_mode, obs_rows, obs_to_numpy,
                                   supported_render_modes, tree_index)
from jaxenvs.spaces import to_gymnasium

__all__ = ["SB3VecEnv"]


def _per_env(values: np.ndarray) -> list:
    """A batched info leaf split per env as GymnasiumEnv gives it: Python bools, numpy scalars
    (``np.int32``, ``np.float32``) or fresh arrays."""
    if values.ndim > 1:
        return [row.copy() for row in values]
    return values.tolist() if values.dtype == np.bool_ else list(values)


class _SubEnv:
    """What ``get_attr``/``set_attr``/``env_method`` see of copy ``index``: the shared spaces and
    settings (read-only), ``render()`` of this copy, and any attribute a user sets."""

    def __init__(self, venv: "SB3VecEnv", index: int):
        self._venv, self._index = venv, index

    observation_space = property(lambda self: self._venv.observation_space)
    action_space = property(lambda self: self._venv.action_space)
    render_mode = property(lambda self: self._venv.render_mode)
    metadata = property(lambda self: self._venv.env_metadata)
    jaxenvs_env = property(lambda self: self._venv.jaxenvs_env)
    params = property(lambda self: self._venv.params)

    def render(self):
        return self._venv._render_one(self._index)

    @property
    def action_masks(self):
        """bool[n] of this copy (what sb3-contrib's ``MaskablePPO`` collects with ``env_method``);
        absent (AttributeError) for envs without legal-action masks."""
        masks = self._venv._masks
        if not masks.active:
            raise AttributeError(f"{self._venv.jaxenvs_env.name} has no legal-action mask")
        return lambda: masks.bool()[self._index]


class SB3VecEnv(VecEnv):
    """``num_envs`` copies of a single-agent jaxenvs environment as an SB3 ``VecEnv``.

    Args:
        env_or_id: a registered id (built with ``jaxenvs.make(id, autoreset=False, **make_kwargs)``;
            the spec's TimeLimit sets truncation) or a jaxenvs Environment (outermost AutoReset removed).
        num_envs: number of copies (>= 1).
        seed: if given, ``seed(seed)`` before the first reset (copy ``i`` gets ``seed + i``).
        params: the environment's params (``None``: its ``default_params``).
        render_mode: ``"rgb_array"`` (``render()`` tiles the copies' frames), ``"ansi"`` or None.
        **make_kwargs: passed to ``jaxenvs.make``.

    As SB3's ``DummyVecEnv``: a copy whose episode ends is reset in the same step; its info holds
    ``"terminal_observation"`` (the last observation) and every info holds
    ``"TimeLimit.truncated"`` (``truncated and not terminated``), next to the environment's own
    info values (numpy scalars). Observations are numpy arrays with a leading ``num_envs`` axis (a
    dict of them for Dict spaces), rewards float32, dones bool. A reset without pending seeds
    continues each copy's key chain (the very first one draws seeds from ``np.random``), so
    results equal ``DummyVecEnv`` over `jaxenvs.adapters.gymnasium.GymnasiumEnv` copies
    seeded the same way. Reset options are ignored (jaxenvs environments take none).

    Envs with legal actions (``traits.action_style == "full_action_set"``, e.g. a turn-based game
    seen through `jaxenvs.wrappers.PlayAgainst`) add ``"action_mask"`` (int8[n], the mask of the
    returned observation: after an auto-reset, the new episode's) to every info and to
    ``reset_infos``; ``action_masks()`` (and ``env_method("action_masks")``, which sb3-contrib's
    ``MaskablePPO`` calls) returns them as bool[num_envs, n]. ``MaskablePPO`` then trains with
    masked action distributions::

        from sb3_contrib import MaskablePPO
        from jaxenvs.wrappers import PlayAgainst

        game = PlayAgainst(jaxenvs.make("TicTacToe-v0", autoreset=False), seat="random")
        MaskablePPO("MultiInputPolicy", SB3VecEnv(game, num_envs=8, seed=0)).learn(2_048)
    """

    def __init__(
        self,
        env_or_id,
        num_envs: int,
        seed: int | None = None,
        params=None,
        render_mode: str | None = None,
        **make_kwargs,
    ):
        if isinstance(num_envs, (bool, np.bool_)) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        env, params = resolve_env(env_or_id, params, make_kwargs)
        if env.multi_agent:
            raise ValueError(f"{env.name} has {env.num_agents} agents; SB3VecEnv takes single-agent environments")
        self.jaxenvs_env, self.params = env, params
        modes = [m for m in supported_render_modes(env) if m != "human"]
        check_render_mode(render_mode, modes, f"{env.name} (SB3VecEnv)")
        self.env_metadata = {"render_modes": modes, "render_fps": env.render_fps}
        self._render_mode = render_mode
        self._subenvs = [_SubEnv(self, i) for i in range(int(num_envs))]
        obs_space, act_space = to_gymnasium(env.observation_space(params)), to_gymnasium(env.action_space(params))
        super().__init__(int(num_envs), obs_space, act_space)
        # observation_space with a leading num_envs axis (Discrete -> int64 arrays)
        self._batched_obs_space = batch_space(self.observation_space, self.num_envs)
        self._run = Runner(env, True)
        self._keys = self._state = self._actions = None
        self._masks = ActionMasks(env, batched=True)
        if seed is not None:
            self.seed(seed)

    def reset(self):
        keys = reset_keys(self._keys, self._seeds, lambda n: np.random.randint(0, 2**32, size=n, dtype=np.uint64))
        (self._keys, _, self._state), obs = self._run("reset", keys, self.params)
        self._reset_seeds()
        self._reset_options()
        self._masks.update(obs, self._state, self.params)
        self.reset_infos = [self._mask_info({}, i) for i in range(self.num_envs)]
        return obs_to_numpy(self._batched_obs_space, obs)

    def _mask_info(self, info: dict, i: int) -> dict:
        if self._masks.active:
            info["action_mask"] = self._masks.mask[i].astype(np.int8)
        return info

    def action_masks(self) -> np.ndarray:
        """bool[num_envs, n]: the legal actions of every copy's current state (envs with
        ``action_style="full_action_set"``; AttributeError for the others)."""
        return self._masks.bool()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        actions = check_action(
            self.action_space, self._actions, (self.num_envs,), where=f"{self.jaxenvs_env.name} SB3VecEnv.step"
        )
        device, host = self._run("step_same", self._keys, self._state, actions, self.params)
        self._keys, _, self._state = device
        obs, reward, terminated, truncated, info, final_obs = host
        done = terminated | truncated
        keys = (*info.keys(), "TimeLimit.truncated")
        columns = [_per_env(v) for v in info.values()] + [(truncated & ~terminated).tolist()]
        infos = [dict(zip(keys, values)) for values in zip(*columns)]
        self._masks.update(obs, self._state, self.params)
        infos = [self._mask_info(info_i, i) for i, info_i in enumerate(infos)]
        rows = np.flatnonzero(done)
        for i, o in zip(rows, obs_rows(self.observation_space, final_obs, rows)):
            infos[i]["terminal_observation"] = o
            self.reset_infos[i] = self._mask_info({}, i)
        return (
            obs_to_numpy(self._batched_obs_space, obs),
            np.array(reward, np.float32),
            np.array(done, bool),
            infos,
        )

    def close(self) -> None:
        pass

    # ---- rendering ---------------------------------------------------------------------------
    @property
    def render_mode(self):
        return self._render_mode

    @render_mode.setter
    def render_mode(self, value):
        # VecEnv.__init__ assigns the mode it read back through get_attr
        if value != self._render_mode:
            raise AttributeError("render_mode is fixed at construction")

    def _render_one(self, index: int):
        if self._state is None:
            raise RuntimeError("call reset() before render()")
        if self._render_mode == "rgb_array":
            one = jax.tree.map(lambda leaf: leaf[index : index + 1], self._state)
            return np.array(self._run.fns.render(one, self.params)[0])
        if self._render_mode == "ansi":
            return self.jaxenvs_env.render_text(tree_index(jax.device_get(self._state), index), self.params)
        return None

    def get_images(self):
        if self._render_mode != "rgb_array":
            return [None] * self.num_envs
        if self._state is None:
            raise RuntimeError("call reset() before render()")
        return list(np.array(self._run.fns.render(self._state, self.params)))

    # ---- sub-environment access --------------------------------------------------------------
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self._subenvs[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self._subenvs[i], attr_name, value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        return [
            getattr(self._subenvs[i], method_name)(*method_args, **method_kwargs) for i in self._get_indices(indices)
        ]

    def env_is_wrapped(self, wrapper_class, indices: VecEnvIndices = None) -> list[bool]:
        """Always False: the copies are not Gymnasium environments, so nothing wraps them."""
        return [False for _ in self._get_indices(indices)]
