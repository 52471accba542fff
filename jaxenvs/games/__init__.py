"""The turn-based games' wing, on jax and numpy only: matches between policies (`matches`),
opponents and the names each game declares (`opponents`), the solvers beside their games
(`tic_tac_toe`: exact values and the perfect player; `connect_four`: heuristic players;
`kuhn_poker`: exact exploitability), tree search with a trained network (`search`, needs
``mctx``) and a seat for a person (`human`: the terminal; `window`: a pygame window).

    from jaxenvs.games import make_opponent, versus
    label, perfect = make_opponent("perfect", jaxenvs.make("TicTacToe-v0"))
"""

from .matches import head_to_head, play, play_games, seat_games, seat_stats, versus
from .opponents import (
    NamedOpponent, OpponentError, allowed_opponents, is_two_player_game, make_opponent, named_opponents, random_legal,
    uniform_among,
)

__all__ = [
    "head_to_head", "play", "play_games", "seat_games", "seat_stats", "versus", "NamedOpponent", "OpponentError",
    "allowed_opponents", "is_two_player_game", "make_opponent", "named_opponents", "random_legal", "uniform_among",
]
