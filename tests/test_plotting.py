"""train/plotting.py: the trainer's policy GIF carries the legend that ``jaxenvs play`` draws."""

import jax
import numpy as np

import jaxenvs
from jaxenvs.rendering import render_frames
from jaxenvs.rendering.legend import legend_strip
from jaxenvs.train.configs import get_config
from jaxenvs.train.plotting import policy_gif
from jaxenvs.train.trainers import make_trainer


def test_policy_gif_appends_the_env_legend_below_each_frame(tmp_path):
    from PIL import Image, ImageSequence

    env_id = "Lottery-v0"  # its colours need a key (as Rock-Paper-Scissors'); GridWorld's frames stay as drawn
    trainer = make_trainer(get_config(env_id, num_envs=2, num_steps=4, total_timesteps=8, hidden_sizes=(8,)))
    obs, _ = trainer.env.reset(jax.random.key(0), trainer.env_params)
    params = trainer.network.init(jax.random.key(1), trainer.flat_obs(jax.tree.map(lambda x: x[None], obs)))
    path = policy_gif(trainer, params, tmp_path / "policy.gif", jax.random.key(2), num_episodes=1, max_frames=4)
    frames = np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(Image.open(path))])
    env = jaxenvs.make(env_id, autoreset=False)
    _, state = env.reset(jax.random.key(0))
    height, width = np.asarray(render_frames(env, jax.tree.map(lambda x: x[None], state))).shape[1:3]
    strip = legend_strip(env, width)  # the same strip under every frame
    assert frames.shape[1:3] == (height + strip.shape[0], width)
    np.testing.assert_array_equal(frames[:, height:], np.broadcast_to(strip, (len(frames),) + strip.shape))
