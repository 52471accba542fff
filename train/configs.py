"""PPO configuration: every field with its meaning, and the tuned defaults per environment.

``PPOConfig`` holds two kinds of values:

* static ones that fix array shapes or the program's structure (``num_envs``, ``num_steps``,
  ``hidden_sizes``, ...): changing them compiles a new program;
* numeric hyperparameters (``lr``, ``gamma``, ``clip_eps``, ...) that travel into the compiled
  program as traced values through :class:`HParams`, so one compiled ``train`` serves many values
  and ``jax.vmap`` over them works (a learning-rate sweep is one call).

``DEFAULTS`` is the single place where per-environment tuning lives; :func:`get_config` merges
it over the ``PPOConfig`` defaults and then over the caller's overrides.

How a config is run (how many seeds, the root seed, the chunks of the command line's run) is no
part of it: :class:`RunSettings` holds those, the same for every algorithm, and a run directory's
``config.json`` records them as a ``"run"`` object beside the config's fields (:func:`run_record`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import struct

__all__ = [
    "PPOConfig", "HParams", "TRPOConfig", "TRPOHParams", "TRPO_DEFAULTS", "TUNED", "validate_fields", "ALGOS", "DEFAULTS",
    "DEFAULT_ENV", "get_config", "config_from_dict", "load_config_file", "RunSettings", "RUN_KEY", "RUN_FIELDS",
    "nest_run_settings", "run_settings_from_dict", "run_record",
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

    def __post_init__(self):
        self.validate()
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))

    def validate(self) -> None:
        """Check every field against ``type(self).FIELD_RULES`` (see :func:`validate_fields`);
        raises ValueError/TypeError naming the field, the value and what is allowed."""
        validate_fields(self, type(self).FIELD_RULES)
        if self.num_envs * self.num_steps > _INT32_MAX:
            raise ValueError(
                f"{type(self).__name__}: num_envs * num_steps = {self.num_envs * self.num_steps:,} env steps per "
                f"update; at most {_INT32_MAX:,} are allowed"
            )

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
        """A copy with ``kwargs`` changed, validated like a new config."""
        d = self.to_dict()
        d.pop("algo")
        return _from_dict({**d, **kwargs}, type(self))

    def to_dict(self) -> dict:
        """The fields as JSON-ready values, with ``"algo"`` naming the config's algorithm."""
        d = dataclasses.asdict(self)
        d["hidden_sizes"] = list(self.hidden_sizes)
        return {"algo": self.ALGO, **d}


# ---------------------------------------------------------------------------------------------
# Field validation: one rule per field, checked on the host when a config is built (never inside
# the compiled program). A config class lists its rules in FIELD_RULES; a new algorithm's class
# reuses PPOConfig's with ``FIELD_RULES = {**PPOConfig.FIELD_RULES, "new_field": Float(lo=0)}``.

_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Int:
    """An int (not a bool) in ``[lo, hi]``."""

    lo: int | None = None
    hi: int | None = _INT32_MAX

    def check(self, v) -> str | None:
        bad = isinstance(v, bool) or not isinstance(v, numbers.Integral)
        if bad or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            bounds = ([f">= {self.lo}"] if self.lo is not None else []) + ([f"<= {self.hi}"] if self.hi is not None else [])
            return "an int " + " and ".join(bounds)
        return None


@dataclasses.dataclass(frozen=True)
class Float:
    """A finite real number (not a bool, not a string) with optional bounds; ``lo_open``/``hi_open``
    exclude the bound itself."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def allowed(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {self.hi:g}")
        return "a finite number" + (" " + " and ".join(parts) if parts else "")

    def check(self, v) -> str | None:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            return self.allowed()
        if self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo):
            return self.allowed()
        if self.hi is not None and (v >= self.hi if self.hi_open else v > self.hi):
            return self.allowed()
        return None


@dataclasses.dataclass(frozen=True)
class Bool:
    def check(self, v) -> str | None:
        return None if isinstance(v, (bool, np.bool_)) else "true or false"


@dataclasses.dataclass(frozen=True)
class Choice:
    options: tuple

    def check(self, v) -> str | None:
        return None if isinstance(v, str) and v in self.options else "one of " + ", ".join(map(repr, self.options))


@dataclasses.dataclass(frozen=True)
class Str:
    def check(self, v) -> str | None:
        return None if isinstance(v, str) and v else "a non-empty string"


@dataclasses.dataclass(frozen=True)
class Mapping:
    def check(self, v) -> str | None:
        return None if isinstance(v, dict) and all(isinstance(k, str) for k in v) else "a dict with string keys"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """A non-empty list/tuple of ints in ``[1, hi]`` (layer widths)."""

    hi: int = 1 << 16

    def check(self, v) -> str | None:
        ok = isinstance(v, (list, tuple)) and len(v) > 0 and all(Int(1, self.hi).check(h) is None for h in v)
        return None if ok else f"a non-empty list of integers in [1, {self.hi}]"


def validate_fields(config, rules: dict) -> None:
    """Check each field of ``config`` named in ``rules`` (field -> rule with ``check(value)``
    returning None or a description of what is allowed). Every field of the dataclass must have
    a rule, so a new field cannot go unchecked. Raises ValueError (TypeError for a value of the
    wrong type) naming the class, the field, the value and what is allowed."""
    cls = type(config).__name__
    missing = sorted(f.name for f in dataclasses.fields(config) if f.name not in rules)
    if missing:
        raise TypeError(f"{cls}.FIELD_RULES has no rule for field(s) {missing}")
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        allowed = rules[f.name].check(v)
        if allowed is not None:
            wrong_type = isinstance(v, (str, bytes, list, tuple, dict, type(None))) and not isinstance(
                rules[f.name], (Str, Choice, Sizes, Mapping)
            )
            err = TypeError if wrong_type else ValueError
            raise err(f"{cls}.{f.name} must be {allowed}; got {v!r} ({type(v).__name__})")


PPOConfig.FIELD_RULES = {
    "env_id": Str(),
    "env_kwargs": Mapping(),
    "total_timesteps": Int(1),
    "num_envs": Int(1),
    "num_steps": Int(1),
    "update_epochs": Int(1, 10_000),
    "num_minibatches": Int(1),
    "lr": Float(0, lo_open=True),
    "anneal_lr": Bool(),
    "gamma": Float(0, 1),
    "gae_lambda": Float(0, 1),
    "clip_eps": Float(0, lo_open=True),
    "ent_coef": Float(0),
    "vf_coef": Float(0),
    "max_grad_norm": Float(0, lo_open=True),
    "normalize_advantages": Bool(),
    "reward_scale": Float(0, lo_open=True),
    "hidden_sizes": Sizes(),
    "activation": Choice(("tanh", "relu")),
}


# ---------------------------------------------------------------------------------------------
# Run settings: how many copies of a config to train, from which seed, in how many calls. They
# shape how a config is run, not what it learns, so they are kept apart from every algorithm's
# config; a run directory's config.json records them as its "run" object.


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How a config is run (by ``python -m train`` and the helpers that load its run directories):
    the same for every algorithm, and no part of the compiled update. ``config.json`` stores them
    as its ``"run"`` object (see :func:`run_record`)."""

    num_seeds: int = 1  # independent runs vmapped in one program (CLI --seeds)
    seed: int = 0  # root seed; seed i of a run uses the i-th split of jax.random.key(seed)
    num_chunks: int = 20  # CLI: jitted calls the run is split into (progress printed between them)

    def __post_init__(self):
        validate_fields(self, type(self).FIELD_RULES)

    def replace(self, **kwargs) -> "RunSettings":
        """A copy with ``kwargs`` changed, validated like new settings."""
        return run_settings_from_dict({RUN_KEY: {**self.to_dict(), **kwargs}})

    def to_dict(self) -> dict:
        """The settings as JSON-ready values (config.json's ``"run"`` object)."""
        return dataclasses.asdict(self)


RunSettings.FIELD_RULES = {
    "num_seeds": Int(1, 1 << 16),
    "seed": Int(0, 2**63 - 1),
    "num_chunks": Int(1),
}
RUN_KEY = "run"  # the key of the run settings' object in config.json
RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings))


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
    # gymnax's classic-control ids (pip install "jaxenvs[gymnax]"): bars are the specs'
    # reward_threshold (Gymnasium's): CartPole mean return >= 475, Acrobot > -100.
    # 4 of 4 seeds at 500 (greedy, 1000 episodes) with these; at 500k steps 3 of 4
    "gymnax/CartPole-v1": dict(total_timesteps=1_000_000, num_envs=16, num_steps=128, lr=2.5e-4),
    # 4 of 4 seeds between -84.1 and -82.1 (greedy, 1000 episodes); at 500k steps with 16 x 128
    # and no entropy bonus only 1 of 4 learned
    "gymnax/Acrobot-v1": dict(total_timesteps=1_000_000, num_envs=32, num_steps=64, lr=1e-3, ent_coef=0.01),
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

    __post_init__ = PPOConfig.__post_init__
    validate = PPOConfig.validate

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


TRPOConfig.FIELD_RULES = {
    **{k: PPOConfig.FIELD_RULES[k] for k in (
        "env_id", "env_kwargs", "total_timesteps", "num_envs", "num_steps", "gamma", "gae_lambda",
        "normalize_advantages", "reward_scale", "hidden_sizes", "activation",
    )},
    "max_kl": Float(0, lo_open=True),
    "cg_iters": Int(1, 10_000),
    "cg_damping": Float(0, lo_open=True),
    "backtrack_ratio": Float(0, 1, lo_open=True, hi_open=True),
    "max_backtracks": Int(1, 10_000),
    "baseline": Choice(("linear", "value")),
    "baseline_reg": Float(0, lo_open=True),
    "vf_lr": Float(0, lo_open=True),
    "vf_epochs": Int(1, 10_000),
    "vf_minibatches": Int(1),
    "normalize_env": Bool(),
    "normalize_reward": Bool(),
    "log_std_init": Float(-20, 20),
    "ent_coef": Float(0),
}


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
    # Self-play of a one-shot zero-sum game: an entropy bonus (whose regularised equilibrium is
    # still uniform) and a small trust region damp the cycles around the uniform equilibrium
    # (ent_coef 0.2 with max_kl 0.01 left 4 of 4 seeds at exploitability 0.10-0.13).
    "RockPaperScissors-v0": dict(
        total_timesteps=50_000, num_envs=64, num_steps=8, gamma=0.0, normalize_advantages=False, ent_coef=0.5,
        max_kl=0.003,
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
        moved = [k for k in unknown if k in RUN_FIELDS]
        note = (
            f"; {', '.join(moved)} {'is a run setting' if len(moved) == 1 else 'are run settings'}"
            f" (RunSettings, config.json's \"{RUN_KEY}\" object)" if moved else ""
        )
        raise TypeError(f"unknown {cls.__name__} field(s) {unknown}; valid: {sorted(names)}{note}")
    return cls(**d)


def _run_object(run) -> dict:
    """``run`` (a ``"run"`` object) when it is a mapping of known run settings; an error otherwise."""
    if not isinstance(run, dict):
        raise TypeError(f"\"{RUN_KEY}\" must be a JSON object of run settings {list(RUN_FIELDS)}, got {run!r}")
    unknown = sorted(set(run) - set(RUN_FIELDS))
    if unknown:
        raise TypeError(f"unknown run setting(s) {unknown} in \"{RUN_KEY}\"; valid: {sorted(RUN_FIELDS)}")
    return run


def nest_run_settings(d: dict) -> dict:
    """A copy of ``d`` in config.json's layout: run settings found at top level (where config.json
    kept them before its ``"run"`` object existed, and where a hand-written ``--config`` file may
    put them) move into ``"run"``. A setting given in both places with different values is an
    error."""
    out = dict(d)
    top = {k: out.pop(k) for k in RUN_FIELDS if k in out}
    if not top:
        return out
    run = _run_object(out.get(RUN_KEY, {}))
    clash = sorted(k for k in top if k in run and run[k] != top[k])
    if clash:
        detail = "; ".join(f"{k}: {top[k]!r} at top level, {run[k]!r} in \"{RUN_KEY}\"" for k in clash)
        raise ValueError(f"run setting(s) {clash} given twice with different values ({detail}); give each once, in \"{RUN_KEY}\"")
    out[RUN_KEY] = {**run, **top}
    return out


def config_from_dict(d: dict):
    """The algorithm config a run's ``config.json`` (:func:`run_record`) or a
    :meth:`PPOConfig.to_dict`-style dict describes; its ``"algo"`` key (default ``"ppo"``, as in
    run directories written before it existed) picks the config class. The run settings in it
    (its ``"run"`` object, or those at top level in the older layout) are
    :func:`run_settings_from_dict`'s to read, and are left out here."""
    d = nest_run_settings(d)
    d.pop(RUN_KEY, None)
    return _from_dict(d, _config_class(d.pop("algo", "ppo")))


def run_settings_from_dict(d: dict) -> RunSettings:
    """The run settings a run's ``config.json`` (:func:`run_record`) describes: its ``"run"``
    object, or the settings at top level in config.json's older layout (see
    :func:`nest_run_settings`); settings it does not give take :class:`RunSettings`' defaults."""
    return RunSettings(**_run_object(nest_run_settings(d).get(RUN_KEY, {})))


def run_record(config, settings: RunSettings) -> dict:
    """What a run directory's ``config.json`` holds: ``config.to_dict()`` (``"algo"`` and the
    algorithm's fields) with the run settings as its ``"run"`` object, e.g.
    ``{"algo": "ppo", "env_id": "GridWorld-v0", ..., "run": {"num_seeds": 1, "seed": 0, "num_chunks": 20}}``."""
    return {**config.to_dict(), RUN_KEY: settings.to_dict()}


def get_config(env_id: str | None = None, algo: str = "ppo", **overrides):
    """The config of ``algo`` for ``env_id``: dataclass defaults < ``DEFAULTS[env_id]`` <
    ``overrides``. Environments without an entry in ``DEFAULTS`` get the dataclass defaults.
    """
    cls = _config_class(algo)
    env_id = env_id or overrides.pop("env_id", None) or DEFAULT_ENV
    overrides.pop("env_id", None)
    tuned = TUNED.get(cls.ALGO, {}).get(env_id, {})
    return _from_dict({**tuned, **overrides, "env_id": env_id}, cls)


def load_config_file(path: str, algo: str | None = None) -> dict:
    """Read a JSON object of config fields (e.g. a run's ``config.json``), checked against the
    fields of its algorithm: the file's ``"algo"``, else ``algo`` (e.g. ``--algo``), else PPO.
    A file whose ``"algo"`` differs from a given ``algo`` is refused. Run settings may come as a
    ``"run"`` object (config.json's layout, :func:`run_record`) or at top level (its older
    layout); the dict returned has them in ``"run"`` (:func:`nest_run_settings`)."""
    with open(path) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"config file {path!r} is not valid JSON: {e}") from e
    if not isinstance(d, dict):
        raise ValueError(f"config file {path!r} must hold a JSON object of config fields, got {type(d).__name__}")
    if algo is not None and d.get("algo", algo) != algo:
        raise ValueError(f"config file {path!r} is for algorithm {d['algo']!r}, not {algo!r}; drop its \"algo\" or the flag")
    algo = d.get("algo", algo or "ppo")
    if algo not in ALGOS:
        raise ValueError(f"config file {path!r} names unknown algorithm {algo!r}; available: {sorted(ALGOS)}")
    names = {f.name for f in dataclasses.fields(ALGOS[algo])} | {"algo", RUN_KEY} | set(RUN_FIELDS)
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"config file {path!r} has unknown field(s) {unknown}; valid: {sorted(names)}")
    try:
        d = nest_run_settings(d)
        _run_object(d.get(RUN_KEY, {}))
    except (TypeError, ValueError) as e:
        raise ValueError(f"config file {path!r}: {e}") from None
    return d
