"""Source of the notebooks in this folder: ``python notebooks/build_notebooks.py`` writes them.

Each notebook is a list of ``(kind, source)`` cells, ``kind`` being ``"md"`` or ``"code"``; all
three share the first (setup) cell. Notebooks are written without outputs and with fixed cell
ids, so the files change only when this script does (``--check`` exits 1 when a committed
notebook differs from what it would write; ``tests/test_notebooks.py`` checks the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

RUNNING = """\
**Running it.** On Colab pick *Runtime → Change runtime type → GPU* (a CPU runtime works too; JAX
uses the GPU without any change to the code). The first cell installs jaxenvs when it is not
installed yet (from a clone of the repository in this folder, a parent of it or `./jaxenvs`, else
from the repository's git URL) and reports the device JAX runs on. Setting the environment
variable `JAXENVS_NOTEBOOK_QUICK=1` before it runs (`%env JAXENVS_NOTEBOOK_QUICK=1` in a cell above
it) selects small budgets; the tests execute every notebook that way."""

REPOSITORY = "jaxenvs/jaxenvs"  # on GitHub: the project URLs of pyproject.toml
COLAB_LINK = (
    "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
    "(https://colab.research.google.com/github/{repository}/blob/main/notebooks/{name})"
)

SETUP = """\
# Setup: install jaxenvs when it is missing, then report the device.
import importlib
import os
import pathlib
import sys

QUICK = os.environ.get("JAXENVS_NOTEBOOK_QUICK") == "1"  # small budgets (used by the tests)

def _jaxenvs_ready() -> bool:  # importable for real: a clone's folder jaxenvs/ alone is an empty namespace package
    try:
        import jaxenvs
    except ImportError:
        return False
    return hasattr(jaxenvs, "make")


def _forget_jaxenvs() -> None:
    for name in [m for m in sys.modules if m == "jaxenvs" or m.startswith("jaxenvs.")]:
        del sys.modules[name]  # the namespace package and what was imported through it


if not _jaxenvs_ready():
    _forget_jaxenvs()
    # a clone of the repository: this folder, a parent of it (run from notebooks/) or ./jaxenvs
    cwd = pathlib.Path.cwd()
    root = next(
        (p for p in (cwd, *cwd.parents, cwd / "jaxenvs")
         if (p / "pyproject.toml").is_file() and (p / "jaxenvs" / "__init__.py").is_file()),
        None,
    )
    if root is not None:
        %pip install -q "{root}[train]"
    else:
        %pip install -q "jaxenvs[train] @ git+https://github.com/jaxenvs/jaxenvs"
    importlib.invalidate_caches()  # importable in this kernel without a restart
    _forget_jaxenvs()
    if not _jaxenvs_ready():
        raise RuntimeError("installing jaxenvs did not make it importable: see pip's messages above (outside a clone this cell installs from https://github.com/jaxenvs/jaxenvs, which must be reachable: open the notebook from a clone otherwise)")

# XLA:CPU can hang on seed-vmapped programs (02_train_ppo's seed batch); jaxenvs.train holds the
# one workaround (see its docstring), which must run before jax starts its first backend.
from jaxenvs.train import use_safe_cpu_scheduler

use_safe_cpu_scheduler()

import jax

print(f"jax {jax.__version__}, backend {jax.default_backend()}: {jax.devices()}"
      + ("  [quick mode]" if QUICK else ""))"""

QUICKSTART = [
    ("md", f"""\
# jaxenvs quick start

Reinforcement-learning environments as pure JAX functions: `reset` and `step` are plain functions
of a key, a state pytree and an action, so `jax.jit`, `jax.vmap` and `jax.lax.scan` apply to them
directly. This notebook makes an environment, steps it, runs 10,000 copies at once and times
them, renders a rollout as a GIF, and steps a two-agent game.

{RUNNING}"""),
    ("code", SETUP),
    ("md", """\
## Make an environment, reset it, step it

`jaxenvs.make` returns the environment wrapped as its registration says: `TimeLimit` (300 steps
for GridWorld) and `AutoReset`. `params` is a dataclass of values that do not change array shapes;
`reset` and `step` take it explicitly (or use the defaults when it is left out)."""),
    ("code", """\
import time

import jax.numpy as jnp
import numpy as np

import jaxenvs

env = jaxenvs.make("GridWorld-v0")
params = env.default_params
print(env)
print("params:      ", params)
print("observations:", env.observation_space(params))
print("actions:     ", env.action_space(params), "(0 right, 1 up, 2 left, 3 down)")

obs, state = env.reset(jax.random.key(0), params)
print("\\nafter reset:", {k: v.tolist() for k, v in obs.items()})
print(env.render_text(state, params))

obs, state, reward, terminated, truncated, info = env.step(jax.random.key(1), state, 0, params)
print("\\nafter 'right':", {k: v.tolist() for k, v in obs.items()},
      f"reward={float(reward)} terminated={bool(terminated)} truncated={bool(truncated)}",
      f"distance={int(info['distance'])}")
print(env.render_text(state, params))"""),
    ("md", """\
## 10,000 environments at once

`jax.vmap` turns `reset`/`step` of one environment into functions of a batch; `jax.lax.scan`
runs the steps inside one compiled program. The program is compiled first (`lower().compile()`),
so the timing below counts only the steps. `jaxenvs.rollout.benchmark(env, num_envs, num_steps)`
makes the same measurement, and `jaxenvs.VectorEnv(env, num_envs)` is a batched path that draws
one key per batch step instead of one per environment."""),
    ("code", """\
NUM_ENVS = 10_000
NUM_STEPS = 100 if QUICK else 1_000


def run(key, params):
    \"\"\"Reset NUM_ENVS environments, take NUM_STEPS uniformly random actions in each; returns
    the total reward (targets reached).\"\"\"
    key_reset, key_steps = jax.random.split(key)
    obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, NUM_ENVS), params)

    def body(carry, key):
        state, total = carry
        key_act, key_step = jax.random.split(key)
        action = env.action_space(params).sample(key_act, batch_shape=(NUM_ENVS,))
        keys = jax.random.split(key_step, NUM_ENVS)
        obs, state, reward, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            keys, state, action, params
        )
        return (state, total + reward.sum()), None

    (state, total), _ = jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(key_steps, NUM_STEPS))
    return total


t0 = time.perf_counter()
compiled = jax.jit(run).lower(jax.random.key(0), params).compile()
print(f"compiled in {time.perf_counter() - t0:.1f} s")
compiled(jax.random.key(0), params).block_until_ready()  # first run: allocations

t0 = time.perf_counter()
total = compiled(jax.random.key(1), params).block_until_ready()
seconds = time.perf_counter() - t0
steps = NUM_ENVS * NUM_STEPS
print(f"{steps:,} steps in {seconds:.3f} s: {steps / seconds:,.0f} steps/s (compilation excluded)")
print(f"targets reached by the random policy: {int(total):,}")"""),
    ("md", """\
## Watch a rollout

`jaxenvs.rollout.rollout` runs a policy `(key, obs) -> action` inside a jitted `scan` and records
the states; `render_frames` renders them in one vmapped call and `save_gif` writes the GIF."""),
    ("code", """\
from IPython.display import Image, display

from jaxenvs.rendering.io import render_frames, save_gif
from jaxenvs.rollout import episode_stats, random_policy, rollout

traj = rollout(env, jax.random.key(2), random_policy(env), num_steps=20 if QUICK else 60)
frames = render_frames(env, traj.state)  # uint8[T, 512, 512, 3]
print("frames:", frames.dtype, frames.shape)
for episode in episode_stats(traj, include_unfinished=True):
    print(episode)

OUT = pathlib.Path("notebook_outputs")  # pictures go here (gitignored), not into the working folder
OUT.mkdir(exist_ok=True)
gif = save_gif(frames, OUT / "grid_world_random.gif", fps=8)
display(Image(filename=str(gif), width=256))"""),
    ("md", """\
## Two agents: HurdleRace

Multi-agent environments keep the same functions, with the agents on a leading axis: the
observation, the action and the reward have one entry per agent, while `terminated` and
`truncated` are shared by the episode. `action_space()` is the space of ONE agent. In HurdleRace
(POSGGym's tutorial) each runner sees only whether a hurdle is right ahead, and chooses RUN (0)
or JUMP (1)."""),
    ("code", """\
from jaxenvs.envs.hurdle_race import HURDLE, JUMP, RUN

race = jaxenvs.make("HurdleRace-v0")
print(race, "agents:", race.agents)
print("one runner's actions:", race.action_space(), " observations:", race.observation_space())

obs, state = race.reset(jax.random.key(3))
print("\\nobs per runner (1 = hurdle ahead):", obs.tolist())
print(race.render_text(state))
obs, state, reward, terminated, truncated, info = race.step(jax.random.key(4), state, jnp.array([RUN, JUMP]))
print("\\nrunner 0 RUNs, runner 1 JUMPs -> positions", info["pos"].tolist(), "rewards", reward.tolist(),
      "terminated", bool(terminated))
print(race.render_text(state))"""),
    ("md", """\
A policy for a multi-agent environment returns one action per agent. Here runner 0 jumps exactly
when a hurdle is ahead and runner 1 plays at random, in 1,000 races at once:"""),
    ("code", """\
def jumper_vs_random(key, obs):
    \"\"\"Runner 0 jumps exactly when a hurdle is ahead; runner 1 picks RUN or JUMP at random.\"\"\"
    jumper = jnp.where(obs[0] == HURDLE, JUMP, RUN)
    return jnp.stack([jumper, race.action_space().sample(key)])


traj = rollout(race, jax.random.key(5), jumper_vs_random, num_steps=50, num_envs=1_000)
episodes = episode_stats(traj)
outcomes = np.sign([episode.returns[0] for episode in episodes])
print(f"{len(episodes):,} races finished: runner 0 won {np.mean(outcomes > 0):.0%}, "
      f"lost {np.mean(outcomes < 0):.0%}, drew {np.mean(outcomes == 0):.0%}")

one = rollout(race, jax.random.key(6), jumper_vs_random, num_steps=12)
gif = save_gif(render_frames(race, one.state), OUT / "hurdle_race.gif", fps=race.render_fps)
display(Image(filename=str(gif)))"""),
    ("md", """\
Next: `02_train_ppo.ipynb` trains PPO on these environments in one compiled program, and
`03_custom_env.ipynb` writes a new environment from scratch."""),
]

TRAIN_PPO = [
    ("md", f"""\
# Train PPO on jaxenvs environments

The trainer in `train/ppo.py` follows PureJaxRL: `make_trainer(config).train` (PureJaxRL's
`make_train(config)`) is a pure function `train(key) -> (runner, metrics)`, compiled as ONE
program that steps the environments, computes advantages and updates the network. `jax.vmap`
over keys trains several seeds in one call. This notebook trains GridWorld and HurdleRace with the
tuned defaults of `train/configs.py` (GridWorld on several seeds at once), plots the learning
curves, shows the trained policies and evaluates them with `train/grading.py`.

{RUNNING} Here quick mode trains fewer seeds: the tuned budgets themselves run in about a second
once compiled, even on a CPU, and compiling does not get cheaper with a smaller budget."""),
    ("code", SETUP),
    ("code", """\
import time

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, display

from jaxenvs.train.configs import get_config
from jaxenvs.train.grading import evaluate, evaluate_params
from jaxenvs.train.app.plotting import policy_gif
from jaxenvs.train.trainers import make_trainer

NUM_SEEDS = 2 if QUICK else 4


def carried_forward(values):
    \"\"\"float[seeds, updates] from float[updates] or float[seeds, updates]; an update in which no
    episode ended (NaN) repeats the previous update's value.\"\"\"
    v = np.array(values, np.float64)
    v = v.reshape(-1, v.shape[-1])
    for t in range(1, v.shape[1]):
        v[:, t] = np.where(np.isnan(v[:, t]), v[:, t - 1], v[:, t])
    return v


def plot_learning_curves(metrics, config, title):
    \"\"\"Mean episodic return and length per update against env steps; with several seeds, each
    seed's curve (thin), their mean (thick) and mean ± one standard deviation (band).\"\"\"
    steps = (np.arange(config.num_updates) + 1) * config.steps_per_update
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    for ax, name in zip(axes, ("episode_return", "episode_length")):
        v = carried_forward(metrics[name])
        if len(v) > 1:
            ax.plot(steps, v.T, lw=0.7, alpha=0.5)
            ax.fill_between(steps, v.mean(0) - v.std(0), v.mean(0) + v.std(0), alpha=0.2, color="k", lw=0)
        ax.plot(steps, v.mean(0), lw=2, color="k")
        ax.set(xlabel="env steps (per seed)", ylabel=name.replace("_", " "))
        ax.grid(alpha=0.3)
    fig.suptitle(title + (f" ({len(v)} seeds: mean ± std)" if len(v) > 1 else ""))
    fig.tight_layout()
    plt.show()


def show(result):
    \"\"\"One line of an evaluation's metrics.\"\"\"
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items())"""),
    ("md", """\
## GridWorld, several seeds in one call

`get_config(env_id)` merges the tuned defaults for that environment (`jaxenvs.train.tuned`)
over the `PPOConfig` defaults; keyword arguments override both. `trainer.train(key)` trains one
run; `jax.vmap(trainer.train)` trains one run per key in a single compiled program, and every
leaf of the runner and of the metrics gains a leading seed axis. (`jax.vmap(trainer.train)(keys,
hparams)` with `train.base.stack_hparams(config, n, lr=[...])` sweeps hyperparameters the same
way.) Compiling takes a few seconds; the training itself is one call."""),
    ("code", """\
config = get_config("GridWorld-v0")
print(config)
trainer = make_trainer(config)

keys = jax.random.split(jax.random.key(0), NUM_SEEDS)
t0 = time.perf_counter()
train_seeds = jax.jit(jax.vmap(trainer.train)).lower(keys).compile()
print(f"\\ncompiled in {time.perf_counter() - t0:.1f} s")
t0 = time.perf_counter()
runners, metrics = train_seeds(keys)
jax.block_until_ready(metrics)
seconds = time.perf_counter() - t0
steps = NUM_SEEDS * config.num_updates * config.steps_per_update
print(f"trained {NUM_SEEDS} seeds x {config.num_updates} updates, {steps:,} env steps in {seconds:.2f} s "
      f"({steps / seconds:,.0f} steps/s)")
plot_learning_curves(metrics, config, "PPO on GridWorld-v0")"""),
    ("md", """\
Every GridWorld episode that ends has reached the target, so the return stays at 1; the episode
length shows the learning, from a random walk down to the shortest path. The policy of seed 0,
acting greedily (`train.app.plotting.policy_gif` renders three episodes), and
the evaluation of every seed with `train.grading.evaluate` over 1,000 episodes: the success
rate, and the mean episode length against the mean Manhattan distance between agent and target
at the start (the shortest possible). The run is solved when every seed is."""),
    ("code", """\
params_seed0 = jax.tree.map(lambda x: x[0], runners.params)
OUT = pathlib.Path("notebook_outputs")  # pictures go here (gitignored), not into the working folder
OUT.mkdir(exist_ok=True)
gif = policy_gif(trainer, params_seed0, OUT / "grid_world_ppo.gif", jax.random.key(1))
display(Image(filename=str(gif), width=256))

result = evaluate(trainer, runners.params)
for seed, seed_result in enumerate(result["seeds"]):
    print(f"GridWorld-v0 seed {seed} evaluation:", show(seed_result))
print(f"GridWorld-v0 over {NUM_SEEDS} seeds: solved={result['solved']}")"""),
    ("md", """\
## HurdleRace: two agents, one shared policy

For a multi-agent environment the trainer folds the agent axis into the batch: both runners
act with the same network (self-play). One seed this time: `trainer.train(key)` is the whole
training run."""),
    ("code", """\
race_config = get_config("HurdleRace-v0")
race_trainer = make_trainer(race_config)
t0 = time.perf_counter()
race_runner, race_metrics = race_trainer.train(jax.random.key(0))
jax.block_until_ready(race_metrics)
print(f"trained {race_config.num_updates * race_config.steps_per_update:,} env steps in "
      f"{time.perf_counter() - t0:.1f} s (compilation included)")
plot_learning_curves(race_metrics, race_config, "PPO self-play on HurdleRace-v0")"""),
    ("md", """\
The return averaged over both runners is 0 in self-play (one wins, the other loses); the episode
length is what improves. `train.grading.evaluate_params` evaluates one set of params: the
fraction of decisions that jump exactly when a hurdle is ahead, and how often the policy beats a
runner that acts at random."""),
    ("code", """\
gif = policy_gif(race_trainer, race_runner.params, OUT / "hurdle_race_ppo.gif", jax.random.key(1))
display(Image(filename=str(gif)))
print("HurdleRace-v0 evaluation:", show(evaluate_params(race_trainer, race_runner.params)))"""),
]

CUSTOM_ENV = [
    ("md", f"""\
# Write your own environment

An environment is a class with two pure functions, `reset_env(key, params)` and
`step_env(key, state, action, params)`, and its spaces. Everything that changes from step to step
lives in a state dataclass; every number that does not change array shapes lives in a params
dataclass. This notebook builds a small game step by step in the style of the tutorials the
built-in environments come from, registers it, checks it against the jaxenvs contract, runs
10,000 copies at once and trains PPO on it.

{RUNNING}"""),
    ("code", SETUP),
    ("md", """\
## 1. The game: CoinCorridor

A corridor of `length` cells (8 by default) holds the agent and a coin.

* **reset**: the agent's cell is uniform over the corridor, the coin's uniform over the *other*
  cells;
* **actions**: `LEFT = 0` and `RIGHT = 1` move one cell; walking into a wall leaves the agent in
  place; out-of-range actions are clipped into `{0, 1}`;
* **reward**: `coin_reward` (1.0) on the step onto the coin, which ends the episode
  (`terminated`), minus `step_cost` (0.05) on every step, so shorter paths score more;
* **observation**: `int32[2]` = (agent's cell, coin's cell); `info["distance"]` is the number of
  cells between them;
* a time limit of 20 steps comes from the registration (`truncated`, never `terminated`).

## 2. Params and state

Params are numbers the dynamics read but never change; they may be traced values, so
`jax.vmap` over params works (e.g. a batch of step costs). The state holds what changes."""),
    ("code", """\
import jax.numpy as jnp
import numpy as np
from flax import struct

import jaxenvs
from jaxenvs import spaces
from jaxenvs.rendering import draw

LEFT, RIGHT = 0, 1


@struct.dataclass
class CorridorParams:
    coin_reward: float = 1.0  # reward on the step onto the coin
    step_cost: float = 0.05  # subtracted on every step; >= 0


@struct.dataclass
class CorridorState:
    agent: jax.Array  # int32 scalar: the agent's cell, 0 .. length - 1
    coin: jax.Array  # int32 scalar: the coin's cell"""),
    ("md", """\
## 3. The environment class

`reset_env` and `step_env` must be pure and branch-free (`jnp.where`, `jnp.clip`; no Python
`if` on array values) so that they work under `jit`, `vmap` and `scan`. Dtypes must be the same
after `reset` and after `step`: observations int32 here, reward float32, flags bool. `traits`
describes the game; `chance="deterministic"` promises that `step` ignores its key (the reset is
random). `render` draws with the jittable primitives of `jaxenvs.rendering.draw`, so frames of a
whole batch of states render in one call. The length fixes the frame's width, an array shape, so
it is a constructor argument rather than a params field."""),
    ("code", """\
class CoinCorridor(jaxenvs.Environment):
    \"\"\"Walk along a corridor of ``length`` cells to pick up a coin (rules in the cell above).\"\"\"

    traits = jaxenvs.Traits(num_agents=1, chance="deterministic", information="perfect", reward_style="step")
    render_fps = 4
    cell_px = 48  # side of one rendered cell, in pixels

    def __init__(self, length: int = 8):
        if not isinstance(length, int) or isinstance(length, bool) or length < 2:
            raise ValueError(f"CoinCorridor length must be an int >= 2, got {length!r}")
        self.length = length

    @property
    def default_params(self):
        return CorridorParams()

    def validate_params(self, params):
        if not params.step_cost >= 0:
            raise ValueError(f"CoinCorridor step_cost must be >= 0, got {params.step_cost!r}")

    def reset_env(self, key, params):
        key_agent, key_coin = jax.random.split(key)
        agent = jax.random.randint(key_agent, (), 0, self.length, jnp.int32)
        offset = jax.random.randint(key_coin, (), 0, self.length - 1, jnp.int32)
        coin = offset + (offset >= agent)  # uniform over the cells other than the agent's
        state = CorridorState(agent=agent, coin=coin)
        return self._obs(state), state

    def step_env(self, key, state, action, params):
        move = 2 * jnp.clip(action, LEFT, RIGHT) - 1  # LEFT -> -1, RIGHT -> +1
        state = state.replace(agent=jnp.clip(state.agent + move, 0, self.length - 1))
        terminated = state.agent == state.coin
        reward = (jnp.where(terminated, params.coin_reward, 0.0) - params.step_cost).astype(jnp.float32)
        truncated = jnp.array(False)  # the time limit is TimeLimit's job
        info = {"distance": jnp.abs(state.coin - state.agent)}
        return self._obs(state), state, reward, terminated, truncated, info

    def _obs(self, state):
        return jnp.stack([state.agent, state.coin])

    def observation_space(self, params=None):
        return spaces.Box(0, self.length - 1, (2,), np.int32)

    def action_space(self, params=None):
        return spaces.Discrete(2)

    def render(self, state, params=None):
        \"\"\"uint8[cell_px, length * cell_px, 3]: black walls, grey cell borders, a yellow coin
        and a blue agent.\"\"\"
        px, width = self.cell_px, self.length * self.cell_px
        frame = draw.canvas(px, width)
        ys, xs = draw.pixel_grid(px, width)
        borders = jnp.any(jnp.abs(xs[..., None] - px * jnp.arange(1, self.length)) <= 1, axis=-1)
        frame = draw.paint(frame, borders, draw.GREY)
        walls = (ys < 3) | (ys > px - 3) | (xs < 3) | (xs > width - 3)
        frame = draw.paint(frame, walls, draw.BLACK)
        frame = draw.fill_circle(frame, (state.coin + 0.5) * px, px / 2, px / 4, draw.YELLOW)
        return draw.fill_circle(frame, (state.agent + 0.5) * px, px / 2, px / 3, draw.BLUE)

    def render_text(self, state, params=None):
        \"\"\"One line: 'A' the agent, '$' the coin, '.' an empty cell.\"\"\"
        agent, coin = int(state.agent), int(state.coin)
        return "".join("A" if i == agent else "$" if i == coin else "." for i in range(self.length))"""),
    ("md", """\
## 4. Try it by hand

The class works on its own, before any registration: reset, then walk towards the coin."""),
    ("code", """\
import matplotlib.pyplot as plt

game = CoinCorridor()
obs, state = game.reset(jax.random.key(0))
print("reset:", obs.tolist(), game.render_text(state))
toward_coin = RIGHT if int(state.coin) > int(state.agent) else LEFT
done = False
while not done:
    obs, state, reward, terminated, truncated, info = game.step(jax.random.key(0), state, toward_coin)
    done = bool(terminated)
    print(f"step:  {obs.tolist()} {game.render_text(state)}  reward={float(reward):+.2f} "
          f"terminated={done} distance={int(info['distance'])}")

plt.figure(figsize=(6, 1))
plt.imshow(np.asarray(game.render(game.reset(jax.random.key(1))[1])))
plt.axis("off")
plt.show()"""),
    ("md", """\
## 5. Register it and check the contract

An id has the form `[namespace/]Name-vN`. Registering gives the game its time limit and
auto-reset through `jaxenvs.make`, which also validates params given as keyword arguments. In a
package you would register `"mypackage.corridor:CoinCorridor"` (an import path) in the package's
`__init__`, and `jaxenvs.make("mypackage.corridor:tutorial/CoinCorridor-v0")` would import it
first.

`jaxenvs.check_env` runs the environment the way learners do (`jit`, `vmap` over keys and over
params, `scan`, repeated calls) and raises an `EnvCheckError` naming the broken rule and the leaf
at fault, e.g. a reward that is float64 or a state leaf whose dtype changes after a step."""),
    ("code", """\
ENV_ID = "tutorial/CoinCorridor-v0"
jaxenvs.registry.pop(ENV_ID, None)  # re-running this cell replaces an earlier registration
jaxenvs.register(ENV_ID, CoinCorridor, max_episode_steps=20)

env = jaxenvs.make(ENV_ID)
print(env)
report = jaxenvs.check_env(env)
print(f"check_env passed: {len(report.rules)} rules, {report.num_envs} envs x {report.num_steps} random steps "
      f"({report.terminated} terminations, {report.truncated} truncations)")

try:
    jaxenvs.make(ENV_ID, step_cost=-1.0)
except ValueError as error:
    print("make(..., step_cost=-1.0) raises ValueError:", error)"""),
    ("md", """\
## 6. 10,000 corridors at once

`jax.vmap` over keys: 10,000 resets, then one step RIGHT in each. The coin is right next to the
agent on its right with probability 1/length, so about 10,000 / 8 = 1,250 coins are picked up.
`vmap` over params works the same way: here each corridor gets its own step cost."""),
    ("code", """\
N = 10_000
keys = jax.random.split(jax.random.key(1), N)
obs, state = jax.vmap(env.reset)(keys)
print("observations:", obs.dtype, obs.shape)
obs, state, reward, terminated, truncated, info = jax.vmap(env.step)(keys, state, jnp.full(N, RIGHT))
print(f"one step RIGHT: {int(terminated.sum()):,} coins picked up (expected about {N / 8:,.0f})")

step_costs = CorridorParams(coin_reward=jnp.ones(N), step_cost=jnp.linspace(0.0, 0.1, N))
_, _, reward, terminated, _, _ = jax.vmap(env.step)(keys, state, jnp.full(N, LEFT), step_costs)
missed = ~np.asarray(terminated)
print("one step LEFT, step costs 0 .. 0.1: reward == -step_cost wherever no coin was picked up:",
      np.allclose(reward[missed], -step_costs.step_cost[missed]))"""),
    ("md", """\
## 7. Train PPO on it

The trainer only needs the registered id: `get_config(ENV_ID, ...)` takes the `PPOConfig`
defaults (there are no tuned ones for a new environment) with the overrides given here.
`make_trainer(config)` builds the environment with `jaxenvs.make(ENV_ID)`; its `train` is the
pure training function, and the trainer also holds the policy that the evaluation below acts
with."""),
    ("code", """\
import time

from IPython.display import Image, display

from jaxenvs.train.configs import get_config
from jaxenvs.train.grading import evaluate_params, first_episodes
from jaxenvs.train.app.plotting import policy_gif
from jaxenvs.train.trainers import make_trainer

config = get_config(ENV_ID, total_timesteps=10_000 if QUICK else 30_000, num_envs=16, num_steps=32, lr=1e-3)
trainer = make_trainer(config)
t0 = time.perf_counter()
runner, metrics = trainer.train(jax.random.key(0))
jax.block_until_ready(metrics)
print(f"trained {config.num_updates * config.steps_per_update:,} env steps in {time.perf_counter() - t0:.1f} s "
      "(compilation included)")

returns = np.array(metrics["episode_return"])
steps = (np.arange(config.num_updates) + 1) * config.steps_per_update
plt.figure(figsize=(6, 3))
plt.plot(steps, returns)
plt.xlabel("env steps")
plt.ylabel("mean episodic return")
plt.title("PPO on " + ENV_ID)
plt.grid(alpha=0.3)
plt.show()"""),
    ("md", """\
## 8. Did it learn?

The greedy policy against a uniformly random one, over the same 1,000 initial states (the same
key), without auto-reset so that each rollout holds one episode. The best possible return of an
episode is `coin_reward - step_cost * distance`: the agent walks straight to the coin."""),
    ("code", """\
from jaxenvs.rollout import random_policy, rollout

eval_key = jax.random.key(12345)
trained = evaluate_params(trainer, runner.params, eval_key)

one_episode_env = jaxenvs.make(ENV_ID, autoreset=False)
traj = rollout(one_episode_env, eval_key, random_policy(one_episode_env), num_steps=20, num_envs=1_000)
random_return = first_episodes(traj)["returns"].mean()
start = np.asarray(traj.obs[0])  # int32[1000, 2]: (agent, coin) at reset
params = env.default_params
best = np.mean(params.coin_reward - params.step_cost * np.abs(start[:, 1] - start[:, 0]))

print(f"mean return over 1,000 episodes: trained {trained['mean_return']:.3f}, random {random_return:.3f}, "
      f"best possible {best:.3f}")
print(f"mean episode length: trained {trained['mean_length']:.2f}, "
      f"mean distance at the start {np.mean(np.abs(start[:, 1] - start[:, 0])):.2f}")

OUT = pathlib.Path("notebook_outputs")  # pictures go here (gitignored), not into the working folder
OUT.mkdir(exist_ok=True)
gif = policy_gif(trainer, runner.params, OUT / "coin_corridor_ppo.gif", jax.random.key(2), num_episodes=4)
display(Image(filename=str(gif)))"""),
]

NOTEBOOKS = {
    "01_quickstart.ipynb": QUICKSTART,
    "02_train_ppo.ipynb": TRAIN_PPO,
    "03_custom_env.ipynb": CUSTOM_ENV,
}

METADATA = {
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
    "language_info": {"name": "python"},
    "accelerator": "GPU",  # Colab opens the notebook on a GPU runtime
    "colab": {"provenance": []},
}


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` (a key of ``NOTEBOOKS``), without outputs."""
    nb = nbformat.v4.new_notebook(metadata=METADATA)
    for i, (kind, source) in enumerate(NOTEBOOKS[name]):
        make = nbformat.v4.new_markdown_cell if kind == "md" else nbformat.v4.new_code_cell
        if i == 0:  # the title cell opens with the link that runs the notebook on Colab
            source = COLAB_LINK.format(repository=REPOSITORY, name=name) + "\n\n" + source
        nb.cells.append(make(source, id=f"cell-{i:02d}"))
    nbformat.validate(nb)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a notebook is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        text = nbformat.writes(build(name)) + "\n"
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
