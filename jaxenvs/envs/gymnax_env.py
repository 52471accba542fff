"""gymnax environments as jaxenvs environments: ``jaxenvs.make("gymnax/CartPole-v1")``.

Every id in ``gymnax.registered_envs`` is available as ``"gymnax/<id>"`` once the optional
``gymnax`` package is installed (``pip install "jaxenvs[gymnax]"``; gymnax 1.0.x is supported).
The ids are registered lazily: the first lookup of a ``gymnax/`` id (or a registry listing)
imports gymnax and registers them all, so ``import jaxenvs`` never imports gymnax.

`GymnaxEnv` wraps one gymnax ``Environment`` instance:

* ``default_params`` are the gymnax env's own params (a flax dataclass), passed through unchanged,
  so ``make("gymnax/CartPole-v1", gravity=12.0)`` overrides a params field and ``jax.vmap`` over
  params works as for our own environments;
* ``reset``/``step`` call gymnax's ``reset_env``/``step_env`` (gymnax's own auto-reset is not
  used; ``make`` adds jaxenvs' `jaxenvs.wrappers.AutoReset`);
* ``terminated`` is gymnax's natural-terminal flag (gymnax 1.0's ``step_env`` no longer folds the
  time limit into it); ``truncated`` is gymnax's time limit, ``state.time >=
  params.max_steps_in_episode`` (``is_truncated``). A terminal state reached on the last allowed
  step sets both flags, as Gymnasium does. The registry also gives each id a
  `jaxenvs.wrappers.TimeLimit` of the gymnax default ``max_steps_in_episode`` (so
  ``spec.max_episode_steps`` is meaningful); when both limits apply, the smaller one ends the episode;
* spaces are converted to `jaxenvs.spaces` (``Discrete``, ``Box``, ``Dict``, ``Tuple``)
  with jaxenvs' dtypes: float boxes become float32, bool boxes uint8 in ``{0, 1}``, other integer
  boxes int32; every observation leaf is cast to its space's dtype (gymnax's observations and
  spaces disagree at times: MinAtar's bool image channels in a float32 Box come out float32);
  reward float32, flags bool (in the shapes ``step_env`` gives them: a scalar in every gymnax 1.0.1
  env; a gymnax-style env that returns, say, a reward of shape (1,) keeps it, and `check_env` and
  `verify_port` name it rather than have it squeezed away), and every leaf of the state keeps the dtype ``reset`` gave it (a
  ``lax.scan`` carry type-checks);
* out-of-range Discrete actions are clipped into ``[0, n - 1]`` (gymnax leaves them undefined);
* ``info`` is gymnax's step info (e.g. ``"discount"``); rendering is not available: gymnax has no
  jittable renderer (its ``gymnax.visualize.Visualizer`` draws matplotlib animations host-side),
  so ``render`` raises ``NotImplementedError`` saying so.

gymnax 0.0.x folded the time limit into ``done``; those versions are refused with a clear error.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs._optional import require
from jaxenvs import spaces
from jaxenvs.core import Environment, Traits
from jaxenvs.levels import ParamSpace, Uniform
from jaxenvs.registration import register, registry

__all__ = [
    "GymnaxEnv", "from_gymnax_space", "register_gymnax_envs", "NAMESPACE", "SUPPORTED_GYMNAX", "canonical_dtype",
    "cast_like", "space_dtypes", "key_is_used",
]

NAMESPACE = "gymnax"
SUPPORTED_GYMNAX = (1, 0)  # major, minor: the gymnax API version this module speaks (1.0.x)


def _import_gymnax():
    gymnax = require("gymnax", extra="gymnax", purpose="the 'gymnax/' environments")
    version = importlib.metadata.version("gymnax")
    major_minor = tuple(int(p) for p in version.split(".")[:2])
    if major_minor < SUPPORTED_GYMNAX:
        raise ImportError(
            f"gymnax {version} is installed; jaxenvs speaks gymnax's 1.0 API (step_env returning a "
            "natural-terminal flag, the time limit in is_truncated); install gymnax>=1.0,<1.1"
        )
    return gymnax


def canonical_dtype(dtype) -> np.dtype:
    """jaxenvs' dtype for an observation leaf of dtype ``dtype`` (a gymnax or any other library's):
    floats float32, bool and uint8 uint8, other integers int32."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype("float32")
    if dtype.kind == "b" or dtype == np.uint8:
        return np.dtype("uint8")
    if dtype.kind in "iu":
        return np.dtype("int32")
    raise TypeError(f"observation dtype {dtype} has no jaxenvs equivalent (floats, integers and bool have)")


def from_gymnax_space(space) -> spaces.Space:
    """The `jaxenvs.spaces` equivalent of a gymnax space (Discrete, Box, Dict, Tuple).

    Bounds computed from traced params stay arrays. Bool boxes become uint8 boxes in ``[0, 1]``;
    float bounds at ``+-finfo(float32).max`` (gymnax's "unbounded") become ``+-inf``.
    """
    if isinstance(space, spaces.Space):  # gymnax-style code of one's own may declare jaxenvs spaces
        return space
    gs = require("gymnax.environments.spaces", extra="gymnax", purpose="gymnax spaces")

    if isinstance(space, gs.Discrete):
        return spaces.Discrete(int(space.n))
    if isinstance(space, gs.Box):
        dtype = canonical_dtype(space.dtype)
        low, high = space.low, space.high
        traced = isinstance(low, jax.core.Tracer) or isinstance(high, jax.core.Tracer)
        if dtype.kind == "f" and not traced:
            # gymnax writes "unbounded" as +-finfo(float32).max (CartPole's velocities): make it
            # +-inf, as Gymnasium does, so consumers do not take high - low (an overflow) as a range
            big = np.finfo(np.float32).max
            low = np.where(np.asarray(low, np.float64) <= -big, -np.inf, np.asarray(low, np.float64))
            high = np.where(np.asarray(high, np.float64) >= big, np.inf, np.asarray(high, np.float64))
        if dtype.kind != "f" and not traced:
            info = np.iinfo(dtype)
            low = np.clip(np.asarray(low, np.float64), info.min, info.max)
            high = np.clip(np.asarray(high, np.float64), info.min, info.max)
        return spaces.Box(low, high, tuple(space.shape), dtype)
    if isinstance(space, gs.Dict):
        return spaces.Dict({k: from_gymnax_space(s) for k, s in space.spaces.items()})
    if isinstance(space, gs.Tuple):
        return spaces.Tuple([from_gymnax_space(s) for s in space.spaces])
    raise TypeError(f"cannot convert gymnax space {space!r}; supported: Discrete, Box, Dict, Tuple")


def cast_like(tree, like):
    """``tree`` with every leaf cast to the dtype of the matching leaf of ``like`` (shape structs)."""
    return jax.tree.map(lambda x, ref: jnp.asarray(x, dtype=ref.dtype), tree, like)


def space_dtypes(space: spaces.Space):
    """A pytree of dtypes shaped like an element of ``space``."""
    if isinstance(space, spaces.Dict):
        return {k: space_dtypes(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(space_dtypes(s) for s in space.spaces)
    return space.dtype


def key_is_used(fn, key, *args) -> bool:
    """Whether ``fn(key, *args)`` provably reads ``key`` (``args`` may be shape structs): read off its
    jaxpr, after dead-code elimination, so a key that is split but never drawn from does not count."""
    closed = jax.make_jaxpr(fn)(key, *args)
    jaxpr = closed.jaxpr
    try:
        from jax._src.interpreters import partial_eval as pe

        _, used = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
        return bool(used[0])
    except Exception:  # no DCE in this jax: any use of the key counts
        key_var = jaxpr.invars[0]
        return any(key_var in e.invars for e in jaxpr.eqns) or key_var in jaxpr.outvars


class GymnaxEnv(Environment):
    """A gymnax 1.0 ``Environment`` instance as a jaxenvs `jaxenvs.core.Environment`.

    ``GymnaxEnv(gymnax_env)`` wraps any gymnax environment, including one of your own; the
    registered ``"gymnax/<id>"`` ids build it from gymnax's registry. See the module docstring for
    how flags, spaces and dtypes are converted.
    """

    def __init__(self, gymnax_env: Any):
        for attr in ("reset_env", "step_env", "default_params", "observation_space", "action_space"):
            if not hasattr(gymnax_env, attr):
                raise TypeError(
                    f"GymnaxEnv wraps a gymnax 1.0 Environment (with {attr}); got {type(gymnax_env).__name__}"
                )
        self.gymnax_env = gymnax_env

    @functools.cached_property
    def traits(self) -> Traits:
        """Single-agent; ``chance`` is ``"deterministic"`` when gymnax's ``step_env`` provably
        ignores its key (read off its jaxpr once, on first access), else ``"stochastic"``."""
        return Traits(num_agents=1, chance="stochastic" if self._step_uses_key() else "deterministic")

    def _step_uses_key(self) -> bool:
        params = self.default_params
        key = jax.random.key(0)
        _, state = jax.eval_shape(self.gymnax_env.reset_env, key, params)
        action = self.action_space(params).sample(key)
        return key_is_used(lambda k, st, p: self.gymnax_env.step_env(k, st, action, p), key, state, params)

    @property
    def name(self) -> str:
        return f"gymnax:{type(self.gymnax_env).__name__}"

    @property
    def default_params(self):
        return self.gymnax_env.default_params

    def validate_params(self, params) -> None:
        limit = getattr(params, "max_steps_in_episode", None)
        if limit is not None and not (np.ndim(limit) > 0 or float(limit) >= 1):
            raise ValueError(f"{self.name} params.max_steps_in_episode must be >= 1, got {limit!r}")

    # ---- dynamics -----------------------------------------------------------------------------
    def _reset_shapes(self, key, params):
        # trace-time only: the dtypes reset gives every obs and state leaf
        return jax.eval_shape(self.gymnax_env.reset_env, key, params)

    def _cast_obs(self, obs):
        # every leaf to its space's dtype (gymnax obs and spaces disagree at times: Catch, FourRooms)
        dtypes = space_dtypes(self.observation_space(self.default_params))
        return jax.tree.map(lambda x, d: jnp.asarray(x, dtype=d), obs, dtypes)

    def reset_env(self, key, params):
        _, state_shapes = self._reset_shapes(key, params)
        obs, state = self.gymnax_env.reset_env(key, params)
        return self._cast_obs(obs), cast_like(state, state_shapes)

    def step_env(self, key, state, action, params):
        _, state_shapes = self._reset_shapes(key, params)
        space = self.action_space(self.default_params)
        if isinstance(space, spaces.Discrete):
            action = jnp.clip(action, 0, space.n - 1)  # out-of-range actions are clipped (documented)
        obs, state, reward, terminated, info = self.gymnax_env.step_env(key, state, action, params)
        state = cast_like(state, state_shapes)
        is_truncated = getattr(self.gymnax_env, "is_truncated", None)  # gymnax-style code may have none
        truncated = jnp.zeros((), bool) if is_truncated is None else jnp.asarray(is_truncated(state, params), bool)
        info = {k: jnp.asarray(v) for k, v in dict(info).items()}
        return (
            self._cast_obs(obs),
            state,
            jnp.asarray(reward, jnp.float32),  # the env's own shape: a scalar, else check_env and verify_port say so
            jnp.asarray(terminated, bool),
            truncated.reshape(()),
            info,
        )

    # ---- spaces -------------------------------------------------------------------------------
    def observation_space(self, params=None) -> spaces.Space:
        return from_gymnax_space(self.gymnax_env.observation_space(params))

    def action_space(self, params=None) -> spaces.Space:
        return from_gymnax_space(self.gymnax_env.action_space(params))

    def render(self, state, params=None):
        raise NotImplementedError(
            f"{self.name} has no render(): gymnax environments have no jittable renderer "
            "(gymnax.visualize.Visualizer draws matplotlib animations host-side)"
        )

    def param_space(self):
        """The classic-control physics ranges of `CLASSIC_CONTROL_SPACES` (keyed by the gymnax
        class, which cannot declare its own), or None for other gymnax envs."""
        declare = CLASSIC_CONTROL_SPACES.get(type(self.gymnax_env).__name__)
        return None if declare is None else declare(self.default_params)

    def __repr__(self) -> str:
        return f"<GymnaxEnv {type(self.gymnax_env).__name__}>"


class _GymnaxEntryPoint:
    """Registry entry point of one gymnax id: builds ``GymnaxEnv(factory(**kwargs))``.

    Carries the gymnax factory's signature, so ``make`` tells constructor kwargs (e.g. MinAtar's
    ``use_minimal_action_set``) from params fields (e.g. CartPole's ``gravity``).
    """

    traits = Traits(num_agents=1)  # for listings; the built env reads its chance trait off gymnax's step

    def __init__(self, gymnax_id: str, factory):
        self.gymnax_id = gymnax_id
        self.factory = factory
        try:
            self.__signature__ = inspect.signature(factory)
        except (TypeError, ValueError):
            self.__signature__ = inspect.Signature()

    def __call__(self, **kwargs) -> GymnaxEnv:
        try:
            env = self.factory(**kwargs)
        except TypeError:  # wrong constructor arguments: the caller's mistake, kept as it is
            raise
        except Exception as e:  # e.g. MNISTBandit downloads MNIST in its constructor
            raise ImportError(
                f"gymnax/{self.gymnax_id} cannot be built here: gymnax's constructor failed with "
                f"{type(e).__name__}: {e}"
            ) from e
        return GymnaxEnv(env)

    @property
    def description(self) -> str:
        """gymnax's own first line for the class (its docstring), for ``jaxenvs list``."""
        doc = " ".join((getattr(self.factory, "__doc__", None) or "").strip().split("\n\n")[0].split())
        return f"gymnax: {doc}" if doc else f"gymnax's {self.gymnax_id}"

    def __repr__(self) -> str:
        return f"gymnax.make({self.gymnax_id!r})"


def _cartpole_space(base):
    def derived(key, p):  # gymnax keeps two products of other fields as fields of their own
        return p.replace(total_mass=p.masscart + p.masspole, polemass_length=p.masspole * p.length)

    return ParamSpace(base, masscart=Uniform(0.5, 2.0), masspole=Uniform(0.05, 0.2), length=Uniform(0.25, 1.0),
                      force_mag=Uniform(5.0, 15.0), generator=derived)


def _pendulum_space(base):
    return ParamSpace(base, m=Uniform(0.5, 2.0), l=Uniform(0.5, 1.5), g=Uniform(8.0, 12.0))


def _acrobot_space(base):
    return ParamSpace(base, link_mass_1=Uniform(0.5, 2.0), link_mass_2=Uniform(0.5, 2.0))


def _mountain_car_space(base):
    force = "force" if hasattr(base, "force") else "power"
    return ParamSpace(base, gravity=Uniform(0.002, 0.003), **{force: Uniform(0.75 * getattr(base, force), 1.25 * getattr(base, force))})


# gymnax classic control: physics ranges for domain randomisation (roughly 0.5x-2x the masses,
# +-25% of the forces; the time step and the limits stay as gymnax has them)
CLASSIC_CONTROL_SPACES = {
    "CartPole": _cartpole_space,
    "Pendulum": _pendulum_space,
    "Acrobot": _acrobot_space,
    "MountainCar": _mountain_car_space,
    "ContinuousMountainCar": _mountain_car_space,
}


def _default_max_steps(factory) -> int | None:
    """gymnax's default ``max_steps_in_episode`` for ``factory``'s env, read without building it
    (some constructors load data sets); None where the default depends on constructor arguments."""
    try:
        params = factory.__new__(factory).default_params
        limit = int(params.max_steps_in_episode)
    except Exception:  # default_params reads attributes set in __init__: no fixed default
        return None
    return limit if limit >= 1 else None


_REWARD_THRESHOLDS = {"CartPole-v1": 475.0, "Acrobot-v1": -100.0}  # Gymnasium's, as train.grading's bar


def register_gymnax_envs() -> list[str]:
    """Register every id of ``gymnax.registered_envs`` as ``"gymnax/<id>"``; returns the ids added.

    Called by the registry the first time a ``gymnax/`` id is looked up; safe to call again.
    """
    gymnax = _import_gymnax()

    factories = getattr(gymnax.registration, "_registry", {})
    added = []
    for gid in gymnax.registered_envs:
        jid = f"{NAMESPACE}/{gid}"
        if jid in registry:
            continue
        factory = factories.get(gid)
        if factory is None:  # a registry without factories: build through gymnax.make
            def factory(_gid=gid, **kwargs):
                return gymnax.make(_gid, **kwargs)[0]
        max_steps = _default_max_steps(factory) if isinstance(factory, type) else None
        register(
            jid,
            _GymnaxEntryPoint(gid, factory),
            max_episode_steps=max_steps,
            reward_threshold=_REWARD_THRESHOLDS.get(gid),
        )
        added.append(jid)
    return added
