"""Trained policies as objects: `load_policy(run_dir)` turns a run directory of ``jaxenvs-train``
into a `TrainedPolicy`, a record that acts as ``policy(key, obs) -> action`` for ONE agent's
observation and says what it plays (its search and look-ahead, env id, trainer; the one
``load_policy`` of the package: the command lines use it too).

    from jaxenvs.train import load_policy
    policy = load_policy("runs/TicTacToe-v0-20250101-120000")      # greedy, seed 0 of the run
    action = jax.jit(policy)(key, obs_of_one_agent)                 # int32 scalar
    actions = jax.vmap(policy)(keys, batch_of_observations)         # a batch
    strong = load_policy("runs/ConnectFour-v0-...", search=64)      # + 64 simulations of tree search per move
    plain = load_policy("runs/ConnectFour-v0-...", search=0, lookahead=0)  # the network alone

A run records the search it is played with (its config's ``play_search``: the tuned entry of
ConnectFour-v0 sets it); ``load_policy(run)`` plays with it, ``search=N`` overrides it. With ``search=N`` (two-player games of perfect information: TicTacToe, ConnectFour; needs
``mctx``, ``pip install 'jaxenvs[search]'``) the policy/value network guides N simulations of
Gumbel MuZero tree search with the game's own step as the model (`jaxenvs.games.search`); the
result is jittable and vmappable the same way. A run records the plies of exact look-ahead it
is played with too (``play_lookahead``; ``lookahead=N`` overrides it): the policy (or its search)
then chooses among the moves whose every line of play N plies deep scores best by the game's
rewards alone (`jaxenvs.games.search.lookahead_policy`: it takes the wins and avoids the losses
it sees; jax only).

The policy takes one agent's observation exactly as the environment gives it: for a single-agent
environment its observation, for a multi-agent one the row of one agent (no agent axis; for a
game with legal actions a dict ``{"observation": ..., "action_mask": uint8[n]}``). With a mask
(and the run's ``mask_actions`` on, the default) it acts among the legal actions only: the mode of
`train.masking.MaskedCategorical` over them (``greedy=True``), or a draw from it; a row with no
legal action (a non-mover) gets action 0, which a sequential game ignores. It is jittable,
vmappable and pure (the network parameters are baked in as constants), so it serves as an
opponent in `jaxenvs.games.head_to_head` and in `jaxenvs.wrappers.PlayAgainst`. Opponents by name
(``random``, ``perfect``, ``heuristic``...) are `jaxenvs.games.make_opponent`'s.

A structure mistake (a batch axis, the joint observation of all agents, a missing key) is an
error at trace time naming the expected shapes; a path that is not a run directory is a
`train.checkpoint.CheckpointError` naming the path.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxenvs
from jaxenvs.levels import level_fields
from jaxenvs.prng import key_on_host
from jaxenvs.games import seat_games, seat_stats
from jaxenvs.games import search as game_search
from .checkpoint import check_run_dir, load_run
from .episodes import eval_env

__all__ = ["load_policy", "TrainedPolicy", "make_policy", "network_evaluate", "versus", "run_search", "run_lookahead"]


def _check_one_agent(trainer, obs) -> None:
    """Trace-time check that ``obs`` is ONE agent's observation (the shapes of the observation space)."""
    space = trainer.env.observation_space(trainer.env_params)
    want = jax.eval_shape(space.sample, key_on_host(0))
    want_shapes = jax.tree.map(lambda s: tuple(s.shape), want)
    try:
        got_shapes = jax.tree.map(lambda x: tuple(jnp.shape(x)), obs)
        same = jax.tree.structure(want) == jax.tree.structure(obs) and got_shapes == want_shapes
    except (TypeError, ValueError):
        same, got_shapes = False, type(obs).__name__
    if not same:
        who = "one agent's observation" if trainer.env.multi_agent else "one observation"
        raise ValueError(
            f"the policy of {trainer.config.env_id} takes {who} as the environment gives it, shapes {want_shapes}; "
            f"got {got_shapes} (for a batch, jax.vmap the policy"
            + ("; for the joint observation of all agents, index one agent's row" if trainer.env.multi_agent else "")
            + ")"
        )


def network_evaluate(trainer, params) -> Callable:
    """``evaluate(obs) -> (logits float32[n], value float32[])``: the network of ``params`` (one
    set) on ONE agent's observation, the value in the environment's reward units (the config's
    ``reward_scale`` undone): what tree search (`jaxenvs.games.search`) asks at every node."""
    scale = float(getattr(trainer.config, "reward_scale", 1.0) or 1.0)

    def evaluate(obs):
        out, value = trainer.network.apply(params, trainer.preprocess(obs)[None])
        return out[0], value[0] / scale

    return evaluate


def run_search(config) -> int:
    """The simulations of tree search per move a run plays with by default: its config's
    ``play_search`` (0 for an algorithm or a run without the field)."""
    return int(getattr(config, "play_search", 0) or 0)


def run_lookahead(config) -> int:
    """The plies of exact look-ahead a run plays with by default: its config's ``play_lookahead``
    (0 for an algorithm or a run without the field)."""
    return int(getattr(config, "play_lookahead", 0) or 0)


def _non_negative_int(value, what: str) -> int:
    """``int(value)`` for a non-negative int (NumPy's included, bool not), else ValueError: ``what``
    says what is allowed."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{what}, got {value!r}")
    return int(value)


def _check_lookahead(lookahead) -> int:
    return _non_negative_int(lookahead, "lookahead must be a non-negative int (plies of exact look-ahead; 0 = none)")


def _check_search(search) -> int:
    return _non_negative_int(search, "search must be a non-negative int (simulations per move; 0 = no search)")


def make_policy(trainer, params, greedy: bool = True, search: int = 0, lookahead: int | None = None) -> Callable:
    """``policy(key, obs) -> action`` of one set of network ``params`` (no seed axis) of ``trainer``:
    the mode of the (masked) action distribution when ``greedy``, else a draw with ``key``; with
    ``search > 0``, the action of that many simulations of tree search guided by the network
    (`jaxenvs.games.search.search_policy`; ``greedy=False`` draws the root's Gumbel noise). With
    ``lookahead`` plies of exact look-ahead (None: the run's ``play_lookahead``), that choice is made
    among the moves of the best look-ahead score only (`jaxenvs.games.search.lookahead_policy`).
    ValueError (`jaxenvs.games.search.check_budget`) for a look-ahead deeper than the game lasts, or a
    search or look-ahead whose memory estimate exceeds what this machine has available."""
    search = _check_search(search)
    lookahead = run_lookahead(trainer.config) if lookahead is None else _check_lookahead(lookahead)
    if search or lookahead:
        game_search.check_budget(eval_env(trainer), search, lookahead)  # refused before anything is traced or allocated
    if search:
        act = game_search.search_policy(eval_env(trainer), network_evaluate(trainer, params), search, greedy=greedy)
    else:
        act = trainer.agent_policy(params, greedy)
    if lookahead:
        act = game_search.lookahead_policy(eval_env(trainer), act, lookahead)

    def policy(key, obs):
        _check_one_agent(trainer, obs)
        return act(key, obs)

    return policy


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedPolicy:
    """A run's policy and what it plays (`load_policy`): ``record(key, obs)`` calls ``agent``, the
    one-agent policy (jittable, vmappable; see the module docstring). ``search`` and ``lookahead``
    are the simulations of tree search and plies of exact look-ahead it plays with (resolved: the
    run's own when not given), ``env_id`` the environment it was trained on, ``trainer`` the
    run's trainer; ``run_dir``, ``seed`` and ``greedy`` say which policy of which run it is."""

    agent: Callable
    search: int
    lookahead: int
    env_id: str
    trainer: Any
    run_dir: Path
    seed: int
    greedy: bool

    def __call__(self, key, obs):
        return self.agent(key, obs)

    @property
    def env_kwargs(self) -> dict:
        """The environment's keyword arguments the run was trained with."""
        return dict(self.trainer.config.env_kwargs)

    def make_env(self, level: Any = None, autoreset: bool = False):
        """The run's environment (``jaxenvs.make`` with the run's ``env_kwargs``), playing ``level``
        when given: a level as `jaxenvs.levels` writes it (a JSON file of one level, or a levels file
        holding exactly one; its parsed dict; or params), which becomes the env's ``default_params``.
        Raises `jaxenvs.levels.ParamSpaceError` for a level that does not fit the env's params."""
        env = jaxenvs.make(self.env_id, autoreset=autoreset, **self.env_kwargs)
        if level is None:
            return env
        return jaxenvs.make(self.env_id, autoreset=autoreset, **self.env_kwargs, **level_fields(level, env.default_params))

    def play_level(self, level: Any, key=None, max_steps: int | None = None) -> dict:
        """One episode of this policy on ``level`` (see `make_env`): ``{"return", "length",
        "terminated"}``, cut after the spec's time limit (or ``max_steps``, default 1000, without one)."""
        env = self.make_env(level)
        horizon = max_steps or env.spec.max_episode_steps or 1000
        key = jax.random.key(self.seed) if key is None else key

        @jax.jit
        def run(key):
            k_reset, k_run = jax.random.split(key)
            obs, state = env.reset(k_reset)

            def step(carry, k):
                obs, state, ret, length, alive, term = carry
                k_act, k_env = jax.random.split(k)
                action = self.agent(k_act, obs)
                obs, state, reward, terminated, truncated, _ = env.step(k_env, state, action)
                ret = ret + jnp.where(alive, reward, 0.0)
                length = length + alive.astype(jnp.int32)
                term = term | (alive & terminated)
                return (obs, state, ret, length, alive & ~(terminated | truncated), term), None

            init = (obs, state, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32), jnp.ones((), bool), jnp.zeros((), bool))
            (_, _, ret, length, _, term), _ = jax.lax.scan(step, init, jax.random.split(k_run, horizon))
            return ret, length, term

        ret, length, term = jax.device_get(run(key))
        return {"return": float(ret), "length": int(length), "terminated": bool(term)}



def load_policy(run_dir: str | os.PathLike, greedy: bool = True, seed: int = 0, search: int | None = None,
                lookahead: int | None = None) -> TrainedPolicy:
    """The trained policy of a run directory as a `TrainedPolicy`, ``policy(key, obs) -> action`` for ONE agent's
    observation as the environment gives it (see the module docstring): jittable, vmappable,
    mask-aware; greedy (the most probable legal action; ``key`` unused) or, with
    ``greedy=False``, sampled.

    ``seed`` picks one of the run's seeds (``--seeds N`` trains N); ``search=N`` plays the action
    of N simulations of tree search guided by the network (module docstring); ``search=None`` (the
    default) takes the run's own ``play_search`` (its config: the search its tuned entry documents,
    e.g. ConnectFour-v0's; 0 for runs without one), ``search=0`` the network alone; ``lookahead``
    likewise the plies of exact look-ahead (None: the run's ``play_lookahead``; 0: none). The record
    holds ``env_id``, ``env_kwargs``, ``run_dir``, ``seed``, ``greedy``, ``search``, ``lookahead`` and
    ``trainer``. Raises `train.checkpoint.CheckpointError` (a ValueError) naming the
    path when ``run_dir`` does not exist, is not a run directory (no ``config.json`` /
    ``checkpoint.msgpack``) or holds an unreadable checkpoint; ValueError for a ``seed`` that is
    not an int or that the run does not have, a ``greedy`` that is not a bool, a ``search`` that is
    not a non-negative int or a game search cannot play, a ``lookahead`` likewise, and for a
    budget the game or this machine cannot hold (`jaxenvs.games.search.check_budget`: a look-ahead
    deeper than the game lasts, more simulations than allowed, more memory than available).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an int (the index of one of the run's seeds), got {seed!r}")
    if not isinstance(greedy, (bool, np.bool_)):
        raise ValueError(f"greedy must be True (the most probable legal action) or False (sampled), got {greedy!r}")
    search = None if search is None else _check_search(search)  # before the run is loaded
    lookahead = None if lookahead is None else _check_lookahead(lookahead)
    run_dir = check_run_dir(run_dir)
    trainer, runner, meta = load_run(run_dir)
    search = run_search(trainer.config) if search is None else search
    lookahead = run_lookahead(trainer.config) if lookahead is None else lookahead
    num_seeds = meta["run"].num_seeds
    if not 0 <= int(seed) < num_seeds:
        raise ValueError(f"seed {seed}: the run in {str(run_dir)!r} has {num_seeds} seed(s), 0 to {num_seeds - 1}")
    params = jax.tree.map(lambda x: x[int(seed)], runner.params)
    agent = make_policy(trainer, params, bool(greedy), search, lookahead)
    return TrainedPolicy(agent, search, lookahead, trainer.config.env_id, trainer, Path(run_dir), int(seed),
                         bool(greedy))


# ---- head-to-head of a trainer's params ---------------------------------------------------------

_VERSUS: dict = {}


def _versus_program(trainer, opponent, num_games: int, max_plies: int, greedy: bool, search: int = 0,
                    lookahead: int | None = None) -> Callable:
    """Jitted ``(params, key) -> (result with the policy in seat 0, result in seat 1)`` (`train.matches.play`
    results): params are an argument, so new params (after every chunk of training, or another
    seed) compile nothing again."""
    # keyed by the config, not the trainer object: a run loaded again (another trainer of the same
    # config computes the same) reuses the compiled program
    config = json.dumps(trainer.config.to_dict(), sort_keys=True, default=str)
    cache_key = (type(trainer).__qualname__, config, opponent, num_games, max_plies, greedy, search, lookahead)
    if cache_key not in _VERSUS:
        env = eval_env(trainer)

        def run(params, key):
            return seat_games(env, make_policy(trainer, params, greedy, search, lookahead), opponent, key, num_games,
                              None, max_plies)

        _VERSUS[cache_key] = (trainer, jax.jit(run))
    return _VERSUS[cache_key][1]


def versus(trainer, params, opponent: Callable, key, num_games: int = 1000, greedy: bool = True,
           max_plies: int = 1000, search: int = 0, lookahead: int | None = None) -> dict:
    """The policy of ``params`` (one set, no seed axis; with ``search`` simulations of tree search
    per move when > 0, and ``lookahead`` plies of exact look-ahead: None, the run's
    ``play_lookahead``; `make_policy`) against ``opponent`` (a ``policy(key, obs)``) on the trainer's two-player
    game, ``num_games`` games in each seat: ``{"seat0": stats, "seat1": stats}`` as
    `jaxenvs.games.head_to_head` reports them (the policy is A)."""
    lookahead = None if lookahead is None else _check_lookahead(lookahead)
    program = _versus_program(trainer, opponent, int(num_games), int(max_plies), greedy, _check_search(search),
                              lookahead)
    first, second = jax.device_get(program(params, key))
    game = trainer.config.env_id
    return {"seat0": seat_stats(first, 0, game, max_plies), "seat1": seat_stats(second, 1, game, max_plies)}
