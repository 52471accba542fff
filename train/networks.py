"""Actor-critic MLPs (flax.linen) and the two action distributions PPO needs.

Discrete action spaces get a categorical policy over ``n`` logits. Box action spaces get a
diagonal Gaussian in a *normalised* action space: the network's mean and a state-independent
log-std describe ``u``; the environment receives ``low + (clip(u, -1, 1) + 1) / 2 * (high - low)``,
so actions always respect the Box bounds. Log-probabilities and entropies are those of the
unclipped Gaussian sample ``u`` (the sample the policy really drew), as in CleanRL and SB3; the
clip is part of the environment from the learner's point of view. The greedy action is the
clipped mean.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import prng, spaces

__all__ = ["ActorCritic", "BoardTorso", "board_layout", "Categorical", "Gaussian", "policy_head_for"]


class Categorical:
    """Categorical distribution over ``n`` actions; ``logits`` float32[..., n]."""

    def __init__(self, logits):
        self.logits = jax.nn.log_softmax(logits)

    def sample(self, key):
        return prng.categorical(key, self.logits).astype(jnp.int32)  # jax.random.categorical's draw, fused

    def log_prob(self, a):
        return jnp.take_along_axis(self.logits, a[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self):
        return -jnp.sum(jnp.exp(self.logits) * self.logits, axis=-1)

    def mode(self):
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def probs(self):
        return jnp.exp(self.logits)

    def kl(self, other: "Categorical"):
        """KL(self || other) per row, float32[...]."""
        return jnp.sum(jnp.exp(self.logits) * (self.logits - other.logits), axis=-1)


class Gaussian:
    """Diagonal Gaussian; ``mean`` float32[..., d], ``log_std`` float32[d] (broadcast)."""

    def __init__(self, mean, log_std):
        self.mean = mean
        self.log_std = jnp.broadcast_to(log_std, mean.shape)

    def sample(self, key):
        return self.mean + jnp.exp(self.log_std) * jax.random.normal(key, self.mean.shape)

    def log_prob(self, u):
        z = (u - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * math.log(2 * math.pi), axis=-1)

    def entropy(self):
        return jnp.sum(self.log_std + 0.5 * (1.0 + math.log(2 * math.pi)), axis=-1)

    def mode(self):
        return self.mean

    def kl(self, other: "Gaussian"):
        """KL(self || other) per row, float32[...]."""
        var_ratio = jnp.exp(2 * (self.log_std - other.log_std))
        z = (self.mean - other.mean) * jnp.exp(-other.log_std)
        return jnp.sum(other.log_std - self.log_std + 0.5 * (var_ratio + z**2 - 1.0), axis=-1)


def orthogonal(scale: float = 1.0):
    """Orthogonal kernel initialiser (flax's ``nn.initializers.orthogonal``) without a QR call.

    The same draw as JAX's: a standard normal matrix ``A`` of shape (rows, cols), or its transpose
    when rows < cols, whose QR factor ``Q`` (signs fixed so that ``R``'s diagonal is positive) is
    returned times ``scale``. Here ``Q`` comes from Gram-Schmidt, applied twice per column for
    float32 accuracy: the same matrix up to rounding. The reason is XLA:CPU (jax 0.10.x): a
    seed-vmapped program that runs LAPACK's QR beside the network's first forward pass hangs forever
    under the concurrency-optimized scheduler, whatever `compiler_options` say, so the trainer's
    programs must not contain one (see `jaxenvs.train.xla`).
    """

    def init(key, shape, dtype=jnp.float32):
        if len(shape) != 2:
            raise ValueError(f"orthogonal: a 2-d kernel shape is needed, got {shape}")
        return _orthogonal(key, tuple(int(n) for n in shape), jnp.dtype(dtype), float(scale))

    return init


@functools.partial(jax.jit, static_argnums=(1, 2, 3), inline=True)
def _orthogonal(key, shape, dtype, scale):
    """`orthogonal`'s draw, as one jitted function of its static shape, dtype and scale: flax checks
    every parameter's shape on every ``apply`` by tracing its initialiser (``jax.eval_shape``), and
    the trace of a jitted function is cached, so a program that applies the network several times
    traces the Gram-Schmidt loop once per kernel shape instead of once per kernel and apply (the
    cached trace is inlined into the calling program's, so its values are the same)."""
    rows, cols = shape
    transpose = rows < cols
    m, k = (cols, rows) if transpose else (rows, cols)
    a = prng.normal(key, (m, k))

    def column(j, q):
        v = a[:, j]
        for _ in range(2):  # classical Gram-Schmidt, twice ("CGS2")
            v = v - q @ (q.T @ v)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    q = jax.lax.fori_loop(0, k, column, jnp.zeros((m, k), jnp.float32))
    q = q.T if transpose else q
    return (scale * q).astype(dtype)


class _MLP(nn.Module):
    hidden_sizes: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x):
        act = {"tanh": nn.tanh, "relu": nn.relu}[self.activation]
        for h in self.hidden_sizes:
            x = act(nn.Dense(h, kernel_init=orthogonal(np.sqrt(2)))(x))
        return x


class BoardTorso(nn.Module):
    """A small convolutional torso for board games, on the flat float32[..., obs_dim] input: the
    ``board_shape`` (rows, cols, planes) cells starting at ``board_start`` are read as a board,
    ``channels`` 3x3 convolutions ("SAME" padding, so every cell keeps its place) run over it, and
    their flattened output joins the remaining inputs (e.g. the action mask) in a dense layer of
    ``hidden`` units. For Connect Four's flat observation (the mask's 7 values, then the 6 x 7 x 2
    planes) ``board_start=7, board_shape=(6, 7, 2)``."""

    board_start: int
    board_shape: Sequence[int]
    channels: Sequence[int] = (16, 16)
    hidden: int = 128
    activation: str = "relu"

    @nn.compact
    def __call__(self, x):
        act = {"tanh": nn.tanh, "relu": nn.relu}[self.activation]
        size = int(np.prod(self.board_shape))
        start, stop = self.board_start, self.board_start + size
        if x.shape[-1] < stop:
            raise ValueError(f"BoardTorso: a board of {tuple(self.board_shape)} from input {start} needs {stop} inputs, "
                             f"got {x.shape[-1]}")
        batch = x.shape[:-1]
        h = x[..., start:stop].reshape((-1, *self.board_shape))
        for c in self.channels:
            h = act(nn.Conv(c, (3, 3), padding="SAME")(h))
        h = h.reshape(batch + (-1,))
        rest = jnp.concatenate([x[..., :start], x[..., stop:]], axis=-1)
        return act(nn.Dense(self.hidden, kernel_init=orthogonal(np.sqrt(2)))(jnp.concatenate([h, rest], axis=-1)))


def board_layout(space) -> tuple[int, tuple[int, ...]] | None:
    """``(board_start, board_shape)`` of the one 3-d Box (rows, cols, planes) in an observation space
    as `jaxenvs.spaces.flatten` lays it out (a Dict's keys in order: Connect Four's
    ``{"action_mask", "observation"}`` gives ``(7, (6, 7, 2))``); None when there is no such Box."""
    if isinstance(space, spaces.Box):
        return (0, tuple(space.shape)) if len(space.shape) == 3 else None
    if isinstance(space, spaces.Dict):
        start = 0
        for key in space.keys():
            sub = space[key]
            if isinstance(sub, spaces.Box) and len(sub.shape) == 3:
                return start, tuple(sub.shape)
            start += spaces.flatdim(sub)
    return None


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs on a flat float32[..., obs_dim] input.

    Returns ``(policy_out, value)``: ``policy_out`` is float32[..., n] logits (discrete) or the
    float32[..., d] Gaussian mean (continuous); ``value`` is float32[...]. The continuous policy
    also owns a ``log_std`` parameter float32[d] (initialised to ``log_std_init``). With
    ``critic=False`` there is no critic (a policy alone, e.g. beside TRPO's linear baseline) and
    ``value`` is 0.
    """

    action_dim: int
    continuous: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    log_std_init: float = -0.5
    critic: bool = True
    board: tuple | None = None  # (board_start, board_shape): both trunks are a `BoardTorso` then the MLP

    def _trunk(self, name, x):
        if self.board is None:
            return _MLP(self.hidden_sizes, self.activation, name=name)(x)
        start, shape = self.board  # the torso's dense layer is the first hidden layer, the MLP the rest
        x = BoardTorso(start, tuple(shape), hidden=self.hidden_sizes[0] if self.hidden_sizes else 128,
                       name=f"{name}_board")(x)
        return _MLP(tuple(self.hidden_sizes[1:]), self.activation, name=name)(x)

    @nn.compact
    def __call__(self, x):
        h = self._trunk("actor", x)
        out = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), name="policy_head")(h)
        if self.critic:
            v = self._trunk("critic", x)
            v = nn.Dense(1, kernel_init=orthogonal(1.0), name="value_head")(v)[..., 0]
        else:
            v = jnp.zeros(x.shape[:-1], jnp.float32)
        if self.continuous:
            log_std = self.param("log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,))
            return (out, log_std), v
        return out, v


def policy_head_for(space: spaces.Space):
    """``(action_dim, continuous, dist_fn, to_env_action)`` for an action space.

    ``dist_fn(policy_out)`` builds the distribution; ``to_env_action(sample)`` maps a sample (or
    mode) of it to the action the environment takes (int32 index, or the Box-bounded float32
    vector). Raises TypeError for spaces PPO here does not handle.
    """
    if isinstance(space, spaces.Discrete):
        start = space.start
        return space.n, False, Categorical, lambda a: (a + start).astype(jnp.int32)
    if isinstance(space, spaces.Box) and space.dtype.kind == "f":
        if not space.bounded or len(space.shape) != 1:
            raise TypeError(f"PPO needs a bounded 1-D float Box action space, got {space}")
        low, high = jnp.asarray(space.low), jnp.asarray(space.high)

        def to_env_action(u):
            a = low + (jnp.clip(u, -1.0, 1.0) + 1.0) * 0.5 * (high - low)
            return jnp.clip(a, low, high).astype(jnp.float32)  # guards against rounding past a bound

        return space.shape[0], True, lambda out: Gaussian(*out), to_env_action
    raise TypeError(f"PPO handles Discrete and bounded 1-D float Box action spaces, got {space}")
