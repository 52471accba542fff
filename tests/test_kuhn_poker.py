"""KuhnPoker-v0 against OpenSpiel's kuhn_poker: every deal and every betting sequence compared
with pyspiel (information-state tensors, masks, mover, chance outcomes, returns), the chance draws
of step (chi-square), illegal moves and FoldChanceNodes."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxenvs
from jaxenvs.wrappers import FoldChanceNodes

pyspiel = pytest.importorskip("pyspiel")

SEQUENCES = [(0, 0), (0, 1, 0), (0, 1, 1), (1, 0), (1, 1)]  # every terminal betting sequence
DEALS = list(itertools.permutations(range(3), 2))


@pytest.fixture(scope="module")
def env():
    return jaxenvs.make("KuhnPoker-v0", autoreset=False)


@pytest.fixture(scope="module")
def games(env):
    """Every deal x every terminal sequence, played through apply_chance then step (vmapped):
    per ply the observation, mask, mover, reward, flags and chance outcomes."""

    def play(deal, actions):
        obs, state = env.reset(jax.random.key(0))
        record = []

        def snap(obs, state, reward=jnp.zeros(2, jnp.float32), terminated=jnp.bool_(False), illegal=jnp.bool_(False)):
            return {
                "obs": obs["observation"],
                "obs_mask": obs["action_mask"],
                "mask": env.legal_action_mask(state),
                "player": env.current_player(state),
                "chance": env.is_chance_node(state),
                "outcomes": env.chance_outcomes(state),
                "reward": reward,
                "terminated": terminated,
                "illegal": illegal,
            }

        record.append(snap(obs, state))
        for card in deal:
            state = env.apply_chance(state, card)
            record.append(snap(env.unwrapped._obs(state), state))
        for a in actions:
            joint = jnp.stack([a, a])
            obs, state, reward, terminated, _, info = env.step(jax.random.key(0), state, joint)
            record.append(snap(obs, state, reward, terminated, info["illegal_action"]))
        return jax.tree.map(lambda *x: jnp.stack(x), *record)

    deals = np.array([d for d in DEALS for _ in SEQUENCES], np.int32)
    actions = np.array([list(s) + [0] * (3 - len(s)) for _ in DEALS for s in SEQUENCES], np.int32)
    out = jax.jit(jax.vmap(play))(deals, actions)
    return deals, [s for _ in DEALS for s in SEQUENCES], jax.tree.map(np.asarray, out)


def test_every_deal_and_sequence_matches_openspiel(games):
    deals, sequences, out = games
    game = pyspiel.load_game("kuhn_poker")
    for g, (deal, seq) in enumerate(zip(deals, sequences)):
        state = game.new_initial_state()
        plies = [None, *deal, *seq]
        for t, a in enumerate(plies):
            at = f"deal {deal.tolist()} sequence {seq} ply {t}"
            if a is not None:
                state.apply_action(int(a))
            for p in range(2):
                np.testing.assert_array_equal(out["obs"][g, t, p], state.information_state_tensor(p), err_msg=at)
                np.testing.assert_array_equal(out["mask"][g, t, p], np.array(state.legal_actions_mask(p)) == 1, err_msg=at)
            np.testing.assert_array_equal(out["obs_mask"][g, t], out["mask"][g, t].astype(np.uint8))
            assert bool(out["chance"][g, t]) == state.is_chance_node(), at
            if state.is_chance_node():
                expected = np.zeros(3)
                for card, prob in state.chance_outcomes():
                    expected[card] = prob
                np.testing.assert_allclose(out["outcomes"][g, t], expected, rtol=1e-6, err_msg=at)
            elif not state.is_terminal():
                assert out["player"][g, t] == state.current_player(), at
            if t >= 3:  # decision plies: reward and flags
                assert bool(out["terminated"][g, t]) == state.is_terminal(), at
                expected = state.returns() if state.is_terminal() else [0.0, 0.0]
                np.testing.assert_array_equal(out["reward"][g, t], expected, err_msg=at)
                assert not out["illegal"][g, t]


def test_step_draws_the_deal_with_its_key(env):
    """step at the two chance nodes: cards uniform over the 6 ordered deals (chi-square, 6,000
    games: a deviation of about 10% of a cell's probability is detected at level 1e-3)."""

    def deal(key):
        _, state = env.reset(key)
        k1, k2 = jax.random.split(key)
        _, state, r1, _, _, i1 = env.step(k1, state, jnp.array([7, 7], jnp.int32))
        _, state, r2, _, _, i2 = env.step(k2, state, jnp.array([7, 7], jnp.int32))
        return state.cards, jnp.stack([i1["chance_outcome"], i2["chance_outcome"]]), r1 + r2, i1["illegal_action"] | i2["illegal_action"]

    cards, outcomes, rewards, illegal = jax.jit(jax.vmap(deal))(jax.random.split(jax.random.key(0), 6000))
    cards, outcomes = np.asarray(cards), np.asarray(outcomes)
    np.testing.assert_array_equal(cards, outcomes)
    assert (cards[:, 0] != cards[:, 1]).all() and not np.asarray(illegal).any() and not np.asarray(rewards).any()
    counts = np.bincount(cards[:, 0] * 3 + cards[:, 1], minlength=9)[[1, 2, 3, 5, 6, 7]]
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_illegal_bet_ends_the_game(env):
    _, state = env.reset(jax.random.key(0))
    state = env.apply_chance(env.apply_chance(state, 2), 0)
    _, state, reward, terminated, _, info = env.step(jax.random.key(0), state, jnp.array([0, 0], jnp.int32))
    assert not terminated and int(env.current_player(state)) == 1
    _, state, reward, terminated, _, info = env.step(jax.random.key(0), state, jnp.array([0, 5], jnp.int32))
    assert bool(info["illegal_action"]) and bool(terminated) and np.asarray(reward).tolist() == [1, -1]
    assert int(info["chance_outcome"]) == -1


def test_fold_chance_nodes_starts_at_the_first_decision():
    env = FoldChanceNodes(jaxenvs.make("KuhnPoker-v0", autoreset=False))
    assert env.traits.chance == "stochastic"
    obs, state = jax.jit(env.reset)(jax.random.key(3))
    assert not bool(env.is_chance_node(state)) and int(env.current_player(state)) == 0
    cards = np.asarray(state.cards)
    assert cards[0] != cards[1] and (cards >= 0).all()
    assert np.asarray(obs["action_mask"]).tolist() == [[1, 1], [0, 0]]
    np.testing.assert_array_equal(np.asarray(obs["observation"])[:, 2:5].argmax(1), cards)
    with pytest.raises(ValueError, match="explicit_stochastic"):
        FoldChanceNodes(jaxenvs.make("TicTacToe-v0"))


def test_rendering(env):
    _, state = env.reset(jax.random.key(0))
    state = env.apply_chance(env.apply_chance(state, 2), 0)
    frame = np.asarray(jax.jit(env.render)(state))
    assert frame.shape == (96, 192, 3) and frame.dtype == np.uint8
    assert tuple(frame[30, 48]) == (200, 40, 40) and tuple(frame[30, 96 + 48]) == (60, 120, 220)
    assert env.render_text(state) == "KuhnPoker: cards K J, bets '', player 0 to act"


def test_apply_chance_refuses_impossible_deals(env):
    from jaxenvs.core import ChanceError

    _, start = env.reset(jax.random.key(0))
    one = env.apply_chance(start, 2)
    np.testing.assert_array_equal(one.cards, [2, -1])
    both = env.apply_chance(one, 0)
    np.testing.assert_array_equal(both.cards, [2, 0])
    cases = [
        (start, 5, r"outcome 5 is out of range: chance_outcomes has 3 outcomes, possible here: \[0, 1, 2\]"),
        (start, -1, r"outcome -1 is out of range"),
        (one, 2, r"outcome 2 has probability 0 at this chance node; possible here: \[0, 1\]"),  # the card dealt
        (both, 2, r"the state is not a chance node"),  # a decision state: would overwrite a dealt card
        (start, 0.5, r"outcome must be an integer scalar"),
    ]
    for state, outcome, match in cases:
        with pytest.raises(ChanceError, match=match):
            env.apply_chance(state, outcome)
        assert issubclass(ChanceError, ValueError)
    # traced outcomes: unchecked without checked mode (documented), checked under jaxenvs.checked
    checked_env = jaxenvs.make("KuhnPoker-v0", autoreset=False, checked=True)
    deal = jaxenvs.checked(lambda s, o: checked_env.apply_chance(s, o))
    _, cstart = checked_env.reset(jax.random.key(0))
    cone = deal(cstart, jnp.int32(1))
    np.testing.assert_array_equal(cone.env_state.cards, [1, -1])
    from jax.experimental import checkify

    for state, outcome in ((cstart, 3), (cone, 1), (deal(cone, jnp.int32(0)), 2)):
        with pytest.raises(checkify.JaxRuntimeError, match=r"KuhnPoker: apply_chance outcome \d is not possible here"):
            deal(state, jnp.int32(outcome))
    # host values through the checked env: the env's own host check
    with pytest.raises(ChanceError, match="outcome 1 has probability 0"):
        checked_env.apply_chance(cone, 1)


def test_step_deals_and_moves_eagerly(env):
    # step computes the deal at every state (and keeps it at chance nodes only): an eager step at a
    # decision state must not trip apply_chance's host check
    _, state = env.reset(jax.random.key(0))
    state = env.apply_chance(env.apply_chance(state, 0), 1)
    _, state, *_ = env.step(jax.random.key(1), state, jnp.array([1, 1], jnp.int32))
    np.testing.assert_array_equal(state.cards, [0, 1])
    assert int(state.num_actions) == 1
