"""sb3-contrib's MaskablePPO on `SB3VecEnv` of Tic-Tac-Toe against a random-legal opponent
(`jaxenvs.wrappers.PlayAgainst`): the masks the adapter hands out are honoured, so no move is
illegal, and they are those of the observations; the Gymnasium adapters expose the same masks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import jaxenvs
from jaxenvs.adapters.gymnasium import GymnasiumEnv, GymnasiumVectorEnv
from jaxenvs.adapters.sb3 import SB3VecEnv
from jaxenvs.wrappers import PlayAgainst

NUM_ENVS, TOTAL_STEPS = 8, 2048


@pytest.fixture(scope="module")
def game():
    return PlayAgainst(jaxenvs.make("TicTacToe-v0", autoreset=False), seat="random")


@pytest.mark.slow  # ~30 s of CPU: a policy network trained for 2,048 steps
def test_maskable_ppo_trains_with_zero_illegal_moves(game):
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback

    class Audit(BaseCallback):
        """Per step: the masks MaskablePPO sampled with, its actions, and the infos that come back."""

        def __init__(self):
            super().__init__()
            self.steps = self.illegal = self.off_mask = self.restricted = self.episodes = 0

        def _on_step(self):
            masks, actions, infos = self.locals["action_masks"], self.locals["actions"], self.locals["infos"]
            self.off_mask += int(np.sum(~masks[np.arange(len(actions)), actions]))
            self.restricted += int(np.sum(~masks.all(axis=1)))  # states where some move was illegal
            self.illegal += sum(bool(i["illegal_action"]) for i in infos)
            self.episodes += int(np.sum(self.locals["dones"]))
            for i, info in enumerate(infos):  # the next step's mask is the returned observation's
                np.testing.assert_array_equal(info["action_mask"], self.locals["new_obs"]["action_mask"][i])
            self.steps += len(actions)
            return True

    venv = SB3VecEnv(game, num_envs=NUM_ENVS, seed=0)
    audit = Audit()
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=128, batch_size=256, n_epochs=2, seed=0, device="cpu")
    model.learn(TOTAL_STEPS, callback=audit)
    assert audit.steps >= TOTAL_STEPS and audit.episodes > 300
    assert audit.restricted > TOTAL_STEPS // 2  # most states had illegal moves to avoid
    assert audit.off_mask == 0 and audit.illegal == 0


def test_sb3_masks_follow_the_games(game):
    venv = SB3VecEnv(game, num_envs=4, seed=1)
    obs = venv.reset()
    masks = venv.action_masks()
    assert masks.dtype == bool and masks.shape == (4, 9)
    np.testing.assert_array_equal(masks, obs["action_mask"] == 1)
    np.testing.assert_array_equal(np.stack(venv.env_method("action_masks")), masks)
    assert [i["action_mask"].tolist() for i in venv.reset_infos] == obs["action_mask"].astype(np.int8).tolist()
    # seat 1 episodes start after the opponent's first move: 8 free cells; seat 0: 9
    assert set(masks.sum(axis=1)) <= {8, 9}
    rng = np.random.default_rng(0)
    for _ in range(30):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, _, dones, infos = venv.step(actions)
        masks = venv.action_masks()
        np.testing.assert_array_equal(masks, obs["action_mask"] == 1)
        for i, info in enumerate(infos):
            assert info["action_mask"].dtype == np.int8 and not info["illegal_action"]
            if dones[i]:  # the new game's mask, the last observation's is all zero
                assert not info["terminal_observation"]["action_mask"].any() and masks[i].sum() >= 8


def test_gymnasium_adapters_give_the_mask_at_reset_and_every_step(game):
    env = GymnasiumEnv(game)
    obs, info = env.reset(seed=0)
    assert info["action_mask"].dtype == np.int8
    np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
    np.testing.assert_array_equal(env.action_masks(), obs["action_mask"] == 1)
    _, _, _, _, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    np.testing.assert_array_equal(info["action_mask"].astype(bool), env.action_masks())
    venv = GymnasiumVectorEnv(game, 3)
    obs, infos = venv.reset(seed=0)
    np.testing.assert_array_equal(infos["action_mask"], obs["action_mask"])
    assert infos["_action_mask"].all() and venv.action_masks().shape == (3, 9)
    obs, _, _, _, infos = venv.step(np.array([np.flatnonzero(m)[0] for m in obs["action_mask"]]))
    np.testing.assert_array_equal(infos["action_mask"], obs["action_mask"])
    # environments without legal actions offer no mask
    with pytest.raises(AttributeError, match="no legal-action mask"):
        GymnasiumEnv("GridWorld-v0").action_masks()
    assert not SB3VecEnv("GridWorld-v0", num_envs=2).has_attr("action_masks")


def test_mask_comes_from_the_state_when_a_wrapper_flattened_the_observation(game):
    from jaxenvs.wrappers import FlattenObservation

    flat, full = GymnasiumEnv(FlattenObservation(game)), GymnasiumEnv(game)
    obs_flat, info_flat = flat.reset(seed=5)
    obs, info = full.reset(seed=5)
    assert obs_flat.ndim == 1  # no "action_mask" entry left to read
    for move in range(3):
        np.testing.assert_array_equal(info_flat["action_mask"], info["action_mask"])
        np.testing.assert_array_equal(flat.action_masks(), full.action_masks())
        action = int(np.flatnonzero(full.action_masks())[0])
        _, _, term, _, info_flat = flat.step(action)
        obs, _, _, _, info = full.step(action)
        if term:
            break
