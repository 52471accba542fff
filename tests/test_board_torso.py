"""The convolutional torso for board games (`train.networks.BoardTorso`, `board_layout`): where it
finds the board in a flat observation, that its first convolution sees exactly the board's cells
as rows x cols x planes, and the shapes of an actor-critic built on it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax")

import jaxenvs  # noqa: E402
from jaxenvs import spaces  # noqa: E402
from jaxenvs.train.networks import ActorCritic, BoardTorso, board_layout  # noqa: E402


def _space(env_id):
    env = jaxenvs.make(env_id)
    return env.observation_space(env.default_params)


def test_board_layout_finds_the_board_in_the_flat_observation():
    assert board_layout(_space("ConnectFour-v0")) == (7, (6, 7, 2))
    assert board_layout(_space("TicTacToe-v0")) == (9, (3, 3, 2))
    assert board_layout(spaces.Box(0, 1, (4, 5, 3))) == (0, (4, 5, 3))
    assert board_layout(_space("GridWorld-v0")) is None
    # the layout is where spaces.flatten puts the board: a piece on (row 5, col 3, plane 0)
    env = jaxenvs.make("ConnectFour-v0")
    obs, _ = env.reset(jax.random.key(0))
    one = jax.tree.map(lambda x: x[0], obs)
    one["observation"] = one["observation"].at[5, 3, 0].set(1)
    flat = np.asarray(spaces.flatten(_space("ConnectFour-v0"), one))
    start, shape = board_layout(_space("ConnectFour-v0"))
    board = flat[start:start + int(np.prod(shape))].reshape(shape)
    assert board[5, 3, 0] == 1 and board.sum() == 1


def test_the_first_convolution_sees_the_board_cells_in_place():
    torso = BoardTorso(7, (6, 7, 2), channels=(4,), hidden=8)
    x = jax.random.normal(jax.random.key(1), (3, 91))
    params = torso.init(jax.random.key(0), x)
    _, state = torso.apply(params, x, capture_intermediates=True)
    conv_out = state["intermediates"]["Conv_0"]["__call__"][0]  # [3, 6, 7, 4]
    kernel, bias = params["params"]["Conv_0"]["kernel"], params["params"]["Conv_0"]["bias"]
    board = x[:, 7:].reshape(3, 6, 7, 2)
    want = jax.lax.conv_general_dilated(board, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + bias
    np.testing.assert_allclose(conv_out, want, rtol=1e-5, atol=1e-5)
    # the inputs outside the board (the mask) reach the output through the dense layer only
    y = x.at[:, :7].set(0.0)
    assert not np.allclose(torso.apply(params, x), torso.apply(params, y))
    with pytest.raises(ValueError, match=r"BoardTorso: a board of \(6, 7, 2\) from input 7 needs 91 inputs, got 90"):
        torso.init(jax.random.key(0), jnp.zeros((1, 90)))


def test_actor_critic_on_the_board_torso_shapes():
    net = ActorCritic(7, False, (32, 16), "tanh", board=(7, (6, 7, 2)))
    params = net.init(jax.random.key(0), jnp.zeros((1, 91)))
    p = params["params"]
    assert set(p) == {"actor_board", "actor", "critic_board", "critic", "policy_head", "value_head"}
    assert p["actor_board"]["Dense_0"]["kernel"].shape == (6 * 7 * 16 + 7, 32)
    assert p["actor"]["Dense_0"]["kernel"].shape == (32, 16) and p["policy_head"]["kernel"].shape == (16, 7)
    for batch in ((5,), (2, 3)):
        logits, value = net.apply(params, jnp.zeros(batch + (91,)))
        assert logits.shape == batch + (7,) and value.shape == batch
    plain = ActorCritic(7, False, (32, 16), "tanh").init(jax.random.key(0), jnp.zeros((1, 91)))
    assert set(plain["params"]) == {"actor", "critic", "policy_head", "value_head"}


def test_the_config_torso_picks_the_network():
    from jaxenvs.train.configs import get_config
    from jaxenvs.train.trainers import make_trainer

    trainer = make_trainer(get_config("ConnectFour-v0", torso="board", hidden_sizes=(16,), num_envs=4, num_steps=4,
                                      total_timesteps=16, match_games=0))
    assert trainer.network.board == (7, (6, 7, 2))
    assert make_trainer(get_config("ConnectFour-v0", hidden_sizes=(16,), num_envs=4, num_steps=4,
                                   total_timesteps=16, match_games=0)).network.board is None
    with pytest.raises(ValueError, match=r"torso 'board' reads a board .* GridWorld-v0's observation space .* has none"):
        make_trainer(get_config("GridWorld-v0", torso="board"))
    with pytest.raises(ValueError, match="torso"):
        get_config("ConnectFour-v0", torso="resnet")
