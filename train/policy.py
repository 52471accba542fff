"""Trained policies as objects: `load_policy(run_dir)` turns a run directory of ``jaxenvs-train``
into a plain function ``policy(key, obs) -> action`` for ONE agent's observation, and
`make_opponent` names the opponents a two-player evaluation plays against.

    from jaxenvs.train import load_policy
    policy = load_policy("runs/TicTacToe-v0-20250101-120000")      # greedy, seed 0 of the run
    action = jax.jit(policy)(key, obs_of_one_agent)                 # int32 scalar
    actions = jax.vmap(policy)(keys, batch_of_observations)         # a batch

The policy takes one agent's observation exactly as the environment gives it: for a single-agent
environment its observation, for a multi-agent one the row of one agent (no agent axis; for a
game with legal actions a dict ``{"observation": ..., "action_mask": uint8[n]}``). With a mask
(and the run's ``mask_actions`` on, the default) it acts among the legal actions only: the mode of
`train.masking.MaskedCategorical` over them (``greedy=True``), or a draw from it; a row with no
legal action (a non-mover) gets action 0, which a sequential game ignores. It is jittable,
vmappable and pure (the network parameters are baked in as constants), so it serves as an
opponent in `train.matches.head_to_head` and in `jaxenvs.wrappers.PlayAgainst`.

A structure mistake (a batch axis, the joint observation of all agents, a missing key) is an
error at trace time naming the expected shapes; a path that is not a run directory is a
`train.checkpoint.CheckpointError` naming the path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp


__all__ = [
    "load_policy", "make_policy", "make_opponent", "OPPONENT_NAMES", "OpponentError",
    "is_two_player_game",
]


def _check_one_agent(trainer, obs) -> None:
    """Trace-time check that ``obs`` is ONE agent's observation (the shapes of the observation space)."""
    space = trainer.env.observation_space(trainer.env_params)
    want = jax.eval_shape(space.sample, jax.random.key(0))
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


def make_policy(trainer, params, greedy: bool = True) -> Callable:
    """``policy(key, obs) -> action`` of one set of network ``params`` (no seed axis) of ``trainer``:
    the mode of the (masked) action distribution when ``greedy``, else a draw with ``key``."""

    act = trainer.agent_policy(params, greedy)

    def policy(key, obs):
        _check_one_agent(trainer, obs)
        return act(key, obs)

    policy.env_id = trainer.config.env_id
    policy.greedy = greedy
    return policy


def load_policy(run_dir: str | os.PathLike, greedy: bool = True, seed: int = 0) -> Callable:
    """The trained policy of a run directory as ``policy(key, obs) -> action`` for ONE agent's
    observation as the environment gives it (see the module docstring): jittable, vmappable,
    mask-aware; greedy (the most probable legal action; ``key`` unused) or, with
    ``greedy=False``, sampled.

    ``seed`` picks one of the run's seeds (``--seeds N`` trains N). The function carries
    ``env_id``, ``env_kwargs``, ``run_dir``, ``seed``, ``greedy`` and ``trainer`` as attributes.
    Raises `train.checkpoint.CheckpointError` (a ValueError) naming the path when ``run_dir``
    does not exist, is not a run directory (no ``config.json`` / ``checkpoint.msgpack``) or holds
    an unreadable checkpoint, and ValueError for a ``seed`` the run does not have.
    """
    from .checkpoint import check_run_dir, load_run

    run_dir = check_run_dir(run_dir)
    trainer, runner, meta = load_run(run_dir)
    num_seeds = meta["run"].num_seeds
    if not 0 <= int(seed) < num_seeds:
        raise ValueError(f"seed {seed}: the run in {str(run_dir)!r} has {num_seeds} seed(s), 0 to {num_seeds - 1}")
    params = jax.tree.map(lambda x: x[int(seed)], runner.params)
    policy = make_policy(trainer, params, greedy)
    policy.env_kwargs = dict(trainer.config.env_kwargs)
    policy.run_dir = Path(run_dir)
    policy.seed = int(seed)
    policy.trainer = trainer
    return policy


# ---- opponents for two-player games ----------------------------------------------------------

OPPONENT_NAMES = {
    "random": (None, "uniformly random among the legal actions"),
    "perfect": ("TicTacToe-v0", "minimax over all positions, uniform among the optimal moves"),
    "heuristic": ("ConnectFour-v0", "win if possible, else block, else random legal"),
}
"""Opponent names for command lines: ``name -> (the one game it plays, or None for any; what it is)``.
The names of `train.opponents.OPPONENTS` (``tictactoe-perfect``, ``connect-four-heuristic``) are
accepted too."""
_ALIASES = {"tictactoe-perfect": "perfect", "connect-four-heuristic": "heuristic", "random-legal": "random"}


class OpponentError(ValueError):
    """An opponent that does not exist or does not play this game; the message lists what does."""


def is_two_player_game(env) -> bool:
    """Two agents with opposed interests (zero-sum): a game to report win / draw / loss of."""
    traits = getattr(env, "traits", None)
    return getattr(env, "num_agents", 1) == 2 and getattr(traits, "utility", None) == "zero_sum"


def _canonical(env_id: str) -> str:
    import jaxenvs

    try:
        return jaxenvs.spec(env_id).id
    except (KeyError, ValueError, ImportError):
        return env_id.rpartition(":")[2]


def allowed_opponents(env_id: str) -> str:
    """What `make_opponent` accepts for ``env_id``, in words."""
    names = [n for n, (game, _) in OPPONENT_NAMES.items() if game in (None, _canonical(env_id))]
    return ", ".join(names) + ", or a run directory of jaxenvs-train trained on " + _canonical(env_id)


def make_opponent(spec: str | os.PathLike, env) -> tuple[str, Callable]:
    """``(label, policy)`` of the opponent ``spec`` on the two-player game ``env`` (built with
    ``jaxenvs.make``): a name of `OPPONENT_NAMES` (or of `train.opponents.OPPONENTS`), or a run
    directory (its greedy policy, seed 0) trained on the same game. `OpponentError` for a name
    that does not exist or does not play this game (the message lists what does), and for a run of
    another game; `train.checkpoint.CheckpointError` for a directory that is not a run."""
    from . import opponents

    env_id = env.spec.id if getattr(env, "spec", None) is not None else type(env).__name__
    if not is_two_player_game(env):
        raise OpponentError(
            f"opponents are for two-player zero-sum games; {env_id} has {getattr(env, 'num_agents', 1)} agent(s)"
            f" and {getattr(getattr(env, 'traits', None), 'utility', 'no')} utility"
        )
    text = str(spec)
    name = _ALIASES.get(text, text)
    if name in OPPONENT_NAMES:
        game, meaning = OPPONENT_NAMES[name]
        if game is not None and _canonical(env_id) != game:
            raise OpponentError(
                f"opponent {text!r} plays {game} only, not {env_id}; for {env_id} choose {allowed_opponents(env_id)}"
            )
        if name == "random":
            obs = jax.eval_shape(env.reset, jax.random.key(0), env.default_params)[0]
            if isinstance(obs, dict) and "action_mask" in obs:
                return "random (legal)", opponents.random_legal
            space = env.action_space(env.default_params)
            return "random", lambda key, obs: space.sample(key)
        full = "tictactoe-perfect" if name == "perfect" else "connect-four-heuristic"
        return f"{name} ({meaning})", opponents.get_opponent(full)
    looks_like_path = os.sep in text or Path(text).exists() or text.startswith(".")
    if not looks_like_path:
        raise OpponentError(f"unknown opponent {text!r}; for {env_id} choose {allowed_opponents(env_id)}")
    policy = load_policy(text)
    if _canonical(policy.env_id) != _canonical(env_id):
        raise OpponentError(f"the run in {text!r} was trained on {policy.env_id}, not {env_id}")
    return f"run {text}", policy


# ---- head-to-head of a trainer's params ---------------------------------------------------------

_VERSUS: dict = {}


def _versus_program(trainer, opponent, num_games: int, max_plies: int, greedy: bool) -> Callable:
    """Jitted ``(params, key) -> (result with the policy in seat 0, result in seat 1)`` (`train.matches.play`
    results): params are an argument, so new params (after every chunk of training, or another
    seed) compile nothing again."""
    # keyed by the config, not the trainer object: a run loaded again (another trainer of the same
    # config computes the same) reuses the compiled program
    config = json.dumps(trainer.config.to_dict(), sort_keys=True, default=str)
    cache_key = (type(trainer).__qualname__, config, opponent, num_games, max_plies, greedy)
    if cache_key not in _VERSUS:
        from .episodes import eval_env
        from .matches import seat_games

        env = eval_env(trainer)

        def run(params, key):
            return seat_games(env, make_policy(trainer, params, greedy), opponent, key, num_games, None, max_plies)

        _VERSUS[cache_key] = (trainer, jax.jit(run))
    return _VERSUS[cache_key][1]


def versus(trainer, params, opponent: Callable, key, num_games: int = 1000, greedy: bool = True,
           max_plies: int = 1000) -> dict:
    """The policy of ``params`` (one set, no seed axis) against ``opponent`` (a ``policy(key, obs)``)
    on the trainer's two-player game, ``num_games`` games in each seat: ``{"seat0": stats, "seat1":
    stats}`` as `train.matches.head_to_head` reports them (the policy is A)."""
    from .matches import seat_stats

    first, second = jax.device_get(_versus_program(trainer, opponent, int(num_games), int(max_plies), greedy)(params, key))
    game = trainer.config.env_id
    return {"seat0": seat_stats(first, 0, game, max_plies), "seat1": seat_stats(second, 1, game, max_plies)}
