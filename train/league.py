"""Who plays the opponent seats in training (turn-based games): the config's ``random_opponents``
picks the fraction of the envs with an opponent seat (`train.turns.SelfPlay.opponent_rows`: in env
``e`` the seat ``e % num_agents``), and ``training_opponents`` names who plays it: the named
opponents of the game (`jaxenvs.games.named_opponents`: ``random`` for every game, ``perfect``
for Tic-Tac-Toe, ``heuristic`` and its variants, ``no-blunder`` and ``win-block`` for Connect Four), comma-separated, dealt to
those envs in turn, a block of ``num_agents`` envs each (``"random,heuristic"`` in a two-player game:
envs 0 and 1 random-legal, 2 and 3 the heuristic, ...; the opponent's seat alternates within a
block, so each opponent meets the learner in every seat). The opponents' moves are not trained on; everything runs inside the compiled
rollout (each opponent is a jittable policy on one agent's observation).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs.games import allowed_opponents, named_opponents
from .masking import MaskedCategorical

__all__ = ["names", "check", "opponent_actions"]


def names(config) -> list[str]:
    """The config's ``training_opponents`` as a list of names."""
    return [n.strip() for n in str(config.training_opponents).split(",") if n.strip()]


def check(trainer) -> None:
    """ValueError when ``training_opponents`` names an opponent the game does not declare."""
    wanted = names(trainer.config)
    if not wanted:
        raise ValueError("training_opponents must name at least one opponent, e.g. 'random'")
    if wanted == ["random"]:
        return
    known = named_opponents(trainer.env)
    bad = [n for n in wanted if n not in known]
    if bad:
        raise ValueError(f"training_opponents {','.join(bad)!r}: {trainer.config.env_id} has the opponents "
                         f"{allowed_opponents(trainer.env, runs=False)}")


def opponent_actions(trainer, key, obs, mask) -> jax.Array:
    """int32 ``[batch_size]``: each opponent row's move by its env's opponent (0 in the other rows,
    which the caller does not use). ``obs``: the raw observations ``[num_envs, num_agents, ...]``;
    ``mask`` bool ``[batch_size, n]``. Each opponent runs on its own rows only (static indices), so
    K opponents cost one opponent's pass over the opponent rows, not K passes over every row."""
    wanted = names(trainer.config)
    if wanted == ["random"]:
        return MaskedCategorical(jnp.zeros(mask.shape), mask).sample(key)

    known = named_opponents(trainer.env)
    rows = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), obs)  # [batch_size, ...]: one agent's view each
    num_agents = trainer.num_agents
    opponent_rows = trainer.opponent_rows
    index = np.flatnonzero(opponent_rows if opponent_rows is not None else np.ones(mask.shape[0], bool))
    # env e's opponent: wanted[(e // num_agents) % K], so that each opponent meets the learner in every seat
    which = (index // num_agents // num_agents) % len(wanted)
    out = jnp.zeros((mask.shape[0],), jnp.int32)
    for i, (name, k) in enumerate(zip(wanted, jax.random.split(key, len(wanted)))):
        mine = index[which == i]
        if len(mine) == 0:
            continue
        view = jax.tree.map(lambda x: x[mine], rows)
        moves = jax.vmap(known[name].policy)(jax.random.split(k, len(mine)), view)
        out = out.at[mine].set(moves.astype(jnp.int32))
    return out
