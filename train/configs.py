"""PPO configuration: every field with its meaning, and the tuned defaults per environment.

``PPOConfig`` holds two kinds of values:

* static ones that fix array shapes or the program's structure (``num_envs``, ``num_steps``,
  ``hidden_sizes``, ...): changing them compiles a new program;
* numeric hyperparameters (``lr``, ``gamma``, ``clip_eps``, ...) that travel into the compiled
  program as traced values through :class:`HParams`, so one compiled ``train`` serves many values
  and ``jax.vmap`` over them works (a learning-rate sweep is one call).

``DEFAULTS`` is the single place where per-environment tuning lives; :func:`get_config` merges
it over the ``PPOConfig`` defaults and then over the caller's overrides.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import jax.numpy as jnp
from flax import struct

__all__ = [
    "PPOConfig", "HParams", "TRPOConfig", "TRPOHParams", "TRPO_DEFAULTS", "TUNED", "ALGOS", "DEFAULTS", "DEFAULT_ENV", "get_config", "config_from_dict", "load_config_file",
]

DEFAULT_ENV = "GridWorld-v0"


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    ALGO = "ppo"  # the name --algo and config.json's "algo" use (a class attribute, not a field)

    env_id: str = DEFAULT_ENV
    env_kwargs: dict = dataclasses.field(default_factory=dict)  # passed to jaxenvs.make
    total_timesteps: int = 100_000  # env transitions per seed (an N-agent transition counts once)
    num_envs: int = 16  # parallel environments per seed
    num_steps: int = 32  # rollout length per update; batch = num_envs * num_agents * num_steps
    update_epochs: int = 4
    num_minibatches: int = 4
    lr: float = 3e-4  # Adam step size (before annealing)
    anneal_lr: bool = True  # linear decay to 0 over the run's updates
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2  # policy-ratio clip; the value clip uses the same width
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5  # global-norm gradient clip
    # Standardise advantages per minibatch. Off for games whose signal is in the advantages' scale
    # across minibatches (rare large rewards, near-equilibrium self-play), where it amplifies noise.
    normalize_advantages: bool = True
    # Rewards are multiplied by reward_scale before learning (GAE, value targets); logged returns
    # stay in the environment's units. Use it for environments whose rewards span many orders of
    # magnitude (Lottery pays up to 1e8).
    reward_scale: float = 1.0
    hidden_sizes: tuple = (64, 64)  # per MLP; actor and critic have separate trunks
    activation: str = "tanh"  # "tanh" or "relu"
    num_seeds: int = 1  # independent runs vmapped in one program (CLI --seeds)
    seed: int = 0  # root seed; seed i of a run uses the i-th split of jax.random.key(seed)
    num_chunks: int = 20  # CLI: jitted calls the run is split into (progress printed between them)

    def __post_init__(self):
        positive = ("total_timesteps", "num_envs", "num_steps", "update_epochs", "num_minibatches", "num_seeds", "num_chunks")
        for name in positive:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"PPOConfig.{name} must be an int >= 1, got {v!r}")
        if self.activation not in ("tanh", "relu"):
            raise ValueError(f"PPOConfig.activation must be 'tanh' or 'relu', got {self.activation!r}")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.gae_lambda <= 1.0):
            raise ValueError(f"gamma and gae_lambda must lie in [0, 1], got {self.gamma}, {self.gae_lambda}")
        if self.lr <= 0 or self.clip_eps <= 0 or self.max_grad_norm <= 0 or self.reward_scale <= 0:
            raise ValueError("lr, clip_eps, max_grad_norm and reward_scale must be > 0")
        if not self.hidden_sizes or any(int(h) < 1 for h in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be a non-empty sequence of ints >= 1, got {self.hidden_sizes!r}")
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        if not isinstance(self.env_kwargs, dict):
            raise TypeError(f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")

    @property
    def num_updates(self) -> int:
        """Updates per seed: ``ceil(total_timesteps / (num_envs * num_steps))``."""
        return -(-self.total_timesteps // (self.num_envs * self.num_steps))

    @property
    def steps_per_update(self) -> int:
        """Env transitions one update collects for one seed."""
        return self.num_envs * self.num_steps

    def hparams(self) -> "HParams":
        """The numeric hyperparameters as float32 scalars (the traced part of the config)."""
        return HParams(**{f.name: jnp.float32(getattr(self, f.name)) for f in dataclasses.fields(HParams)})

    def replace(self, **kwargs) -> "PPOConfig":
        return config_from_dict({**self.to_dict(), **kwargs})

    def to_dict(self) -> dict:
        """The fields as JSON-ready values, with ``"algo"`` naming the config's algorithm."""
        d = dataclasses.asdict(self)
        d["hidden_sizes"] = list(self.hidden_sizes)
        return {"algo": self.ALGO, **d}


@struct.dataclass
class HParams:
    """Hyperparameters that enter the compiled program as traced float32 values.

    ``jax.vmap(train)(keys, hparams)`` with every leaf of shape ``[n]`` trains ``n`` runs with
    different values in one program (see :func:`train.ppo.stack_hparams`).
    """

    lr: Any
    gamma: Any
    gae_lambda: Any
    clip_eps: Any
    ent_coef: Any
    vf_coef: Any
    max_grad_norm: Any
    reward_scale: Any


# Tuned defaults per environment (overrides of the PPOConfig defaults). With a quarter of these
# budgets, 4 of 4 seeds already met train.evaluate's bar on every env: the defaults keep a 4x margin.
DEFAULTS: dict[str, dict] = {
    "GridWorld-v0": dict(total_timesteps=60_000, num_envs=32, num_steps=32, lr=1e-3),
    "PointEnv-v0": dict(total_timesteps=200_000, num_envs=32, num_steps=64, lr=1e-3, ent_coef=0.0),
    "HurdleRace-v0": dict(total_timesteps=60_000, num_envs=16, num_steps=32, lr=1e-3),
    # Rewards in units of the jackpot (1e8): PowerRich pays 1 w.p. 0.01, MegaHaul 0.01 w.p. 0.05.
    # Plain policy gradient (one epoch, one minibatch, raw advantages): per-minibatch
    # standardisation and repeated clipped epochs both weigh the frequent small MegaHaul wins like
    # the rare jackpot and settle on MegaHaul.
    "Lottery-v0": dict(
        total_timesteps=100_000, num_envs=64, num_steps=16, update_epochs=1, num_minibatches=1, lr=1e-3,
        ent_coef=0.0, gamma=0.0, reward_scale=1e-8, normalize_advantages=False,
    ),
    # Self-play of a one-shot zero-sum game: simultaneous policy gradient cycles around the uniform
    # equilibrium; a strong entropy bonus (whose regularised equilibrium is still uniform) damps
    # the cycles, and raw advantages keep the sampling noise from being scaled up.
    "RockPaperScissors-v0": dict(
        total_timesteps=50_000, num_envs=64, num_steps=8, lr=3e-4, ent_coef=0.2, gamma=0.0,
        normalize_advantages=False,
    ),
}


@dataclasses.dataclass(frozen=True)
class TRPOConfig:
    """Trust Region Policy Optimization (Schulman et al. 2015) as garage runs it.

    garage's defaults (``garage.tf.algos.TRPO``/``NPO`` and its ``ConjugateGradientOptimizer``,
    ``PearlmutterHvp``, and ``LinearFeatureBaseline``), kept here: ``discount=0.99``,
    ``max_kl_step=0.01``, ``policy_ent_coeff=0`` (``ent_coef``), ``cg_iters=10``,
    ``reg_coeff=1e-5`` (the damping added to the Fisher-vector product), ``backtrack_ratio=0.8``, ``max_backtracks=15``, ``center_adv=True``
    (``normalize_advantages``), ``gae_lambda=1`` (NPO's default, which garage's TRPO PointEnv
    example keeps), no entropy term, the baseline refit by ridge least squares with
    ``reg_coeff=1e-5`` and ``GaussianMLPPolicy(hidden_sizes=(32, 32), init_std=1.0)`` with tanh
    hidden layers (``log_std_init=0``). garage's tutorial trains PointEnv with
    ``normalize(env)``, the linear baseline and ``batch_size=4000`` per iteration.
    """

    ALGO = "trpo"  # the name --algo and config.json's "algo" use (a class attribute, not a field)

    env_id: str = DEFAULT_ENV
    env_kwargs: dict = dataclasses.field(default_factory=dict)  # passed to jaxenvs.make
    total_timesteps: int = 400_000  # env transitions per seed (an N-agent transition counts once)
    num_envs: int = 40  # parallel environments per seed
    num_steps: int = 100  # rollout length per update (garage's tutorial: 4000 steps per iteration)
    gamma: float = 0.99
    gae_lambda: float = 1.0
    max_kl: float = 0.01  # trust region: mean KL(old || new) over the batch after a step
    cg_iters: int = 10  # conjugate-gradient iterations for F^-1 g
    cg_damping: float = 1e-5  # added to the Fisher-vector product (garage's reg_coeff)
    backtrack_ratio: float = 0.8  # line search: step fractions 1, r, r^2, ...
    max_backtracks: int = 15  # candidate steps tried before the update is rejected
    normalize_advantages: bool = True  # standardise the advantages over the batch (center_adv)
    ent_coef: float = 0.0  # entropy bonus in the surrogate (garage's policy_ent_coeff, "regularized")
    baseline: str = "linear"  # "linear" (garage's LinearFeatureBaseline) or "value" (a critic MLP)
    baseline_reg: float = 1e-5  # linear baseline: ridge coefficient (x10, up to 4 times, if ill-posed)
    vf_lr: float = 1e-3  # value baseline: Adam step size
    vf_epochs: int = 5  # value baseline: passes over the batch per update
    vf_minibatches: int = 4  # value baseline: minibatches per pass
    reward_scale: float = 1.0  # rewards multiplied before learning; logged returns stay in env units
    normalize_env: bool = True  # wrap in jaxenvs.wrappers.normalize (actions from [-1, 1])
    normalize_reward: bool = False  # normalize(..., normalize_reward=True)
    hidden_sizes: tuple = (32, 32)  # policy MLP (and the value baseline's)
    activation: str = "tanh"  # "tanh" or "relu"
    log_std_init: float = 0.0  # Gaussian policies: initial log standard deviation (std 1)
    num_seeds: int = 1  # independent runs vmapped in one program (CLI --seeds)
    seed: int = 0  # root seed; seed i of a run uses the i-th split of jax.random.key(seed)
    num_chunks: int = 20  # CLI: jitted calls the run is split into (progress printed between them)

    def __post_init__(self):
        positive = (
            "total_timesteps", "num_envs", "num_steps", "cg_iters", "max_backtracks", "vf_epochs", "vf_minibatches",
            "num_seeds", "num_chunks",
        )
        for name in positive:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"TRPOConfig.{name} must be an int >= 1, got {v!r}")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0.0 <= v <= 1.0:
                raise ValueError(f"TRPOConfig.{name} must be a number in [0, 1], got {v!r}")
        if not isinstance(self.backtrack_ratio, (int, float)) or not 0.0 < self.backtrack_ratio < 1.0:
            raise ValueError(f"TRPOConfig.backtrack_ratio must lie in (0, 1), got {self.backtrack_ratio!r}")
        for name in ("max_kl", "cg_damping", "baseline_reg", "vf_lr", "reward_scale"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"TRPOConfig.{name} must be a finite number > 0, got {v!r}")
        if not isinstance(self.ent_coef, (int, float)) or not math.isfinite(self.ent_coef) or self.ent_coef < 0:
            raise ValueError(f"TRPOConfig.ent_coef must be a finite number >= 0, got {self.ent_coef!r}")
        if not isinstance(self.log_std_init, (int, float)) or not math.isfinite(self.log_std_init):
            raise ValueError(f"TRPOConfig.log_std_init must be a finite number, got {self.log_std_init!r}")
        if self.baseline not in ("linear", "value"):
            raise ValueError(f"TRPOConfig.baseline must be 'linear' or 'value', got {self.baseline!r}")
        if self.activation not in ("tanh", "relu"):
            raise ValueError(f"TRPOConfig.activation must be 'tanh' or 'relu', got {self.activation!r}")
        if not self.hidden_sizes or any(int(h) < 1 for h in self.hidden_sizes):
            raise ValueError(f"hidden_sizes must be a non-empty sequence of ints >= 1, got {self.hidden_sizes!r}")
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))
        if not isinstance(self.env_kwargs, dict):
            raise TypeError(f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}")

    num_updates = PPOConfig.num_updates
    steps_per_update = PPOConfig.steps_per_update
    to_dict = PPOConfig.to_dict
    replace = PPOConfig.replace

    def hparams(self) -> "TRPOHParams":
        """The numeric hyperparameters as float32 scalars (the traced part of the config)."""
        return TRPOHParams(**{f.name: jnp.float32(getattr(self, f.name)) for f in dataclasses.fields(TRPOHParams)})


@struct.dataclass
class TRPOHParams:
    """TRPO's hyperparameters that enter the compiled program as traced float32 values."""

    gamma: Any
    gae_lambda: Any
    max_kl: Any
    ent_coef: Any
    cg_damping: Any
    backtrack_ratio: Any
    baseline_reg: Any
    vf_lr: Any
    reward_scale: Any


# Tuned TRPO defaults per environment (overrides of the TRPOConfig defaults).
TRPO_DEFAULTS: dict[str, dict] = {
    # garage's recipe (normalize, Gaussian MLP (32, 32), linear feature baseline, GAE lambda 1)
    # with discount 0.9: the greedy policy must stop within 0.01 of the origin, and at 0.99 the
    # Monte-Carlo returns over 100 noisy steps drown that signal; 0.9 keeps the same optimal policy
    # (straight to the goal). Smaller batches (1000 steps) give 4x the trust-region steps.
    "PointEnv-v0": dict(total_timesteps=200_000, num_envs=10, num_steps=100, gamma=0.9, max_kl=0.05),
    # A value network and GAE lambda 0.95: with the linear baseline and Monte-Carlo returns over
    # episodes of up to 300 steps, every full-size trust-region step follows mostly noise and the
    # policy collapses onto walls (0 of 4 seeds solved; 4 of 4 with these settings).
    "GridWorld-v0": dict(
        total_timesteps=100_000, num_envs=32, num_steps=32, max_kl=0.02, baseline="value", gae_lambda=0.95,
    ),
    # Self-play; the linear baseline left 2 of 4 seeds in "always RUN"/"always JUMP" (4 of 4 solved
    # with a value network and GAE lambda 0.95).
    "HurdleRace-v0": dict(
        total_timesteps=60_000, num_envs=16, num_steps=32, max_kl=0.02, baseline="value", gae_lambda=0.95,
    ),
    # One-shot (gamma 0), raw advantages as in PPO's entry; rewards in units of 1e6 (the jackpot is
    # 100): the step is scale-free, but conjugate gradient stops at garage's absolute residual
    # tolerance, which gradients of rewards in units of the jackpot (1e8) fall below.
    "Lottery-v0": dict(
        total_timesteps=100_000, num_envs=64, num_steps=16, gamma=0.0, reward_scale=1e-6, normalize_advantages=False,
    ),
    # Self-play of a one-shot zero-sum game: an entropy bonus damps the cycles around the uniform
    # equilibrium, as in PPO's entry.
    "RockPaperScissors-v0": dict(
        total_timesteps=50_000, num_envs=64, num_steps=8, gamma=0.0, normalize_advantages=False, ent_coef=0.2,
    ),
}

# Algorithm name -> its config class; each class's ALGO attribute is its key.
ALGOS: dict[str, type] = {"ppo": PPOConfig, "trpo": TRPOConfig}
# Algorithm name -> its tuned per-environment defaults.
TUNED: dict[str, dict] = {"ppo": DEFAULTS, "trpo": TRPO_DEFAULTS}


def _config_class(algo: str) -> type:
    if algo not in ALGOS:
        raise ValueError(f"unknown algorithm {algo!r}; available: {sorted(ALGOS)}")
    return ALGOS[algo]


def _from_dict(d: dict, cls: type = PPOConfig):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise TypeError(f"unknown {cls.__name__} field(s) {unknown}; valid: {sorted(names)}")
    return cls(**d)


def config_from_dict(d: dict):
    """The config a :meth:`PPOConfig.to_dict`-style dict describes; its ``"algo"`` key (default
    ``"ppo"``, as in run directories written before it existed) picks the config class."""
    d = dict(d)
    return _from_dict(d, _config_class(d.pop("algo", "ppo")))


def get_config(env_id: str | None = None, algo: str = "ppo", **overrides):
    """The config of ``algo`` for ``env_id``: dataclass defaults < ``DEFAULTS[env_id]`` <
    ``overrides``. Environments without an entry in ``DEFAULTS`` get the dataclass defaults.
    """
    cls = _config_class(algo)
    env_id = env_id or overrides.pop("env_id", None) or DEFAULT_ENV
    overrides.pop("env_id", None)
    tuned = TUNED.get(cls.ALGO, {}).get(env_id, {})
    return _from_dict({**tuned, **overrides, "env_id": env_id}, cls)


def load_config_file(path: str) -> dict:
    """Read a JSON object of ``PPOConfig`` fields (e.g. a run's ``config.json``)."""
    with open(path) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"config file {path!r} is not valid JSON: {e}") from e
    if not isinstance(d, dict):
        raise ValueError(f"config file {path!r} must hold a JSON object of PPOConfig fields, got {type(d).__name__}")
    algo = d.get("algo", "ppo")
    if algo not in ALGOS:
        raise ValueError(f"config file {path!r} names unknown algorithm {algo!r}; available: {sorted(ALGOS)}")
    names = {f.name for f in dataclasses.fields(ALGOS[algo])} | {"algo"}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"config file {path!r} has unknown field(s) {unknown}; valid: {sorted(names)}")
    return d
