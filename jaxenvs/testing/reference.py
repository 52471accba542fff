"""The reference side of `verify_port`: one small interface, `Reference`, between the original
environment and the comparison.

`verify_port` asks a reference for its spaces, a name and versions for the certificate, a
fingerprint (what a `ReferenceCache` keys on besides the factory), its episodes under the port's
policy (within a CPU budget), extra initial observations, copies to resample a step from, and --
where it has one -- its exact transition model. `GymReference` serves a `gymnasium.Env` or a
`pettingzoo.ParallelEnv` built by a zero-argument factory, called once. Turn-based originals are `TurnBasedReference`s: they play whole
games with random legal moves (`TurnBasedReference.play`) that the port then replays ply by ply --
`AECReference` serves a `pettingzoo.AECEnv`, `OpenSpielReference` a `pyspiel.Game` (explicit
chance included).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any, Callable

import numpy as np

CHUNK = 256  # reference episodes run in lockstep at most (one compiled policy call a step for all of them)
FIRST_CHUNK = 16  # ... the first chunk of a run: chunks double from here, so a budget that ends mid-chunk loses little

__all__ = [
    "Reference",
    "GymReference",
    "TurnBasedReference",
    "AECReference",
    "OpenSpielReference",
    "PgxReference",
    "is_pgx_env",
    "Games",
    "TransitionModel",
    "Side",
    "ReferenceCache",
    "episode_seeds",
]

MAX_PLIES = 10_000  # a reference game longer than this is refused (a game that never ends)


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

    def steps(self, t: int) -> "Side":
        """The same episodes with `t` steps each: cut, or padded with steps that are not alive."""
        def fit(name):
            x = getattr(self, name)
            if name == "obs0" or x.shape[1] == t:
                return x
            if x.shape[1] > t:
                return x[:, :t]
            return np.concatenate([x, np.zeros((x.shape[0], t - x.shape[1]) + x.shape[2:], x.dtype)], axis=1)

        return Side(*(fit(f.name) for f in dataclasses.fields(Side)))

    def head(self, n: int) -> "Side":
        """The first `n` episodes."""
        return Side(*(getattr(self, f.name)[:n] for f in dataclasses.fields(Side)))

    def trimmed(self) -> "Side":
        """Cut after the last step any episode is alive (at least one step): a horizon of 1000
        steps for episodes of one step would otherwise be carried, copied and pooled as padding."""
        used = np.flatnonzero(self.alive.any(axis=0))
        return self.steps(int(used[-1]) + 1 if len(used) else 1)

    @staticmethod
    def concat(parts: list["Side"]) -> "Side":
        t = max(p.alive.shape[1] for p in parts)  # parts trimmed to different lengths
        parts = [p.steps(t) for p in parts]
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
    """The interface `verify_port` uses; subclasses wrap one kind of original environment
    (`GymReference`; the turn-based `AECReference` and `OpenSpielReference` play whole games
    instead, see `TurnBasedReference`).

    `multi`: observations and rewards per agent (stacked in `agents` order). `run` plays episodes
    `start .. stop - 1` with the port's policy (`act(t, obs_rows, start, count) -> actions`) and,
    for the steps in `wanted` (`{episode: {t, ...}}`), records `(episode, t, port state,
    action, [outcomes])` with `resamples` outcomes from copies of the reference at that state.
    With a `budget` (`jaxenvs.testing.runs.Budget`) it stops once the budget is spent, returning
    a prefix of the episodes (at least `least`).
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

    def run(self, seed, start, stop, horizon, act, shapes, wanted, state_to_jax, resamples, rng, budget=None, least=0):
        raise NotImplementedError


class GymReference(Reference):
    """A `gymnasium.Env` (or, `multi`, a `pettingzoo.ParallelEnv`) built by `factory()`.

    The factory is called once, by `verify_port` (`probe`); the envs that run episodes side by
    side are deep copies of it (`copy.deepcopy`), each reset with its episode's seed, so an
    expensive factory is paid once. A reference that cannot be deep-copied runs its episodes one
    at a time on `probe` (the same episodes, more slowly; `notes` says so).

    `convert_obs(obs) -> float64[D]` flattens a reference observation as the port's;
    `convert_action(a)` turns a port action (numpy) into the reference's; `check_action(a_ref)`
    raises when a converted action is outside the reference's space.
    """

    def __init__(self, factory: Callable[[], Any], probe, multi: bool, convert_obs, convert_action, check_action):
        self.factory, self.probe, self.multi = factory, probe, multi
        self.agents = list(probe.possible_agents) if multi else []
        self.convert_obs, self.convert_action, self.check_action = convert_obs, convert_action, check_action
        self._pool: list = [probe]  # reference envs reused across episodes (reset with each episode's seed)
        self._copyable = True
        self.notes: list[str] = []

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

    def _envs(self, n: int) -> list:
        """`n` reference envs to run side by side (fewer, down to `probe` alone, when it cannot be
        deep-copied)."""
        while self._copyable and len(self._pool) < n:
            try:
                self._pool.append(copy.deepcopy(self.probe))
            except Exception as e:  # noqa: BLE001 -- whatever deepcopy raises (a C handle, a lock, a socket)
                self._copyable = False
                self.notes.append(f"the reference could not be deep-copied ({type(e).__name__}: {e}): its episodes ran "
                                  "one at a time")
        return self._pool[:n]

    def _reset(self, e, seed: int):
        try:
            out = e.reset(seed=int(seed))
        except TypeError as err:
            if "seed" in str(err):
                raise ValueError(
                    f"verify_port: the reference {type(e).__name__} follows the old gym API (reset() takes no seed: "
                    f"{err}); verify_port needs Gymnasium's (reset(seed=...) -> (obs, info), step -> (obs, reward, "
                    "terminated, truncated, info)): port the reference to gymnasium, or wrap it with shimmy's "
                    "GymV21CompatibilityV0 (pip install shimmy)"
                ) from err
            raise
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"verify_port: the reference's reset returned {type(out).__name__}, not (obs, info): an old gym API; "
                "port the reference to gymnasium, or wrap it with shimmy's GymV21CompatibilityV0 (pip install shimmy)"
            )
        return out[0]

    def initial_observations(self, seed: int, start: int, stop: int, budget=None) -> np.ndarray:
        """The initial observations of episodes `start .. stop - 1` (fewer when `budget` is spent
        first: the first ones)."""
        e, rows = self.probe, []
        for s in episode_seeds(seed, start, stop):
            if budget is not None and len(rows) % 256 == 0 and budget.spent():
                budget.stopped = budget.stopped or f"the budget ended after {len(rows):,} of {stop - start:,} extra resets"
                break
            rows.append(self.convert_obs(self._reset(e, s)))
        return np.stack(rows) if rows else np.zeros((0, 0))

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
            out = e.step(a_ref)
            if len(out) != 5:
                raise ValueError(
                    f"verify_port: the reference's step returned {len(out)} values, not Gymnasium's 5 (obs, reward, "
                    "terminated, truncated, info): an old gym API; port the reference to gymnasium, or wrap it with "
                    "shimmy's GymV21CompatibilityV0 (pip install shimmy)"
                )
            o, reward, term, trunc, _ = out
            return self.convert_obs(o), np.array([np.float32(reward)], np.float64), bool(term), bool(trunc)
        reward = reward.astype(np.float32).astype(np.float64)  # the port's float32 rewards, summed alike
        return self.convert_obs(o), reward, bool(term), bool(trunc)

    def run(self, seed, start, stop, horizon, act, shapes, wanted, state_to_jax, resamples, rng, budget=None, least=0):
        """Episodes in lockstep, in chunks of `FIRST_CHUNK` doubling up to `CHUNK` (the policy is
        one compiled call of `CHUNK` rows per step for the chunk; its envs are reset with the
        episode's seed for every episode). With a `budget`, no chunk starts once it is spent, and a
        chunk it runs out in is dropped (keeping only the episodes that ended first would favour
        short ones), except that the first `least` episodes are always run: the side returned may
        hold fewer than `stop - start` episodes, always a prefix."""
        n = stop - start
        seeds = episode_seeds(seed, start, stop)
        obs_dim, act_dim, agents = shapes
        # one chunk's buffers at a time, each trimmed to its longest episode: a horizon of 1,000 steps
        # for episodes of 8 would otherwise hold every episode at the horizon's length
        parts, recorded, lo, width = [], [], 0, FIRST_CHUNK

        def buffers(count):
            return Side(
                obs0=np.zeros((count, obs_dim)),
                obs=np.zeros((count, horizon, obs_dim)),
                act=np.zeros((count, horizon, act_dim)),
                nobs=np.zeros((count, horizon, obs_dim)),
                rew=np.zeros((count, horizon, agents)),
                term=np.zeros((count, horizon), bool),
                trunc=np.zeros((count, horizon), bool),
                alive=np.zeros((count, horizon), bool),
            )

        cur = np.zeros((CHUNK, obs_dim))
        while lo < n:
            if budget is not None and lo >= least and budget.spent():
                budget.stopped = f"the budget ended after {start + lo:,} of {stop:,} episodes"
                break
            envs = self._envs(min(width, n - lo))
            count = len(envs)
            side = buffers(count)
            cur[:count] = [self.convert_obs(self._reset(e, sd)) for e, sd in zip(envs, seeds[lo : lo + count])]
            side.obs0[:] = cur[:count]
            done = np.zeros(count, bool)
            rec_chunk, cut = [], False
            for t in range(horizon):
                if done.all():
                    break
                if budget is not None and lo + count > least and budget.spent():
                    cut = True
                    break
                actions = act(t, cur, start + lo, CHUNK)
                live = np.flatnonzero(~done)
                outs_t = []
                for j in live:  # the reference's own steps, in env order; the bookkeeping below is per step t
                    i, e, a = lo + j, envs[j], actions[j]
                    a_ref = self.convert_action(a)
                    self.check_action(a, a_ref)
                    if wanted and t in wanted.get(start + i, ()):
                        core = state_to_jax(e)
                        outs = [self._step(copy.deepcopy(e), a_ref, rng) for _ in range(resamples - 1)]
                        out = self._step(e, a_ref, None)
                        rec_chunk.append((start + i, t, core, a, outs + [out]))
                    else:
                        out = self._step(e, a_ref, None)
                    outs_t.append(out)
                nobs = np.array([o[0] for o in outs_t], np.float64).reshape(len(live), obs_dim)
                ended = np.array([(o[2], o[3]) for o in outs_t], bool).reshape(len(live), 2)
                side.obs[live, t] = cur[live]
                side.act[live, t] = np.asarray(actions[live], np.float64).reshape(len(live), act_dim)
                side.nobs[live, t] = nobs
                side.rew[live, t] = np.array([o[1] for o in outs_t], np.float64).reshape(len(live), agents)
                side.term[live, t], side.trunc[live, t], side.alive[live, t] = ended[:, 0], ended[:, 1], True
                cur[live] = nobs
                done[live] = ended.any(axis=1)
            if cut:
                budget.stopped = f"the budget ended during episodes {start + lo:,}..{start + lo + count - 1:,}: kept {start + lo:,} of {stop:,}"
                break
            recorded += rec_chunk
            parts.append(side.trimmed())
            lo += count
            width = min(2 * width, CHUNK)
        if not parts:  # the budget ended in the first chunk
            return buffers(0).trimmed(), recorded
        return (parts[0] if len(parts) == 1 else Side.concat(parts)), recorded


@dataclasses.dataclass
class Games:
    """Turn-based reference games, padded to `plies` plies. Per game `length` (plies played).

    Per ply `t` (`[G, T]`): `action` (the mover's action, or the outcome chance picked),
    `chance` (a chance ply), `illegal` (a move the reference's mask excluded), `terminated`,
    `truncated`, `flags_exact` (False where the reference defines only that the game ended, not
    how: then `terminated | truncated` is compared); `reward` `[G, T, A]` with `reward_known`
    (which agents' rewards the reference defines at that ply).

    Per state `s` (`[G, T + 1]`; 0 is the initial state, `t + 1` the state after ply `t`):
    `mover` (the agent to move, -1 where the reference names none: a chance node, the end),
    `is_chance`, `mask` `[G, S, A, n]` (int8) with `mask_known`, `obs` `[G, S, A, D]` (each
    agent's observation, flattened, float64), `probs` `[G, S, K]` (chance outcome probabilities
    at chance nodes; `K = 0` without chance) and `returns` `[G, S, A]` (the reference's
    cumulative returns, or None when it keeps none).
    """

    length: np.ndarray
    action: np.ndarray
    chance: np.ndarray
    illegal: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    flags_exact: np.ndarray
    reward: np.ndarray
    reward_known: np.ndarray
    mover: np.ndarray
    is_chance: np.ndarray
    mask: np.ndarray
    mask_known: np.ndarray
    obs: np.ndarray
    probs: np.ndarray
    returns: np.ndarray | None

    def __len__(self) -> int:
        return len(self.length)

    @property
    def plies(self) -> int:
        return self.action.shape[1]

    @staticmethod
    def stack(games: list[dict], plies: int) -> "Games":
        """Pad the per-game records of `TurnBasedReference.play` to `plies` plies."""

        def pad(rows, n, fill=0):
            rows = np.asarray(rows)
            out = np.full((n,) + rows.shape[1:], fill, rows.dtype)
            out[: len(rows)] = rows
            return out

        fields = {}
        for name in ("action", "chance", "illegal", "terminated", "truncated", "flags_exact", "reward", "reward_known"):
            fields[name] = np.stack([pad(g[name], plies) for g in games])
        for name in ("mover", "is_chance", "mask", "mask_known", "obs", "probs", "returns"):
            if games[0].get(name) is None:
                fields[name] = None
                continue
            fields[name] = np.stack([pad(g[name], plies + 1, -1 if name == "mover" else 0) for g in games])
        return Games(length=np.array([len(g["action"]) for g in games], np.int64), **fields)


class TurnBasedReference(Reference):
    """A turn-based original the port is replayed against ply by ply.

    `play(seed, num_games, illegal_prob)` plays `num_games` games (game `i` from reset seed
    `episode_seeds(seed, 0, num_games)[i]` where the reference takes one) with uniformly random
    legal moves drawn from the reference's own mask and, where the reference defines what an
    illegal move does (`illegal_defined`), an action its mask excludes with probability
    `illegal_prob` per ply; chance outcomes are drawn from the reference's probabilities. It
    returns a `Games` record. `num_actions` and `num_chance_outcomes` size the port's spaces;
    `observation_name` names what `Games.obs` holds."""

    multi = True
    illegal_defined = False
    observation_name = "observation"
    num_chance_outcomes = 0
    kind = "turn-based"  # the reference's kind, in messages

    def play(self, seed: int, num_games: int, illegal_prob: float) -> Games:
        """The games of a reference without chance, one loop for every library: each game starts
        with `_new_game(reset seed)`, its states are read by `_snapshot(game, ended)` ->
        ``(mover, obs [A, D], mask [A, n])`` and each ply is played by `_step(game, action,
        mover, illegal)` -> ``(terminated, truncated, flags_exact, reward [A], reward_known [A])``."""
        rng = np.random.default_rng([seed, 3])
        games = []
        for sd in episode_seeds(seed, 0, num_games):
            game = self._new_game(int(sd))
            mover, obs, mask = self._snapshot(game, False)
            g = {k: [] for k in ("action", "chance", "illegal", "terminated", "truncated", "flags_exact", "reward",
                                 "reward_known")}
            g.update(mover=[mover], is_chance=[False], mask=[mask], mask_known=[True], obs=[obs], probs=None, returns=None)
            ended = False
            while not ended:
                if len(g["action"]) >= MAX_PLIES:
                    raise ValueError(f"verify_port: a reference game ran past {MAX_PLIES} plies without ending")
                legal, masked = np.flatnonzero(mask[mover] == 1), np.flatnonzero(mask[mover] == 0)
                if len(legal) == 0:
                    raise ValueError(f"verify_port: the {self.kind} reference's mover {self.agents[mover]!r} has no legal "
                                     f"action in a game that has not ended (after actions {g['action']})")
                illegal = self.illegal_defined and len(masked) > 0 and rng.random() < illegal_prob
                action = int(rng.choice(masked if illegal else legal))
                terminated, truncated, flags_exact, reward, known = self._step(game, action, mover, illegal)
                ended = terminated or truncated
                for k, v in (("action", action), ("chance", False), ("illegal", illegal), ("terminated", terminated),
                             ("truncated", truncated), ("flags_exact", flags_exact), ("reward", reward),
                             ("reward_known", known)):
                    g[k].append(v)
                mover, obs, mask = self._snapshot(game, ended)
                for k, v in (("mover", mover), ("is_chance", False), ("mask", mask), ("mask_known", not ended), ("obs", obs)):
                    g[k].append(v)
            games.append(g)
        return Games.stack(games, max(len(g["action"]) for g in games))

    def _new_game(self, seed: int):
        """A new game reset with ``seed`` (an object `_snapshot` and `_step` take)."""
        raise NotImplementedError

    def _snapshot(self, game, ended: bool):
        raise NotImplementedError

    def _step(self, game, action: int, mover: int, illegal: bool):
        raise NotImplementedError

    def run(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} plays whole games (play), not episodes under a policy")


def _wrapped(env):
    """`env` and the environments it wraps, outermost first (PettingZoo wrappers keep `.env`)."""
    chain = [env]
    while hasattr(chain[-1], "env") and chain[-1].env is not chain[-1] and len(chain) < 64:
        chain.append(chain[-1].env)
    return chain


class AECReference(TurnBasedReference):
    """A `pettingzoo.AECEnv` built by `factory()`: agents in `possible_agents` order; the mover
    is `agent_selection`; each agent's observation and mask come from `observe(agent)` (a dict
    with `"observation"` and `"action_mask"`, or a plain observation with the mask in
    `infos[agent]["action_mask"]`); a ply's rewards are `env.rewards` after the step.

    Illegal moves are played only when the reference is wrapped in PettingZoo's
    `TerminateIllegalWrapper` (its classic games are): it ends the game, giving the mover its
    `illegal_reward`, the others 0, and sets both terminations and truncations. The port's
    contract gives the others +1/(n-1) and ends the game by termination, so after an illegal move
    the mover's reward and the end of the game are compared, not the others' rewards or which
    flag ended it. Masks of a finished game are not compared (PettingZoo leaves them undefined).
    """

    def __init__(self, factory: Callable[[], Any], probe):
        self.factory, self.probe = factory, probe
        self.agents = list(probe.possible_agents)
        self.kind = "AEC"
        self.illegal_defined = any(type(w).__name__ == "TerminateIllegalWrapper" for w in _wrapped(probe))

    def observation_space(self):
        return self.probe.observation_space(self.agents[0])

    def action_space(self):
        return self.probe.action_space(self.agents[0])

    def describe(self) -> tuple[str, dict]:
        un = getattr(self.probe, "unwrapped", self.probe)
        name = (getattr(un, "metadata", None) or {}).get("name") or type(un).__qualname__
        versions = {}
        try:
            versions["pettingzoo"] = __import__("pettingzoo").__version__
        except ImportError:
            pass
        versions["reference module"] = type(un).__module__
        return f"pettingzoo AEC {name}", versions

    def fingerprint(self) -> tuple:
        un = getattr(self.probe, "unwrapped", self.probe)
        return (type(un).__module__, type(un).__qualname__, tuple(self.agents), repr(self.action_space()),
                tuple(type(w).__name__ for w in _wrapped(self.probe)))

    def _observe(self, e, agent):
        o = e.observe(agent)
        if isinstance(o, dict) and "observation" in o:
            obs, mask = o["observation"], o.get("action_mask")
        else:
            obs, mask = o, None
        if mask is None:
            mask = (getattr(e, "infos", None) or {}).get(agent, {}).get("action_mask")
        if mask is None:
            raise ValueError(
                f"verify_port: the AEC reference gives no action mask for {agent!r} (neither observe(agent)"
                "['action_mask'] nor infos[agent]['action_mask']); a turn-based port is compared against its mask"
            )
        return np.asarray(obs, np.float64).ravel(), np.asarray(mask).astype(np.int8).ravel()

    def _snapshot(self, e, ended: bool):
        views = [self._observe(e, a) for a in self.agents]
        mover = -1 if ended else self.agents.index(e.agent_selection)
        return mover, np.stack([v[0] for v in views]), np.stack([v[1] for v in views])

    def play(self, seed: int, num_games: int, illegal_prob: float) -> Games:
        """The games (see `TurnBasedReference.play`); PettingZoo's warning on each illegal move
        is silenced meanwhile (the moves are deliberate)."""
        from pettingzoo.utils.env_logger import EnvLogger

        was_on = EnvLogger._output
        EnvLogger.suppress_output()
        try:
            return super().play(seed, num_games, illegal_prob)
        finally:
            if was_on:
                EnvLogger.unsuppress_output()

    def _new_game(self, seed: int):
        self.probe.reset(seed=seed)  # the factory's one env (verify_port built it)
        return self.probe

    def _step(self, e, action: int, mover: int, illegal: bool):
        e.step(action)
        terminated = any(bool(e.terminations.get(a, False)) for a in self.agents)
        truncated = any(bool(e.truncations.get(a, False)) for a in self.agents)
        known = np.ones(len(self.agents), bool)
        if illegal:  # the others' rewards and which flag ends the game are not the contract's
            known[:] = False
            known[mover] = True
        return terminated, truncated, not illegal, np.array([float(e.rewards.get(a, 0.0)) for a in self.agents]), known


def is_pgx_env(x) -> bool:
    """Whether `x` is a Pgx environment (`pgx.make(...)`)."""
    return type(x).__module__.split(".")[0] == "pgx" and hasattr(x, "init") and hasattr(x, "step")


class PgxReference(TurnBasedReference):
    """A Pgx environment (`pgx.make(...)`, two players, no chance): played one game at a time with
    its jitted `init`/`step`. Pgx draws which player moves first; the port's agent 0 is the player
    who moves first in each game (agent `i` is the `i`-th to move), so rewards, observations
    (`env.observe(state, player)`) and masks are reordered into seats. The mask is the mover's
    `legal_action_mask` (the others' rows all zero) and is not compared after the end. Illegal
    moves are not played: Pgx ends the game with -1 for the mover and +1 for the other, as the
    jaxenvs contract does, but its observations after one keep the mover's turn (a Pgx quirk),
    so there is nothing defined to compare them with."""

    illegal_defined = False

    def __init__(self, env):
        import jax

        self.env = env
        if int(env.num_players) != 2:
            raise ValueError(f"verify_port compares two-player Pgx games; {env.id} has {env.num_players} players")
        self.agents = [0, 1]
        self.num_actions = int(env.num_actions)
        self.kind = "Pgx"
        self._init, self._step_fn = jax.jit(env.init), jax.jit(env.step)
        self._observe = jax.jit(env.observe)

    def observation_space(self):
        return None

    def action_space(self):
        return None

    def describe(self) -> tuple[str, dict]:
        import pgx

        return f"pgx {self.env.id} ({self.env.version})", {"pgx": pgx.__version__, "reference module": type(self.env).__module__}

    def fingerprint(self) -> tuple:
        return ("pgx", self.env.id, self.env.version)

    def _new_game(self, seed: int):
        """``[state, order]``: Pgx's state, and which Pgx player sits in each seat (seat 0 moves first)."""
        import jax

        state = self._init(jax.random.key(seed))
        first = int(state.current_player)
        return [state, np.array([first, 1 - first])]

    def _snapshot(self, game, ended: bool):
        state, order = game
        obs = np.stack([np.asarray(self._observe(state, int(order[i])), np.float64).ravel() for i in range(2)])
        mask = np.zeros((2, self.num_actions), np.int8)
        mover = -1
        if not ended:
            mover = int(np.flatnonzero(order == int(state.current_player))[0])
            mask[mover] = np.asarray(state.legal_action_mask).astype(np.int8)
        return mover, obs, mask

    def _step(self, game, action: int, mover: int, illegal: bool):
        import jax

        game[0] = state = self._step_fn(game[0], action, jax.random.key(0))
        rewards = np.asarray(state.rewards, np.float64)[game[1]]
        return bool(state.terminated), bool(state.truncated), True, rewards, np.ones(2, bool)


class OpenSpielReference(TurnBasedReference):
    """A sequential `pyspiel.Game`: the port's action `a` is OpenSpiel's action `a`, its chance
    outcome `c` OpenSpiel's chance action `c`. Per state it records `current_player`,
    `is_chance_node`, `legal_actions_mask(p)` and `information_state_tensor(p)` (or, for a game
    without one, `observation_tensor(p)`) for every player, `chance_outcomes()` at chance nodes
    and `returns()`; per ply `rewards()` and `is_terminal()`. OpenSpiel refuses illegal actions,
    so none are played."""

    def __init__(self, game):
        import pyspiel

        self.game = game
        gtype = game.get_type()
        if gtype.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise ValueError(f"verify_port compares sequential OpenSpiel games ply by ply; {game} has {gtype.dynamics}")
        self.num_players = game.num_players()
        self.agents = list(range(self.num_players))
        self.num_actions = game.num_distinct_actions()
        has_chance = gtype.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC
        self.num_chance_outcomes = game.max_chance_outcomes() if has_chance else 0
        if gtype.provides_information_state_tensor:
            self.observation_name = "information_state_tensor"
            self.obs_shape = tuple(game.information_state_tensor_shape())
        elif gtype.provides_observation_tensor:
            self.observation_name = "observation_tensor"
            self.obs_shape = tuple(game.observation_tensor_shape())
        else:
            raise ValueError(f"verify_port: {game} provides neither information_state_tensor nor observation_tensor")

    def observation_space(self):
        return self.obs_shape

    def action_space(self):
        return self.num_actions

    def describe(self) -> tuple[str, dict]:
        versions = {}
        try:
            import importlib.metadata

            versions["open_spiel"] = importlib.metadata.version("open_spiel")
        except Exception:  # noqa: BLE001 -- a build without package metadata
            pass
        return f"OpenSpiel {self.game}", versions

    def fingerprint(self) -> tuple:
        return ("pyspiel", str(self.game))

    def _tensor(self, state, p):
        if self.observation_name == "information_state_tensor":
            return np.asarray(state.information_state_tensor(p), np.float64)
        return np.asarray(state.observation_tensor(p), np.float64)

    def _snapshot(self, state):
        chance, terminal = state.is_chance_node(), state.is_terminal()
        mover = -1 if (chance or terminal) else int(state.current_player())
        mask = np.stack([np.asarray(state.legal_actions_mask(p), np.int8) for p in self.agents])
        obs = np.stack([self._tensor(state, p) for p in self.agents])
        probs = np.zeros(self.num_chance_outcomes)
        if chance:
            for c, pr in state.chance_outcomes():
                probs[c] = pr
        return mover, chance, mask, obs, probs, np.asarray(state.returns(), np.float64)

    def play(self, seed: int, num_games: int, illegal_prob: float) -> Games:
        rng = np.random.default_rng([seed, 3])
        keys = ("mover", "is_chance", "mask", "obs", "probs", "returns")
        games = []
        for _ in range(num_games):
            state = self.game.new_initial_state()
            g = {k: [] for k in ("action", "chance", "illegal", "terminated", "truncated", "flags_exact", "reward",
                                 "reward_known", "mask_known", *keys)}
            for k, v in zip(keys, self._snapshot(state)):
                g[k].append(v)
            g["mask_known"].append(True)
            while not state.is_terminal():
                if len(g["action"]) >= MAX_PLIES:
                    raise ValueError(f"verify_port: a reference game ran past {MAX_PLIES} plies without ending")
                chance = state.is_chance_node()
                if chance:
                    outs = state.chance_outcomes()
                    probs = np.array([p for _, p in outs])
                    action = int(outs[rng.choice(len(outs), p=probs / probs.sum())][0])
                else:
                    action = int(rng.choice(state.legal_actions()))
                state.apply_action(action)
                g["action"].append(action)
                g["chance"].append(chance)
                g["illegal"].append(False)
                g["terminated"].append(state.is_terminal())
                g["truncated"].append(False)
                g["flags_exact"].append(True)
                # a chance node pays nothing (OpenSpiel before 1.6 refuses rewards() there)
                reward = np.zeros(self.num_players) if state.is_chance_node() else np.asarray(state.rewards(), np.float64)
                g["reward"].append(reward)
                g["reward_known"].append(np.ones(self.num_players, bool))
                for k, v in zip(keys, self._snapshot(state)):
                    g[k].append(v)
                g["mask_known"].append(True)
            games.append(g)
        return Games.stack(games, max(len(g["action"]) for g in games))


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
