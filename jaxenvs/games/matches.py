"""Head-to-head evaluation of policies on a multi-agent turn-based game, as one compiled program.

`play(env, policies, num_games)` plays `num_games` vmapped games, seat `i` played by
`policies[i]`, and returns each game's returns per seat (`play_games` is the same, traceable:
callable inside a compiled program, e.g. the trainer's update). `versus(env, policy, opponent,
key, num_games)` (traceable) puts `policy` in each seat in turn against `opponent` in the others
and returns its win / draw / loss fractions per seat as arrays. `head_to_head(env, policy_a, policy_b,
key, num_games)` plays A in every seat in turn against B and reports A's win / draw / loss rates per
seat (from the sign of A's return), its mean return and A's illegal moves.

Written against the environment contract only: `env.reset(key, params) -> (obs, state)`,
`env.step(key, state, action, params)`, the observation a dict whose leaves have the agent axis
first and hold `"action_mask"` (all zero for agents not to move), the joint action `int32[N]` of
which a sequential environment reads the mover's row. The games of a match are played in step
(one ply of every game per loop iteration), and a seat's policy runs on a ply only when the seat
has a legal move in some game still running (a `lax.cond` per seat): in alternating games each
policy runs on its own plies only (a searching policy searches on its own turns, not also on the
opponent's), on chance plies (no seat with a legal move) none runs, and where movers differ
across the batch each seat that moves somewhere answers for every game (the other games' answers,
like a non-mover's, are ignored by the game). Only the movers' actions are read, so the results
are those of asking every seat on every ply (``every_ply=True``, kept as the baseline); under an
outer `jax.vmap` (e.g. over seeds), and off a CPU (`jaxenvs._backend.cond`: a GPU would copy each
condition to its host), the conditions become selects and every seat runs again; off a CPU the
loop also runs all ``max_plies`` plies (at most the game's ``MAX_PLIES``, its longest game;
`jaxenvs._backend.bounded_while`), finished games left as they were. Chance plies are the environment's business (`step` draws them with its key). When
`info` has `"illegal_action"` (bool), illegal moves are counted per seat. A game is played until `terminated | truncated`, then
frozen (whether or not the env auto-resets); a game still running after `max_plies` steps is
counted as `unfinished` and `head_to_head` raises rather than report it.

A policy is `policy(key, obs) -> int32 action` on ONE agent's observation dict (see
`jaxenvs.games.opponents`).
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import _backend
from jaxenvs.wrappers.base import AutoReset, TimeLimit, Wrapper

__all__ = ["play", "play_games", "seat_games", "versus", "head_to_head", "seat_stats"]


def play(env, policies: Sequence[Callable], num_games: int, max_plies: int = 1000) -> Callable:
    """A jitted `run(key, params=None) -> dict` that plays `num_games` games, seat `i` played by
    `policies[i]` (one per agent: `len(policies) == env.num_agents`).

    The dict: `returns` float32 `[num_games, N]` (each seat's summed reward), `plies` int32
    `[num_games]` (steps to the end), `illegal` int32 `[num_games, N]` (illegal moves by seat; 0
    when the env reports none), `finished` bool `[num_games]`.

    The same arguments (the same env and policy objects) return the same compiled function (a
    cache of the last 32), so evaluating the same pairing again compiles nothing new.
    """
    return _play(env, tuple(policies), int(num_games), int(max_plies))


def _check(env, policies, num_games: int, max_plies: int) -> None:
    n = env.num_agents
    if len(policies) != n:
        raise ValueError(f"play needs one policy per seat: {env.name} has {n} agents, got {len(policies)} policies")
    if num_games < 1 or max_plies < 1:
        raise ValueError(f"num_games and max_plies must be >= 1, got {num_games} and {max_plies}")


@functools.lru_cache(maxsize=32)
def _play(env, policies: tuple, num_games: int, max_plies: int) -> Callable:
    _check(env, policies, num_games, max_plies)

    @jax.jit
    def run(key, params=None):
        return play_games(env, policies, num_games, key, params, max_plies)

    return run


def play_games(env, policies: Sequence[Callable], num_games: int, key, params=None, max_plies: int = 1000, *,
               every_ply: bool = False) -> dict:
    """`play`'s games, traceable (call it inside `jax.jit`, a `lax.scan`, or a trainer's update:
    the policies may close over traced network parameters). Same arguments and result as the
    function `play` returns. ``every_ply=True`` asks every seat's policy on every ply (the same
    results at up to N times the policy cost: the baseline of ``benchmarks/seat_loop.py``)."""
    policies = tuple(policies)
    num_games, max_plies = int(num_games), int(max_plies)
    _check(env, policies, num_games, max_plies)
    n = env.num_agents

    def mover(obs):
        """The seat whose mask row has a legal action (0 if none)."""
        return jnp.argmax(jnp.any(jnp.asarray(obs["action_mask"]) != 0, axis=-1))

    def actions(keys, obs, live):
        """int32[num_games, n]: seat i's policy on every game's row i (`keys` [num_games, n + 1]),
        run only when seat i has a legal move in a live game (zeros otherwise: nobody reads them)."""
        has_move = jnp.any(jnp.asarray(obs["action_mask"]) != 0, axis=-1) & live[:, None]  # [games, n]
        cols = []
        for i in range(n):
            def ask(i=i):
                rows = jax.tree.map(lambda x: x[:, i], obs)
                return jax.vmap(lambda k, o: jnp.asarray(policies[i](k, o), jnp.int32))(keys[:, i], rows)

            if every_ply:
                cols.append(ask())
            else:
                cols.append(_backend.cond(jnp.any(has_move[:, i]), ask, lambda: jnp.zeros((num_games,), jnp.int32)))
        return jnp.stack(cols, axis=1)

    def one_step(key, action, obs, state, params):
        """One ply of one game: the joint action int32[n], the env's key."""
        obs2, state2, reward, terminated, truncated, info = env.step(key, state, action, params)
        if "illegal_action" in info:
            illegal = jax.nn.one_hot(mover(obs), n, dtype=jnp.int32) * jnp.asarray(info["illegal_action"], jnp.int32)
        else:
            illegal = jnp.zeros((n,), jnp.int32)
        return obs2, state2, jnp.asarray(reward, jnp.float32), terminated | truncated, illegal

    k_reset, k_play = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num_games), params)
    carry = dict(
        obs=obs, state=state, key=k_play,
        returns=jnp.zeros((num_games, n), jnp.float32),
        illegal=jnp.zeros((num_games, n), jnp.int32),
        done=jnp.zeros((num_games,), bool),
        plies=jnp.zeros((num_games,), jnp.int32),
        t=jnp.zeros((), jnp.int32),
    )

    def cond(c):
        return (c["t"] < max_plies) & ~jnp.all(c["done"])

    def body(c):
        keys = jax.random.split(c["key"], 1 + num_games * (n + 1))  # one split per ply: cheap to compile
        key, keys = keys[0], keys[1:].reshape(num_games, n + 1)
        live = ~c["done"]
        action = actions(keys, c["obs"], live)
        obs2, state2, reward, ended, illegal = jax.vmap(one_step, in_axes=(0, 0, 0, 0, None))(
            keys[:, n], action, c["obs"], c["state"], params
        )

        def keep(new, old):
            return jnp.where(live.reshape(-1, *([1] * (new.ndim - 1))), new, old)

        return dict(
            obs=jax.tree.map(keep, obs2, c["obs"]),
            state=jax.tree.map(keep, state2, c["state"]),
            key=key,
            returns=c["returns"] + jnp.where(live[:, None], reward, 0.0),
            illegal=c["illegal"] + jnp.where(live[:, None], illegal, 0),
            done=c["done"] | ended,
            plies=c["plies"] + live.astype(jnp.int32),
            t=c["t"] + 1,
        )

    c = _backend.bounded_while(cond, body, carry, min(max_plies, _longest_game(env) or max_plies))
    return dict(returns=c["returns"], plies=c["plies"], illegal=c["illegal"], finished=c["done"])


def _longest_game(env) -> int | None:
    """The game's ``MAX_PLIES`` (its longest game) when ``env`` is the game itself under at most a
    time limit and auto-reset (which end no game later), else None."""
    while isinstance(env, Wrapper):
        if not isinstance(env, (AutoReset, TimeLimit)):
            return None
        env = env.env
    return env.MAX_PLIES


def seat_games(env, policy, opponent, key, num_games: int, params=None, max_plies: int = 1000) -> tuple:
    """`policy` in each seat `s` in turn, `opponent` in every other seat, `num_games` games per
    seat (traceable: `play_games`, one key of ``jax.random.split(key, N)`` per seat): a tuple of
    `play_games` results, the one at index `s` with `policy` in seat `s`."""
    n = env.num_agents
    return tuple(
        play_games(env, tuple(policy if i == seat else opponent for i in range(n)), num_games, k, params, max_plies)
        for seat, k in zip(range(n), jax.random.split(key, n))
    )


def versus(env, policy, opponent, key, num_games: int, params=None, max_plies: int = 1000) -> dict:
    """`policy` in each seat `s` in turn, `opponent` in every other seat, `num_games` games per
    seat (traceable: `seat_games`). Returns float32 arrays `[N]` indexed by `policy`'s seat:
    `win`, `draw`, `loss` (fractions of games by the sign of its return; a game cut at `max_plies`
    counts in none of them, see `unfinished`), `mean_return`, `illegal` (its illegal moves per
    game) and `unfinished` (the fraction of games not ended within `max_plies`)."""
    rows = []
    for seat, res in enumerate(seat_games(env, policy, opponent, key, num_games, params, max_plies)):
        r, fin = res["returns"][:, seat], res["finished"]
        rows.append(dict(
            win=jnp.mean((r > 0) & fin), draw=jnp.mean((r == 0) & fin), loss=jnp.mean((r < 0) & fin),
            mean_return=jnp.mean(r), illegal=jnp.mean(res["illegal"][:, seat].astype(jnp.float32)),
            unfinished=jnp.mean(~fin),
        ))
    return {k: jnp.stack([row[k] for row in rows]).astype(jnp.float32) for k in rows[0]}


def seat_stats(result: dict, seat: int, game: str = "", max_plies: int = 1000) -> dict:
    """Host-side summary of one `play` result (its dict, as numpy arrays) for the policy in seat
    `seat`: `win`, `draw`, `loss` (fractions of games, by the sign of its return; they sum to 1),
    `mean_return`, `illegal_a` (its illegal moves per game), `illegal_b` (the other seats'),
    `games`. Raises RuntimeError when a game did not end within `max_plies` (`game` names the game
    in the message)."""
    returns, illegal, finished = (np.asarray(result[k]) for k in ("returns", "illegal", "finished"))
    if not np.all(finished):
        raise RuntimeError(
            f"{int(np.sum(~finished))} of {len(finished)} games{' of ' + game if game else ''} did not end within "
            f"max_plies={max_plies} steps; raise max_plies"
        )
    r = returns[:, seat]
    return dict(
        win=float(np.mean(r > 0)), draw=float(np.mean(r == 0)), loss=float(np.mean(r < 0)),
        mean_return=float(np.mean(r)),
        illegal_a=float(np.mean(illegal[:, seat])),
        illegal_b=float(np.mean(np.delete(illegal, seat, axis=1).sum(axis=1))),
        games=len(r),
    )


def head_to_head(env, policy_a, policy_b, key, num_games: int, params=None, max_plies: int = 1000) -> dict:
    """Policy A against policy B on a two-player game: for each seat `s`, `num_games` games with A
    in seat `s` and B in the other (host-side summary of `play`).

    Returns `{"seat0": stats, "seat1": stats}` with `stats` a dict of floats: `win`, `draw`,
    `loss` (fractions of games by the sign of A's return; they sum to 1), `mean_return` (A's),
    `illegal_a` and `illegal_b` (illegal moves per game), and `games`. Raises RuntimeError when a
    game did not end within `max_plies` steps.
    """
    if env.num_agents != 2:
        raise ValueError(f"head_to_head is for two-player games; {env.name} has {env.num_agents} agents")
    out = {}
    for seat, k in zip((0, 1), jax.random.split(key, 2)):
        policies = (policy_a, policy_b) if seat == 0 else (policy_b, policy_a)
        res = jax.device_get(play(env, policies, num_games, max_plies)(k, params))
        out[f"seat{seat}"] = seat_stats(res, seat, env.name, max_plies)
    return out
