"""The reference side of `verify_port`: one small interface, `Reference`, between the original
environment and the comparison.

`verify_port` asks a reference for its spaces, a name and versions for the certificate, a
fingerprint (what a `ReferenceCache` keys on besides the factory), its episodes under the port's
policy, extra initial observations, copies to resample a step from, and -- where it has one -- its
exact transition model. `GymReference` serves a `gymnasium.Env` or a `pettingzoo.ParallelEnv`
built by a zero-argument factory; a turn-based original (an AEC game, an OpenSpiel game) plugs in
as another subclass of `Reference`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any, Callable

import numpy as np

CHUNK = 64  # reference episodes run in lockstep

__all__ = ["Reference", "GymReference", "TransitionModel", "Side", "ReferenceCache", "episode_seeds"]


@dataclasses.dataclass
class Side:
    """One side's episodes, flattened: `obs0` [N, D]; per step `obs`, `nobs` [N, T, D], `act`
    [N, T, A] (float64), `rew` [N, T, agents], `term`, `trunc`, `alive` [N, T] (bool)."""

    obs0: np.ndarray
    obs: np.ndarray
    act: np.ndarray
    nobs: np.ndarray
    rew: np.ndarray
    term: np.ndarray
    trunc: np.ndarray
    alive: np.ndarray

    def __post_init__(self):
        if self.obs0.ndim == 1:
            self.obs0 = self.obs0[:, None]

    def __len__(self) -> int:
        return len(self.obs0)

    def outcome(self) -> np.ndarray:
        """Per episode 0 (terminated), 1 (truncated) or 2 (running at the horizon)."""
        ended = self.alive & (self.term | self.trunc)
        term = np.any(ended & self.term, axis=1)
        trunc = np.any(ended & self.trunc, axis=1)
        return np.where(term, 0, np.where(trunc, 1, 2))

    def returns(self) -> np.ndarray:
        return np.sum(self.rew * self.alive[..., None], axis=1)

    @staticmethod
    def concat(parts: list["Side"]) -> "Side":
        return Side(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in dataclasses.fields(Side)))


@dataclasses.dataclass(frozen=True)
class TransitionModel:
    """Exact dynamics keyed by the port's (integer) observations: `transitions[obs][action]` is a
    list of `(probability, next_obs, reward, terminated)` (Gymnasium's toy-text `P` format), and
    `initial` (or None) the probabilities of the initial observations `0 .. len - 1`."""

    transitions: Any
    initial: np.ndarray | None
    source: str

    def outcomes(self, obs: int, action: int) -> list[tuple[float, int, float, bool]] | None:
        try:
            table = self.transitions(obs, action) if callable(self.transitions) else self.transitions[obs][action]
        except (KeyError, IndexError):
            return None
        return [(float(p), int(s), float(r), bool(t)) for p, s, r, t in table]

    def fingerprint(self) -> str:
        if callable(self.transitions):
            return f"callable {getattr(self.transitions, '__qualname__', type(self.transitions).__name__)}"
        h = hashlib.sha256(repr(sorted((k, sorted(v.items())) for k, v in self.transitions.items())).encode())
        if self.initial is not None:
            h.update(np.asarray(self.initial, np.float64).tobytes())
        return h.hexdigest()[:16]


def episode_seeds(seed: int, start: int, stop: int) -> np.ndarray:
    """The reset seeds of reference episodes `start .. stop - 1` (a prefix-stable stream)."""
    return np.random.default_rng(seed).integers(0, 2**31 - 1, size=stop)[start:stop]


class Reference:
    """The interface `verify_port` uses; subclasses wrap one kind of original environment.

    `multi`: observations and rewards per agent (stacked in `agents` order). `run` plays episodes
    `start .. stop - 1` with the port's policy (`act(t, obs_rows, start, count) -> actions`) and,
    for the steps in `wanted` (`{episode: {t, ...}}`), records `(episode, t, port state,
    action, [outcomes])` with `resamples` outcomes from copies of the reference at that state.
    """

    multi: bool = False
    agents: list = []

    def observation_space(self):
        raise NotImplementedError

    def action_space(self):
        raise NotImplementedError

    def describe(self) -> tuple[str, dict]:
        raise NotImplementedError

    def fingerprint(self) -> tuple:
        raise NotImplementedError

    def transition_model(self) -> TransitionModel | None:
        return None

    def initial_observations(self, seed: int, start: int, stop: int) -> np.ndarray:
        raise NotImplementedError

    def run(self, seed, start, stop, horizon, act, shapes, wanted, state_to_jax, resamples, rng):
        raise NotImplementedError


class GymReference(Reference):
    """A `gymnasium.Env` (or, `multi`, a `pettingzoo.ParallelEnv`) built by `factory()`.

    `convert_obs(obs) -> float64[D]` flattens a reference observation as the port's;
    `convert_action(a)` turns a port action (numpy) into the reference's; `check_action(a_ref)`
    raises when a converted action is outside the reference's space.
    """

    def __init__(self, factory: Callable[[], Any], probe, multi: bool, convert_obs, convert_action, check_action):
        self.factory, self.probe, self.multi = factory, probe, multi
        self.agents = list(probe.possible_agents) if multi else []
        self.convert_obs, self.convert_action, self.check_action = convert_obs, convert_action, check_action
        self._resetter = None
        self._pool: list = []  # reference envs reused across episodes (reset with each episode's seed)

    def _space(self, which: str):
        if not self.multi:
            return getattr(self.probe, which)
        return getattr(self.probe, which)(self.agents[0])

    def observation_space(self):
        return self._space("observation_space")

    def action_space(self):
        return self._space("action_space")

    def describe(self) -> tuple[str, dict]:
        e = self.probe
        spec = getattr(e, "spec", None)
        name = getattr(spec, "id", None) or type(getattr(e, "unwrapped", e)).__qualname__
        kwargs = dict(getattr(spec, "kwargs", None) or {})
        kwargs = {k: v for k, v in kwargs.items() if k != "render_mode"}
        if kwargs:
            name += " " + ", ".join(f"{k}={v!r}" for k, v in sorted(kwargs.items()))
        versions = {}
        for mod in ("gymnasium", "pettingzoo"):
            try:
                versions[mod] = __import__(mod).__version__
            except ImportError:
                pass
        module = type(getattr(e, "unwrapped", e)).__module__
        versions["reference module"] = module
        return name, versions

    def fingerprint(self) -> tuple:
        e = self.probe
        un = getattr(e, "unwrapped", e)
        spec = getattr(e, "spec", None)
        model = self.transition_model()
        return (
            type(un).__module__,
            type(un).__qualname__,
            repr(self.observation_space()),
            repr(self.action_space()),
            repr(sorted((getattr(spec, "kwargs", None) or {}).items())),
            model.fingerprint() if model is not None else None,
        )

    def transition_model(self) -> TransitionModel | None:
        """Gymnasium toy-text's `env.unwrapped.P` (with `initial_state_distrib`), when present and
        shaped as `{state: {action: [(prob, next_state, reward, terminated), ...]}}`."""
        if self.multi:
            return None
        un = getattr(self.probe, "unwrapped", self.probe)
        table = getattr(un, "P", None)
        if not isinstance(table, dict) or not table:
            return None
        try:
            for by_action in table.values():
                for outs in by_action.values():
                    for p, s, r, t in outs:
                        float(p), int(s), float(r), bool(t)
        except (TypeError, ValueError, AttributeError):
            return None
        initial = getattr(un, "initial_state_distrib", None)
        initial = None if initial is None else np.asarray(initial, np.float64)
        return TransitionModel(table, initial, f"{type(un).__qualname__}.P (the reference's transition table)")

    def initial_observations(self, seed: int, start: int, stop: int) -> np.ndarray:
        if self._resetter is None:
            self._resetter = self.factory()
        e = self._resetter
        return np.stack([self.convert_obs(e.reset(seed=int(s))[0]) for s in episode_seeds(seed, start, stop)])

    def _step(self, e, a_ref, rng):
        """Step `e` (reseeded from `rng` when given: a copy being resampled)."""
        if rng is not None and hasattr(e, "np_random"):
            e.np_random = np.random.default_rng(int(rng.integers(0, 2**31 - 1)))
        if self.multi:
            o, rews, terms, truncs, _ = e.step(a_ref)
            reward = np.array([rews.get(a, 0.0) for a in self.agents], np.float64)
            term = any(bool(terms.get(a, False)) for a in self.agents)
            trunc = any(bool(truncs.get(a, False)) for a in self.agents)
            if not all(a in o for a in self.agents):
                raise ValueError("verify_port: a ParallelEnv step returned observations for only some agents")
        else:
            o, reward, term, trunc, _ = e.step(a_ref)
            reward = np.array([float(reward)])
        reward = reward.astype(np.float32).astype(np.float64)  # the port's float32 rewards, summed alike
        return self.convert_obs(o), reward, bool(term), bool(trunc)

    def run(self, seed, start, stop, horizon, act, shapes, wanted, state_to_jax, resamples, rng):
        """Episodes in lockstep, `CHUNK` at a time: the policy is one compiled call per step for
        the chunk, and the chunk's `CHUNK` reference envs are built once and reset (with the
        episode's seed) for every episode."""
        n = stop - start
        seeds = episode_seeds(seed, start, stop)
        obs_dim, act_dim, agents = shapes
        side = Side(
            obs0=np.zeros((n, obs_dim)),
            obs=np.zeros((n, horizon, obs_dim)),
            act=np.zeros((n, horizon, act_dim)),
            nobs=np.zeros((n, horizon, obs_dim)),
            rew=np.zeros((n, horizon, agents)),
            term=np.zeros((n, horizon), bool),
            trunc=np.zeros((n, horizon), bool),
            alive=np.zeros((n, horizon), bool),
        )
        while len(self._pool) < min(n, CHUNK):
            self._pool.append(self.factory())
        recorded = []
        for lo in range(0, n, CHUNK):
            count = min(CHUNK, n - lo)
            envs = self._pool[:count]
            cur = np.zeros((CHUNK, obs_dim))
            cur[:count] = [self.convert_obs(e.reset(seed=int(sd))[0]) for e, sd in zip(envs, seeds[lo : lo + count])]
            side.obs0[lo : lo + count] = cur[:count]
            done = np.zeros(count, bool)
            for t in range(horizon):
                if done.all():
                    break
                actions = act(t, cur, start + lo, CHUNK)
                for j in np.flatnonzero(~done):
                    i, e, a = lo + j, envs[j], actions[j]
                    a_ref = self.convert_action(a)
                    self.check_action(a, a_ref)
                    if t in wanted.get(start + i, ()):
                        core = state_to_jax(e)
                        outs = [self._step(copy.deepcopy(e), a_ref, rng) for _ in range(resamples - 1)]
                        out = self._step(e, a_ref, None)
                        recorded.append((start + i, t, core, a, outs + [out]))
                    else:
                        out = self._step(e, a_ref, None)
                    nobs, reward, term, trunc = out
                    side.obs[i, t] = cur[j]
                    side.act[i, t] = np.asarray(a, np.float64).reshape(act_dim)
                    side.nobs[i, t] = nobs
                    side.rew[i, t] = reward
                    side.term[i, t], side.trunc[i, t], side.alive[i, t] = term, trunc, True
                    cur[j] = nobs
                    done[j] = term or trunc
        return side, recorded


class ReferenceCache:
    """Reference rollouts kept between `verify_port` calls that pass this object as
    `reference_cache=` (checking several ports -- mutants, a port being mended -- against one
    reference runs the reference once).

    A run is reused only for the same factory object, conversions, policy, seed, horizon and
    episode range, and the same reference fingerprint (class, spaces, spec kwargs, transition
    table). Passing the cache is the caller's statement that the factory's behaviour did not change
    otherwise; the report says when rollouts came from the cache. Without `reference_cache`
    nothing is kept: every call runs the reference afresh.
    """

    def __init__(self, max_runs: int = 32):
        self.max_runs = max_runs
        self._runs: dict = {}
        self.hits = 0

    def get(self, key):
        hit = self._runs.get(key)
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, key, value):
        self._runs[key] = value
        while len(self._runs) > self.max_runs:
            self._runs.pop(next(iter(self._runs)))

    def clear(self):
        self._runs.clear()

    def __len__(self) -> int:
        return len(self._runs)
