"""Tree search at play time: a policy/value network plus Monte-Carlo tree search, the game's own
``step`` as the model (DeepMind's ``mctx``: ``pip install 'jaxenvs[search]'``).

Our games are pure functions, so the environment is an exact model: `search_policy(env,
evaluate, num_simulations)` returns ``policy(key, obs) -> action`` on ONE agent's observation,
jittable and vmappable like any policy of `jaxenvs.games`, that runs ``num_simulations``
simulations of Gumbel MuZero (`mctx.gumbel_muzero_policy`, made for few simulations) from the
position ``obs`` shows and plays the action it selects:

* the root is the game's state rebuilt from the observation (the game class declares
  ``state_from_observation(obs)``: `TicTacToe` and `ConnectFour`, games of perfect information);
* ``recurrent_fn`` steps the game (``env.step_env``, no auto-reset) with the mover's action in its
  row of the joint action; the reward is the mover's, and the value of the next position (the
  network's, for the player to move there) enters with discount -1: a two-player zero-sum turn
  game's value changes sign with every ply; a terminal position has discount 0 and value 0 (and
  searching past it adds nothing);
* illegal actions are masked: ``invalid_actions`` at the root, the prior's logits set to the
  lowest float below it.

``evaluate(obs) -> (logits float[n], value float[])`` is the network on one agent's observation
(the value in the game's reward units, for that agent). ``greedy=True`` (the default) searches
without Gumbel noise (``gumbel_scale=0``): the same position gives the same move; ``greedy=False``
samples the root's Gumbel noise from ``key``.

On a GPU each simulation waits on the host twice: mctx descends the tree and backs values up in
``lax.while_loop``s whose trip counts depend on the tree (``tests/test_gpu_path.py`` finds these two
and nothing else in the search's program).

**Exact look-ahead** (`lookahead_values`, `lookahead_policy`; jax only, no ``mctx``): every line of
play ``depth`` plies deep, stepped with the game's own ``step`` and scored by its rewards alone
(negamax: +1 a forced win within the horizon, -1 a forced loss, 0 neither, for the mover; no
network). ``lookahead_policy(env, policy, depth)`` keeps only the moves of the best such value in
the observation's action mask and lets ``policy`` (the network's greedy move, or its tree search)
choose among them: a tactical guard that takes a forced win and avoids a forced loss seen within
``depth`` plies, and leaves every other choice to the network. It costs ``n_actions ** depth``
steps per move (Connect Four at depth 4: 2401). A game class may declare a faster function with
the same values as its ``LOOKAHEAD`` hook (``values(obs, depth) -> float32[n]`` on one agent's
observation, a ``staticmethod``: `jaxenvs.core.Environment` declares the hooks), which `lookahead_policy` then uses: `ConnectFour` does
(`jaxenvs.games.connect_four.lookahead_values`, about 40x faster at depth 4).
"""

from __future__ import annotations

import math
import os
from typing import Callable

import jax
import jax.numpy as jnp

__all__ = ["search_policy", "supports_search", "lookahead_values", "lookahead_policy", "check_budget", "SEARCH_EXTRA"]

SEARCH_EXTRA = "pip install 'jaxenvs[search]'"

MAX_SIMULATIONS = 1 << 20  # per move: mctx keeps every simulation's node (int32 indices, arrays of it)
# Cost model of `check_budget`, measured with ``jax.stages.Compiled.memory_analysis`` and timed per
# move from the first position (2-core x86_64 CPU at load 20; the rates are the slower figures):
# Tic-Tac-Toe's generic look-ahead 17-18 bytes per line of play (13-byte state), Connect Four's
# declared one 4-8 bytes; 0.85-72M lines per second; a simulation of search 266-652 bytes and
# 41-97 microseconds (64 to 1,024 simulations).
_LINES_PER_S = 1e6
_S_PER_SIMULATION = 1e-4
_SHOW_ABOVE_S = 3.0  # an estimate is worth a line above this


def _available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable`` of /proc/meminfo, else the
    free physical pages), None where neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _duration(s: float) -> str:
    return f"{s:.3g} s" if s < 120 else f"{s / 60:.3g} min" if s < 7200 else f"{s / 3600:.3g} h"


def check_budget(env, search: int = 0, lookahead: int = 0, moves: int = 1, params=None,
                 available: int | None = None) -> str | None:
    """Checks ``search`` simulations per move and ``lookahead`` plies against the game ``env``
    before anything is traced: a ValueError (one line, starting ``search`` or ``lookahead``, saying
    what is allowed) for a look-ahead deeper than the game can last (its class's ``MAX_PLIES``:
    Tic-Tac-Toe 9, Connect Four 42), more than `MAX_SIMULATIONS` simulations, or a move whose
    memory estimate exceeds ``available`` bytes (default: what this machine has available now,
    /proc/meminfo). Returns a one-line estimate of memory and time when the ``moves`` moves would
    take more than a few seconds, else None.

    The estimates: a look-ahead of depth ``d`` steps ``n_actions ** d`` lines of play per move, at
    ``4 x`` the state's bytes each (a game's declared ``LOOKAHEAD`` states its own
    ``LOOKAHEAD_BYTES``) and about a million lines a second; a search keeps every simulation's node
    (twice the state plus 32 bytes per action) at about 0.1 ms a simulation (the module's constants
    say where these come from). Time excludes compiling."""
    base = getattr(env, "unwrapped", env)
    name = getattr(getattr(env, "spec", None), "id", None) or type(base).__name__
    env_params = base.default_params if params is None else params
    n = int(base.action_space(env_params).n)
    state = jax.eval_shape(lambda k: base.reset(k, env_params)[1], jax.random.key(0))
    state_bytes = sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(state))
    longest = base.MAX_PLIES
    if lookahead and longest is not None and lookahead > longest:
        raise ValueError(f"lookahead {lookahead} is deeper than {name} can last ({longest} plies); allowed: 0 to "
                         f"{longest}")
    if search > MAX_SIMULATIONS:
        raise ValueError(f"search {search} simulations per move is more than the {MAX_SIMULATIONS:,} allowed "
                         "(every simulation keeps a node of the tree)")
    available = _available_memory() if available is None else available
    memory, seconds, parts = 0.0, 0.0, []
    if lookahead:
        declared = base.LOOKAHEAD is not None and base.LOOKAHEAD_BYTES
        per_line = declared or 4 * state_bytes
        lines = float(n) ** lookahead
        parts.append(f"look-ahead {lookahead} plies: {n}^{lookahead} = {lines:,.0f} lines of play per move")
        memory, seconds = lines * per_line, lines / _LINES_PER_S
        if available is not None and memory > available:
            depth = lookahead
            while depth > 1 and float(n) ** depth * per_line > available:
                depth -= 1
            raise ValueError(f"lookahead {lookahead} on {name} needs about {_size(memory)} per move ({parts[0]}), "
                             f"more than the {_size(available)} available; at most {depth} plies fit")
    if search:
        need = (search + 1) * (2 * state_bytes + 32 * n + 64)
        parts.append(f"search {search} simulations per move")
        if available is not None and need > available:
            raise ValueError(f"search {search} on {name} needs about {_size(need)} per move, more than the "
                             f"{_size(available)} available; at most {available // (2 * state_bytes + 32 * n + 64) - 1:,} "
                             "simulations fit")
        memory, seconds = max(memory, need), seconds + search * _S_PER_SIMULATION
    if not parts:
        return None
    total = seconds * max(1, int(moves))
    if total <= _SHOW_ABOVE_S:
        return None
    return (f"{name}, {' and '.join(parts)}: about {_size(memory)} and {_duration(seconds)} per move"
            + (f", {_duration(total)} for {moves:,} moves" if moves > 1 else "") + " (compiling not included)")


def supports_search(env) -> bool:
    """Whether tree search can play ``env``: a two-player zero-sum turn-based game whose class
    rebuilds its state from an observation (``state_from_observation``)."""
    base = getattr(env, "unwrapped", env)
    traits = getattr(base, "traits", None)
    return (base.state_from_observation is not None and getattr(traits, "num_agents", 0) == 2
            and getattr(traits, "utility", None) == "zero_sum" and getattr(traits, "dynamics", None) == "sequential")


def _import_mctx():
    try:
        import mctx
    except ImportError as e:
        raise ImportError(f"tree search needs mctx ({e}): {SEARCH_EXTRA}") from e
    return mctx


def search_policy(env, evaluate: Callable, num_simulations: int, greedy: bool = True, params=None,
                  max_depth: int | None = None) -> Callable:
    """``policy(key, obs) -> int32 action``: ``num_simulations`` simulations of Gumbel MuZero with
    ``evaluate`` as the network and ``env``'s step as the model (see the module docstring).
    ValueError for a game search cannot play (`supports_search`) or a non-positive
    ``num_simulations``; ImportError (naming the extra) without ``mctx``."""
    if isinstance(num_simulations, bool) or not isinstance(num_simulations, int) or num_simulations < 1:
        raise ValueError(f"num_simulations must be a positive int, got {num_simulations!r}")
    base = getattr(env, "unwrapped", env)
    if not supports_search(base):
        raise ValueError(
            f"tree search plays two-player zero-sum turn-based games of perfect information whose class rebuilds its "
            f"state from an observation (state_from_observation: TicTacToe, ConnectFour); {type(base).__name__} "
            "does not"
        )
    mctx = _import_mctx()
    env_params = base.default_params if params is None else params
    n_agents = base.num_agents

    def masked(logits, mask):
        return jnp.where(mask, logits, jnp.finfo(jnp.float32).min)

    def expand(rng, action, state):
        ended = ~jnp.any(base.legal_action_mask(state, env_params))  # a terminal position: nothing follows
        player = base.current_player(state, env_params)
        joint = jnp.zeros((n_agents,), jnp.int32).at[player].set(action)
        obs, state2, reward, terminated, truncated, _ = base.step_env(rng, state, joint, env_params)
        nxt = base.current_player(state2, env_params)
        row = jax.tree.map(lambda x: x[nxt], obs)
        logits, value = evaluate(row)
        done = ended | terminated | truncated
        out = mctx.RecurrentFnOutput(
            reward=jnp.where(ended, 0.0, reward[player]).astype(jnp.float32),
            discount=jnp.where(done, 0.0, -1.0).astype(jnp.float32),
            prior_logits=masked(jnp.asarray(logits, jnp.float32), jnp.asarray(row["action_mask"]) != 0),
            value=jnp.where(done, 0.0, value).astype(jnp.float32),
        )
        return out, jax.tree.map(lambda new, old: jnp.where(ended, old, new), state2, state)

    def recurrent_fn(_, rng, action, embedding):
        batch = action.shape[0]
        return jax.vmap(expand)(jax.random.split(rng, batch), action, embedding)

    def policy(key, obs):
        mask = jnp.asarray(obs["action_mask"]) != 0
        state = base.state_from_observation(obs, env_params)
        logits, value = evaluate(obs)
        root = mctx.RootFnOutput(
            prior_logits=masked(jnp.asarray(logits, jnp.float32), mask)[None],
            value=jnp.asarray(value, jnp.float32)[None],
            embedding=jax.tree.map(lambda x: x[None], state),
        )
        out = mctx.gumbel_muzero_policy(
            params=None, rng_key=key, root=root, recurrent_fn=recurrent_fn, num_simulations=num_simulations,
            invalid_actions=~mask[None], max_depth=max_depth, gumbel_scale=0.0 if greedy else 1.0,
        )
        return out.action[0].astype(jnp.int32)

    policy.num_simulations = num_simulations
    return policy


def check_depth(depth, least: int = 1) -> int:
    """``depth`` when it is an int of at least ``least`` (1: plies of look-ahead; 0: none allowed),
    else ValueError saying what is allowed."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < least:
        allowed = "a positive int (plies of look-ahead)" if least >= 1 else \
            "a non-negative int (plies of look-ahead; 0 = none)"
        raise ValueError(f"depth must be {allowed}, got {depth!r}")
    return depth


def _check_searchable(base) -> None:
    if not supports_search(base):
        raise ValueError(
            f"look-ahead plays two-player zero-sum turn-based games of perfect information whose class rebuilds its "
            f"state from an observation (state_from_observation: TicTacToe, ConnectFour); {type(base).__name__} "
            "does not"
        )


def lookahead_values(env, state, depth: int, params=None) -> jax.Array:
    """float32 ``[n]``: for each action of the mover in ``state``, its exact value for the mover
    over ``depth`` plies (this move included) of every line of play, from the game's rewards alone
    (negamax; a position not decided within the horizon scores 0, as a draw); ``-inf`` for the
    illegal actions. A win at once scores the mover's reward (+1 in Connect Four and
    Tic-Tac-Toe), a move after which the opponent has a win at once scores -1 when ``depth >= 2``,
    and so on. Jittable and vmappable (``n ** depth`` steps); ValueError for a ``depth`` below 1."""
    check_depth(depth)
    base = getattr(env, "unwrapped", env)
    env_params = base.default_params if params is None else params
    n_agents = base.num_agents
    n_actions = int(base.action_space(env_params).n)

    def children(state):
        """(values of each action for the mover, with the next position's value from ``recurse``)."""
        player = base.current_player(state, env_params)
        legal = base.legal_action_mask(state, env_params)[player]

        def one(action):
            joint = jnp.zeros((n_agents,), jnp.int32).at[player].set(action)
            _, nxt, reward, terminated, truncated, _ = base.step_env(jax.random.key(0), state, joint, env_params)
            return nxt, reward[player].astype(jnp.float32), terminated | truncated

        return legal, jax.vmap(one)(jnp.arange(n_actions))

    def action_values(state, plies):
        """(the mover's legal actions, each action's value for the mover over ``plies`` plies)."""
        legal, (nxt, reward, done) = children(state)
        if plies > 1:
            below = -jax.vmap(lambda s: value(s, plies - 1))(nxt)
            reward = jnp.where(done, reward, below)
        return legal, reward

    def value(state, plies):
        """The mover's value of ``state`` over ``plies`` plies (0 at the horizon or with no legal move)."""
        legal, values = action_values(state, plies)
        best = jnp.max(jnp.where(legal, values, -jnp.inf))
        return jnp.where(jnp.any(legal), best, 0.0)

    legal, values = action_values(state, depth)
    return jnp.where(legal, values, -jnp.inf)


def lookahead_policy(env, policy: Callable, depth: int, params=None) -> Callable:
    """``policy(key, obs) -> int32 action`` on ONE agent's observation: ``policy`` choosing among
    the legal moves of the best `lookahead_values` (or the game's ``LOOKAHEAD``) over ``depth``
    plies only (the observation's action mask narrowed to them): it takes a win it sees within
    ``depth`` plies and avoids a loss it sees, and plays ``policy``'s move otherwise. ``depth = 0`` returns ``policy`` unchanged.
    ValueError for a game the look-ahead cannot play (`supports_search`) or a negative ``depth``."""
    if check_depth(depth, least=0) == 0:
        return policy
    base = getattr(env, "unwrapped", env)
    _check_searchable(base)
    env_params = base.default_params if params is None else params
    fast = base.LOOKAHEAD
    if fast is not None:
        def values_of(obs):
            return fast(obs, depth)
    else:
        def values_of(obs):
            return lookahead_values(base, base.state_from_observation(obs, env_params), depth, env_params)

    def guarded(key, obs):
        mask = jnp.asarray(obs["action_mask"])
        values = jnp.where(mask != 0, values_of(obs), -jnp.inf)
        keep = (mask != 0) & (values >= jnp.max(values))
        return policy(key, dict(obs, action_mask=keep.astype(mask.dtype)))

    guarded.lookahead = depth
    return guarded
