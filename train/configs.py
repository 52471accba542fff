"""The algorithms' configs: a base config with the fields every on-policy algorithm shares, one
subclass per algorithm, the run settings, and ONE table (`ALGORITHMS`) from an algorithm's name
to its config class and trainer.

A config holds two kinds of values:

* static ones that fix array shapes or the program's structure (``num_envs``, ``num_steps``,
  ``hidden_sizes``, ...): changing them compiles a new program;
* numeric hyperparameters (``lr``, ``gamma``, ...) that travel into the compiled program as traced
  values (the algorithm's ``HPARAMS`` struct), so one compiled ``train`` serves many values and
  ``jax.vmap`` over them works (a learning-rate sweep is one call).

Each field is declared with `train.fields.field`: its default, its rule (checked when a config is
built) and its help text (``jaxenvs-train --help``). Per-environment tuning lives in
`train.tuned` (one entry per environment); `get_config` merges it over the config's defaults and
then over the caller's overrides.

How a config is run (how many seeds, the root seed, the chunks of the command line's run) is no
part of it: `RunSettings` holds those, the same for every algorithm, and a run directory's
``config.json`` records them as a ``"run"`` object beside the config's fields (`run_record`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from typing import Any, ClassVar

import numpy as np
from flax import struct

from . import tuned
from .curricula import CURRICULA, PRIORITIZATIONS, SCORES
from .fields import INT32_MAX, Bool, Choice, Float, Int, Mapping, Sizes, Str, field, retuned, validate_fields

__all__ = [
    "TrainConfig", "PPOConfig", "HParams", "TRPOConfig", "TRPOHParams", "hparams_class", "Algorithm", "ALGORITHMS", "DEFAULT_ENV", "get_config", "config_from_dict", "load_config_file", "RunSettings", "RUN_KEY",
    "RUN_FIELDS", "run_settings_from_dict", "run_record",
]

DEFAULT_ENV = "GridWorld-v0"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The fields, validation and helpers every on-policy algorithm's config shares. A subclass
    names its algorithm (``ALGO``) and adds its own fields; its traced hyperparameters (``HPARAMS``)
    are the fields declared ``traced=True``, gathered by `hparams_class`."""

    ALGO: ClassVar[str] = ""
    HPARAMS: ClassVar[type] = None  # type: ignore[assignment]  # set by hparams_class

    env_id: str = field(DEFAULT_ENV, Str(), "registered id, or module:id to import module first (passed to jaxenvs.make)")
    env_kwargs: dict = field({}, Mapping(), "passed to jaxenvs.make")
    total_timesteps: int = field(100_000, Int(1), "env transitions per seed (an N-agent transition counts once)")
    num_envs: int = field(16, Int(1), "parallel environments per seed")
    num_steps: int = field(32, Int(1), "rollout length per update; batch = num_envs * num_agents * num_steps")
    gamma: float = field(0.99, Float(0, 1), "discount", traced=True)
    gae_lambda: float = field(0.95, Float(0, 1), "GAE's lambda (1: Monte-Carlo returns)", traced=True)
    ent_coef: float = field(0.01, Float(0), "entropy bonus coefficient", traced=True)
    normalize_advantages: bool = field(
        True, Bool(),
        "standardise advantages (PPO: per minibatch; TRPO: over the batch). Off for games whose signal is in the "
        "advantages' scale (rare large rewards, near-equilibrium self-play), where it amplifies noise",
    )
    reward_scale: float = field(
        1.0, Float(0, lo_open=True),
        "rewards are multiplied by this before learning (GAE, value targets); logged returns stay in the "
        "environment's units (for rewards spanning many orders of magnitude: Lottery pays up to 1e8)",
        traced=True,
    )
    hidden_sizes: tuple = field((64, 64), Sizes(), "MLP layer widths (actor and critic have separate trunks)")
    activation: str = field("tanh", Choice(("tanh", "relu")), "hidden-layer activation")
    curriculum: str = field(
        "none", Choice(CURRICULA),
        "which level each env plays (train.curricula): none (the env's default params; the plain program), dr (a fresh "
        "level from the env's param space at every reset), plr (prioritised level replay from a scored buffer), accel "
        "(plr whose replayed levels are then mutated and scored); needs a single-agent env with a param space",
    )
    plr_buffer_size: int = field(256, Int(1, 1 << 16), "plr/accel: levels the replay buffer holds")
    plr_replay_prob: float = field(0.8, Float(0, 1), "plr/accel: probability that an update replays buffer levels (once the buffer is filled to plr_min_fill)")
    plr_min_fill: float = field(0.5, Float(0, 1), "plr/accel: fraction of the buffer that must be filled before any replay")
    plr_score: str = field(
        "pvl", Choice(tuple(SCORES)),
        "plr/accel: a level's score: " + "; ".join(f"{name} ({meaning})" for name, meaning in SCORES.items()),
    )
    plr_prioritization: str = field("rank", Choice(PRIORITIZATIONS), "plr/accel: replay weights by score rank, or uniform over the plr_topk best")
    plr_temperature: float = field(0.3, Float(0, lo_open=True), "plr/accel: rank prioritisation's temperature (weights (1/rank)**(1/T))")
    plr_topk: int = field(16, Int(1, 1 << 16), "plr/accel with plr_prioritization topk: how many best-scored levels are replayed")
    plr_staleness: float = field(0.3, Float(0, 1), "plr/accel: weight of staleness (updates since a level was last played) in the replay distribution")

    def __post_init__(self):
        self.validate()
        object.__setattr__(self, "hidden_sizes", tuple(int(h) for h in self.hidden_sizes))

    def validate(self) -> None:
        """Check every field against its rule; raises ValueError/TypeError naming the field, the
        value and what is allowed."""
        validate_fields(self)
        if self.num_envs * self.num_steps > INT32_MAX:
            raise ValueError(
                f"{type(self).__name__}: num_envs * num_steps = {self.num_envs * self.num_steps:,} env steps per "
                f"update; at most {INT32_MAX:,} are allowed"
            )

    @property
    def num_updates(self) -> int:
        """Updates per seed: ``ceil(total_timesteps / (num_envs * num_steps))``."""
        return -(-self.total_timesteps // (self.num_envs * self.num_steps))

    @property
    def steps_per_update(self) -> int:
        """Env transitions one update collects for one seed."""
        return self.num_envs * self.num_steps

    def hparams(self):
        """The traced fields (``field(..., traced=True)``) as float32 scalars, in ``HPARAMS`` (the
        struct `hparams_class` makes of them): the traced part of the config. NumPy scalars (a
        compiled program takes them as float32 arrays): ``jnp.float32`` would compile a conversion
        program the first time it runs in a process."""
        return self.HPARAMS(**{f.name: np.float32(getattr(self, f.name)) for f in dataclasses.fields(self.HPARAMS)})

    def replace(self, **kwargs):
        """A copy with ``kwargs`` changed, validated like a new config."""
        d = self.to_dict()
        d.pop("algo")
        return _from_dict({**d, **kwargs}, type(self))

    def to_dict(self) -> dict:
        """The fields as JSON-ready values, with ``"algo"`` naming the config's algorithm."""
        d = dataclasses.asdict(self)
        d["hidden_sizes"] = list(self.hidden_sizes)
        return {"algo": self.ALGO, **d}


@dataclasses.dataclass(frozen=True)
class PPOConfig(TrainConfig):
    """Proximal Policy Optimization (`train.ppo`)."""

    ALGO: ClassVar[str] = "ppo"  # the name --algo and config.json's "algo" use

    update_epochs: int = field(4, Int(1, 10_000), "passes over the batch per update")
    num_minibatches: int = field(4, Int(1), "minibatches per pass")
    lr: float = field(3e-4, Float(0, lo_open=True), "Adam step size (before annealing)", traced=True)
    anneal_lr: bool = field(True, Bool(), "linear decay of the step size to 0 over the run's updates")
    clip_eps: float = field(0.2, Float(0, lo_open=True), "policy-ratio clip (the value loss is not clipped)", traced=True)
    vf_coef: float = field(0.5, Float(0), "value-loss coefficient", traced=True)
    max_grad_norm: float = field(0.5, Float(0, lo_open=True), "global-norm gradient clip", traced=True)
    mask_actions: bool = field(
        True, Bool(),
        "turn-based games (observations with an action_mask): the policy samples legal actions only; off for "
        "ablations (a policy over all actions; who acts still comes from the mask)",
    )
    match_games: int = field(
        64, Int(0, 1 << 16),
        "turn-based games: games per seat of the greedy policy against random-legal play in every update "
        "(win/draw/loss per seat in the metrics; 0: none)",
    )
    torso: str = field(
        "mlp", Choice(("mlp", "board")),
        "the network's trunks: 'mlp' (hidden_sizes), or 'board' for board games: 3x3 convolutions over the board planes "
        "of the observation, then a dense layer of hidden_sizes[0] units and the MLP of the rest (train.networks.BoardTorso)",
    )
    play_search: int = field(
        0, Int(0, 1 << 14),
        "two-player games of perfect information (TicTacToe, ConnectFour): simulations of tree search per move the "
        "trained policy plays with by default (load_policy(run), jaxenvs play RUN; the final evaluation reports "
        "its strength with and without it); 0: the network's greedy move. Not used in training",
    )
    play_lookahead: int = field(
        0, Int(0, 6),
        "two-player games of perfect information (TicTacToe, ConnectFour): plies of exact look-ahead the trained "
        "policy plays with by default (load_policy(run), jaxenvs play RUN, the evaluation): every line of play that "
        "deep, scored by the game's rewards alone; the policy (or its search) chooses among the moves of the best "
        "score only, so it takes the wins and avoids the losses it sees (jaxenvs.games.search.lookahead_policy); "
        "0: none. Not used in training",
    )
    random_opponents: float = field(
        0.0, Float(0, 1),
        "turn-based games: the fraction of the envs (rounded) in which one seat, alternating between envs, is "
        "played by random-legal moves instead of the policy; those moves are not trained on (0: pure self-play; "
        "1: every env, no self-play)",
    )
    training_opponents: str = field(
        "random", Str(),
        "turn-based games: who plays the opponent seat of the random_opponents envs: named opponents of the game, "
        "comma-separated, dealt to those envs in turn (e.g. 'random,perfect'; jaxenvs describe ID lists them)",
    )


def hparams_class(config: type, name: str, doc: str) -> type:
    """The ``struct.dataclass`` of ``config``'s traced fields (``field(..., traced=True)``), set as
    its ``HPARAMS``: the hyperparameters that enter the compiled program as float32 values, so
    ``jax.vmap(train)(keys, hparams)`` with every leaf of shape ``[n]`` trains ``n`` runs with
    different values in one program (see `train.base.stack_hparams`)."""
    names = [f.name for f in dataclasses.fields(config) if f.metadata.get("traced")]
    body = {"__annotations__": dict.fromkeys(names, Any), "__doc__": doc, "__module__": __name__, "__qualname__": name}
    config.HPARAMS = struct.dataclass(type(name, (), body))
    return config.HPARAMS


HParams = hparams_class(PPOConfig, "HParams", "PPO's hyperparameters that enter the compiled program as traced float32 values.")


@dataclasses.dataclass(frozen=True)
class TRPOConfig(TrainConfig):
    """Trust Region Policy Optimization (Schulman et al. 2015) as garage runs it (`train.trpo`).

    garage's defaults (``garage.tf.algos.TRPO``/``NPO`` and its ``ConjugateGradientOptimizer``,
    ``PearlmutterHvp``, and ``LinearFeatureBaseline``), kept here: ``discount=0.99``,
    ``max_kl_step=0.01``, ``policy_ent_coeff=0`` (``ent_coef``), ``cg_iters=10``,
    ``reg_coeff=1e-5`` (the damping added to the Fisher-vector product), ``backtrack_ratio=0.8``,
    ``max_backtracks=15``, ``center_adv=True`` (``normalize_advantages``), ``gae_lambda=1`` (NPO's
    default, which garage's TRPO PointEnv example keeps), no entropy term, the baseline refit by
    ridge least squares with ``reg_coeff=1e-5`` and ``GaussianMLPPolicy(hidden_sizes=(32, 32),
    init_std=1.0)`` with tanh hidden layers (``log_std_init=0``). garage's tutorial trains PointEnv
    with ``normalize(env)``, the linear baseline and ``batch_size=4000`` per iteration.
    """

    ALGO: ClassVar[str] = "trpo"

    total_timesteps: int = retuned(TrainConfig, "total_timesteps", 400_000)
    num_envs: int = retuned(TrainConfig, "num_envs", 40)
    num_steps: int = retuned(TrainConfig, "num_steps", 100)  # garage's tutorial: 4000 steps per iteration
    gae_lambda: float = retuned(TrainConfig, "gae_lambda", 1.0)
    ent_coef: float = retuned(TrainConfig, "ent_coef", 0.0)  # garage's policy_ent_coeff
    hidden_sizes: tuple = retuned(TrainConfig, "hidden_sizes", (32, 32))

    max_kl: float = field(0.01, Float(0, lo_open=True), "trust region: mean KL(old || new) over the batch after a step", traced=True)
    cg_iters: int = field(10, Int(1, 10_000), "conjugate-gradient iterations for F^-1 g")
    cg_damping: float = field(1e-5, Float(0, lo_open=True), "added to the Fisher-vector product (garage's reg_coeff)", traced=True)
    backtrack_ratio: float = field(0.8, Float(0, 1, lo_open=True, hi_open=True), "line search: step fractions 1, r, r^2, ...", traced=True)
    max_backtracks: int = field(15, Int(1, 10_000), "candidate steps tried before the update is rejected")
    baseline: str = field("linear", Choice(("linear", "value")),
                          "\"linear\" (garage's LinearFeatureBaseline) or \"value\" (a critic MLP)")
    baseline_reg: float = field(1e-5, Float(0, lo_open=True), "linear baseline: ridge coefficient (x10, up to 4 times, if ill-posed)", traced=True)
    vf_lr: float = field(1e-3, Float(0, lo_open=True), "value baseline: Adam step size", traced=True)
    vf_epochs: int = field(5, Int(1, 10_000), "value baseline: passes over the batch per update")
    vf_minibatches: int = field(4, Int(1), "value baseline: minibatches per pass")
    normalize_env: bool = field(True, Bool(), "wrap in jaxenvs.wrappers.normalize (actions from [-1, 1])")
    normalize_reward: bool = field(False, Bool(), "normalize(..., normalize_reward=True)")
    log_std_init: float = field(0.0, Float(-20, 20), "Gaussian policies: initial log standard deviation (std 1)")


TRPOHParams = hparams_class(TRPOConfig, "TRPOHParams", "TRPO's hyperparameters that enter the compiled program as traced float32 values.")


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """An entry of `ALGORITHMS`: the config class and where its trainer class lives
    (``"module:Class"`` inside ``jaxenvs.train``, imported on first use, so reading, checking and
    printing configs imports no training code)."""

    config: type
    trainer_path: str

    @property
    def trainer(self) -> type:
        module, name = self.trainer_path.split(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)


# THE table of algorithms: name (--algo, config.json's "algo", the config class's ALGO) -> entry.
ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(PPOConfig, "ppo:PPOTrainer"),
    "trpo": Algorithm(TRPOConfig, "trpo:TRPOTrainer"),
}


# ---------------------------------------------------------------------------------------------
# Run settings: how many copies of a config to train, from which seed, in how many calls. They
# shape how a config is run, not what it learns, so they are kept apart from every algorithm's
# config; a run directory's config.json records them as its "run" object.


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """How a config is run (by ``jaxenvs-train`` and the helpers that load its run directories):
    the same for every algorithm, and no part of the compiled update. ``config.json`` stores them
    as its ``"run"`` object (see `run_record`)."""

    num_seeds: int = field(1, Int(1, 1 << 16), "independent runs vmapped in one program")
    seed: int = field(0, Int(0, 2**63 - 1), "root seed; seed i of a run starts as a run of one seed with root seed seed + i")
    num_chunks: int = field(20, Int(1), "jitted calls the run is split into (progress printed between them)")

    def __post_init__(self):
        validate_fields(self)
        if self.seed + self.num_seeds - 1 > 2**63 - 1:  # seed i of the run is root seed seed + i
            raise ValueError(f"RunSettings: seeds {self.seed} .. {self.seed + self.num_seeds - 1} pass 2**63 - 1; "
                             f"use a seed of at most {2**63 - self.num_seeds}")

    def replace(self, **kwargs) -> "RunSettings":
        """A copy with ``kwargs`` changed, validated like new settings."""
        return run_settings_from_dict({RUN_KEY: {**self.to_dict(), **kwargs}})

    def to_dict(self) -> dict:
        """The settings as JSON-ready values (config.json's ``"run"`` object)."""
        return dataclasses.asdict(self)


RUN_KEY = "run"  # the key of the run settings' object in config.json
RUN_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSettings))


def _config_class(algo: str) -> type:
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; available: {sorted(ALGORITHMS)}")
    return ALGORITHMS[algo].config


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


def config_from_dict(d: dict):
    """The algorithm config a run's ``config.json`` (`run_record`) or a ``to_dict()``-style dict
    describes; its ``"algo"`` key (default ``"ppo"``, as in run directories written before it
    existed) picks the config class. The run settings in it (its ``"run"`` object) are
    `run_settings_from_dict`'s to read, and are left out here."""
    d = dict(d)
    d.pop(RUN_KEY, None)
    return _from_dict(d, _config_class(d.pop("algo", "ppo")))


def run_settings_from_dict(d: dict) -> RunSettings:
    """The run settings a run's ``config.json`` (`run_record`) describes: its ``"run"`` object;
    settings it does not give take `RunSettings`' defaults."""
    return RunSettings(**_run_object(d.get(RUN_KEY, {})))


def run_record(config, settings: RunSettings) -> dict:
    """What a run directory's ``config.json`` holds: ``config.to_dict()`` (``"algo"`` and the
    algorithm's fields) with the run settings as its ``"run"`` object, e.g.
    ``{"algo": "ppo", "env_id": "GridWorld-v0", ..., "run": {"num_seeds": 1, "seed": 0, "num_chunks": 20}}``."""
    return {**config.to_dict(), RUN_KEY: settings.to_dict()}


def get_config(env_id: str | None = None, algo: str = "ppo", **overrides):
    """The config of ``algo`` for ``env_id``: the config class's defaults < the environment's tuned
    values (`train.tuned`) < ``overrides``. Environments without tuned values get the defaults."""
    cls = _config_class(algo)
    env_id = env_id or overrides.pop("env_id", None) or DEFAULT_ENV
    overrides.pop("env_id", None)
    return _from_dict({**tuned.entry(env_id).training.get(cls.ALGO, {}), **overrides, "env_id": env_id}, cls)


def load_config_file(path: str, algo: str | None = None) -> dict:
    """Read a JSON object of config fields (e.g. a run's ``config.json``), checked against the
    fields of its algorithm: the file's ``"algo"``, else ``algo`` (e.g. ``--algo``), else PPO.
    A file whose ``"algo"`` differs from a given ``algo`` is refused. Run settings come as a
    ``"run"`` object (config.json's layout, `run_record`)."""
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
    if algo not in ALGORITHMS:
        raise ValueError(f"config file {path!r} names unknown algorithm {algo!r}; available: {sorted(ALGORITHMS)}")
    names = {f.name for f in dataclasses.fields(ALGORITHMS[algo].config)} | {"algo", RUN_KEY}
    unknown = sorted(set(d) - names)
    if unknown:
        moved = [k for k in unknown if k in RUN_FIELDS]
        note = f"; run settings ({', '.join(moved)}) go in its \"{RUN_KEY}\" object" if moved else ""
        raise ValueError(f"config file {path!r} has unknown field(s) {unknown}; valid: {sorted(names)}{note}")
    try:
        _run_object(d.get(RUN_KEY, {}))
    except (TypeError, ValueError) as e:
        raise ValueError(f"config file {path!r}: {e}") from None
    return d
