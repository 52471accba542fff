"""Turn-based references in `verify_port` (a PettingZoo AECEnv, an OpenSpiel game): the port
replays the reference's games ply by ply, every ply compared exactly, with a power rule on the
number of games."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces
from jaxenvs._fast_compile import fast_jit as _fast_jit
from jaxenvs.testing.exact import state_template
from jaxenvs.testing.report import PortMismatch
from jaxenvs.testing.runs import compiled
from jaxenvs.testing.verdict import Pending, VerifySettings, conclude
from jaxenvs.testing.reference import AECReference, OpenSpielReference

ILLEGAL_PROB = 0.02  # per ply, where the reference defines illegal moves: a masked-out action


CHANCE_TRIES = 32  # keys the port's step at a chance node tries to draw the reference's outcome


def is_openspiel_game(x) -> bool:
    return type(x).__module__ == "pyspiel" and hasattr(x, "new_initial_state")


def is_aec_env(x) -> bool:
    try:
        from pettingzoo import AECEnv
    except ImportError:
        return False
    return isinstance(x, AECEnv)


def _lockstep_fn(env, explicit_chance: bool):
    """Jitted `run(params, key, actions, outcomes, chance, valid)`: each game (vmapped) from
    `reset`, a scan over its plies. A decision ply steps with the joint action `actions[t]`, a
    chance ply (`chance[t]`) applies `outcomes[t]` with `apply_chance`, which returns no
    observation: the ply's observation is that of the port's own `step` at the chance node with the
    first of `CHANCE_TRIES` keys whose draw (`info["chance_outcome"]`) is the reference's outcome
    (`has_obs` is false where none is); padding plies (`~valid[t]`) leave the state as it is. Returns the
    initial view and, per ply, the observation, reward, flags and the view of the state after
    it (mover, mask and, with explicit chance, chance flag and outcome probabilities)."""

    def view(state, params):
        v = {"mover": env.current_player(state, params), "mask": env.legal_action_mask(state, params)}
        if explicit_chance:
            v["chance"] = env.is_chance_node(state, params)
            v["probs"] = env.chance_outcomes(state, params)
        return v

    def one(params, key, actions, outcomes, chance, valid):
        obs0, state0 = env.reset(key, params)

        def body(state, xs):
            t, action, outcome, is_chance, ok = xs
            obs, nstate, reward, term, trunc, info = env.step(jax.random.fold_in(key, t), state, action, params)
            illegal = info.get("illegal_action", jnp.zeros((), bool))
            has_obs = ~is_chance
            if explicit_chance:
                cstate = env.apply_chance(state, outcome, params)
                nstate = jax.tree.map(lambda c, s: jnp.where(is_chance, c, s), cstate, nstate)
                reward = jnp.where(is_chance, jnp.zeros_like(reward), reward)
                term, trunc, illegal = term & ~is_chance, trunc & ~is_chance, illegal & ~is_chance
                if "chance_outcome" in info:
                    tries = jax.random.split(jax.random.fold_in(key, (1 << 24) + t), CHANCE_TRIES)
                    d_obs, *_, d_info = jax.vmap(lambda k: env.step(k, state, action, params))(tries)
                    hit = d_info["chance_outcome"] == outcome
                    drawn = jax.tree.map(lambda x: x[jnp.argmax(hit)], d_obs)
                    obs = jax.tree.map(lambda d, o: jnp.where(is_chance, d, o), drawn, obs)
                    has_obs = has_obs | jnp.any(hit)
            out = {"obs": obs, "has_obs": has_obs, "reward": reward, "terminated": term, "truncated": trunc,
                   "illegal": illegal, **view(nstate, params)}
            nstate = jax.tree.map(lambda n, s: jnp.where(ok, n, s), nstate, state)
            return nstate, out

        plies = actions.shape[0]
        _, traj = jax.lax.scan(body, state0, (jnp.arange(plies), actions, outcomes, chance, valid))
        first = {"obs": obs0, "has_obs": jnp.ones((), bool), **view(state0, params)}
        return first, traj

    def run(params, key, actions, outcomes, chance, valid):
        keys = jax.random.split(key, actions.shape[0])
        return jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0))(params, keys, actions, outcomes, chance, valid)

    return _fast_jit(run)


def _states(first, traj, name):
    """`first[name]` then `traj[name]` along the ply axis: per state `[G, T + 1, ...]`."""
    return np.concatenate([np.asarray(first[name])[:, None], np.asarray(traj[name])], axis=1)


def _turn_based_spaces(port_env, env, params, ref):
    """`(explicit chance, space notes)`; ValueError unless the port is sequential, full_action_set
    and random only by explicit chance (OpenSpiel) or not at all (PettingZoo AEC), PortMismatch when
    its agents, actions, observation size or chance outcomes differ from the reference's."""
    traits = env.unwrapped.traits
    if traits.dynamics != "sequential" or traits.action_style != "full_action_set":
        raise ValueError(
            f"verify_port compares a turn-based reference ({type(ref).__name__}) with a sequential full_action_set port; "
            f"{port_env!r} has dynamics={traits.dynamics!r}, action_style={traits.action_style!r}"
        )
    if traits.chance == "stochastic" or (isinstance(ref, AECReference) and traits.chance != "deterministic"):
        raise ValueError(
            f"verify_port replays the reference's games move for move, which needs a port whose only randomness is "
            f"explicit chance (OpenSpiel) or none (PettingZoo AEC); {port_env!r} has chance={traits.chance!r}"
        )
    explicit_chance, notes = traits.chance == "explicit_stochastic", []
    obs = jax.eval_shape(lambda k: env.reset(k, params)[0], jax.random.key(0))
    if not (isinstance(obs, dict) and {"observation", "action_mask"} <= obs.keys()):
        raise ValueError(
            "verify_port compares a turn-based port's observation dict {'observation', 'action_mask'} (the "
            f"full_action_set contract); {env!r} observes {jax.tree.map(lambda x: f'{x.dtype}{list(x.shape)}', obs)}"
        )
    if env.num_agents != len(ref.agents):
        raise PortMismatch("agents", f"port has {env.num_agents} agents, reference {len(ref.agents)} ({ref.agents})")
    space = env.action_space(params)
    if not isinstance(space, spaces.Discrete):
        raise ValueError(f"verify_port compares turn-based games with Discrete actions; the port's are {space!r}")
    if isinstance(ref, OpenSpielReference) or ref.action_space() is None:
        n_ref = ref.num_actions
        ref_desc = f"num_distinct_actions() = {n_ref}" if isinstance(ref, OpenSpielReference) else f"num_actions = {n_ref}"
    else:
        ref_space = ref.action_space()
        n_ref = getattr(ref_space, "n", None)
        ref_desc = repr(ref_space)
        if n_ref is None or int(getattr(ref_space, "start", 0)) != 0:
            raise PortMismatch("action space", f"port {space!r}, reference {ref_space!r} (not a Discrete space from 0)")
    if int(space.n) != int(n_ref) or int(space.start) != 0:
        raise PortMismatch("action space", f"port {space!r}, reference {ref_desc}")
    notes.append(f"action space: {space!r} == reference {ref_desc}")
    if not explicit_chance and ref.num_chance_outcomes:
        raise PortMismatch("chance outcomes", f"the reference has chance nodes ({ref.num_chance_outcomes} outcomes), the port "
                           f"none (traits.chance={env.unwrapped.traits.chance!r}; OpenSpiel's chance is 'explicit_stochastic')")
    if explicit_chance:
        k = jax.eval_shape(lambda s: env.chance_outcomes(s, params), state_template(env, params)).shape[-1]
        if k != ref.num_chance_outcomes:
            raise PortMismatch("chance outcomes", f"port chance_outcomes has {k} outcomes, reference max_chance_outcomes() = "
                               f"{ref.num_chance_outcomes}")
        notes.append(f"chance outcomes: {k} == reference max_chance_outcomes()")
    return explicit_chance, notes


def _first_bad(bad: np.ndarray, games: int):
    """`(game, index)` of the first True in `bad` `[G, T, ...]`, by game then index; or None."""
    bad = bad.reshape(bad.shape[0], bad.shape[1], -1).any(-1)
    if not bad.any():
        return None
    g = int(np.flatnonzero(bad.any(1))[0])
    return g, int(np.flatnonzero(bad[g])[0])


def _floats(v) -> str:
    return "[" + ", ".join(f"{x:.7g}" for x in np.ravel(v)) + "]"


class _Replay:
    """The port's replay (`first`, `traj`) beside the reference's games: which states and plies are
    real, the port's per-state views, and `result`, which makes one exact comparison a `Pending`
    and records where it first differs in `first_at`: `(game, state, rank)` (a ply's reward and
    flags rank before the state it leads to, so the evidence shows the cause first)."""

    def __init__(self, ref_games, first, traj):
        self.games, self.first, self.traj, self.first_at = ref_games, first, traj, {}
        G, T = self.G, self.T = len(ref_games), ref_games.plies
        self.ply_ok = np.arange(T)[None] < ref_games.length[:, None]  # [G, T]
        self.state_ok = np.arange(T + 1)[None] <= ref_games.length[:, None]  # [G, S]
        self.has_obs = _states(first, traj, "has_obs") & self.state_ok
        self.p_obs = {k: _states({"v": first["obs"][k]}, {"v": traj["obs"][k]}, "v") for k in ("observation", "action_mask")}
        self.p_rew = np.asarray(traj["reward"], np.float64).reshape(G, T, -1)

    def history(self, g, s):
        acts = [f"chance {a}" if c else str(a) for a, c in zip(self.games.action[g, :s], self.games.chance[g, :s])]
        return f"game {g}, " + (f"after ply {s - 1} (plies so far: [{', '.join(acts)}])" if s else "initial state")

    def result(self, name, bad, port_vals, ref_vals, what, n, per_state=True):
        hit, G, games = _first_bad(bad, self.G), self.G, self.games
        if hit is None:
            return Pending(name, "exact", "lockstep (every ply)", 1.0, "exact", n, n, True,
                            f"{n:,} {'states' if per_state else 'plies'} of {G:,} games", "the same at each",
                            detectable=lambda level: 0.0, kind="transition")
        g, i = hit
        self.first_at[name] = (g, i + (0 if per_state else 1), len(self.first_at) + (0 if per_state else -100))
        where = self.history(g, i if per_state else i + 1)
        if not per_state:
            where += f" (ply {i}: {'chance ' if games.chance[g, i] else ''}action {games.action[g, i]}"
            where += ", illegal)" if games.illegal[g, i] else ")"
        pv, rv, label = port_vals(g, i), ref_vals(g, i), what(g, i)
        return Pending(name, "exact", "lockstep (every ply)", 0.0, "exact", n, n, True,
                        f"{label + ' ' if label else ''}{pv} at {where}", f"{rv}", detectable=lambda level: 0.0,
                        kind="transition")


def _mover_and_mask(c: _Replay) -> list[Pending]:
    """The mover at every state, and the legal-action mask (then the observation's copy of it)."""
    games, first, traj = c.games, c.first, c.traj
    p_mover = _states(first, traj, "mover")
    decided = c.state_ok & (games.mover >= 0)
    out = [c.result("mover (current_player)", decided & (p_mover != games.mover),
                    lambda g, s: int(p_mover[g, s]), lambda g, s: int(games.mover[g, s]),
                    lambda g, s: "current_player", int(decided.sum()))]
    p_mask = _states(first, traj, "mask")
    known = c.state_ok & games.mask_known
    bad = known[..., None, None] & (p_mask != (games.mask == 1))
    copy_bad = c.has_obs[..., None, None] & (c.p_obs["action_mask"] != p_mask.astype(np.uint8))
    if _first_bad(bad, c.G) is None and _first_bad(copy_bad, c.G) is not None:
        return out + [c.result("legal-action mask", copy_bad, lambda g, s: c.p_obs["action_mask"][g, s].tolist(),
                               lambda g, s: f"legal_action_mask {p_mask[g, s].astype(int).tolist()} (the port's own)",
                               lambda g, s: 'obs["action_mask"]', int(known.sum()))]
    return out + [c.result("legal-action mask", bad, lambda g, s: p_mask[g, s].astype(int).tolist(),
                           lambda g, s: games.mask[g, s].tolist(), lambda g, s: "legal_action_mask (agents x actions)",
                           int(known.sum()))]


def _observations(c: _Replay, observation_name) -> Pending:
    """Each agent's observation at every state where the port has one."""
    G, T, games = c.G, c.T, c.games
    o_port = c.p_obs["observation"].reshape(G, T + 1, games.obs.shape[2], -1).astype(np.float64)
    if o_port.shape[-1] != games.obs.shape[-1]:
        raise PortMismatch(observation_name, f"port observation['observation'] has {o_port.shape[-1]} entries per agent, "
                           f"the reference's {observation_name} {games.obs.shape[-1]}")
    port_dtype = c.p_obs["observation"].dtype
    # a float port's observations against the reference's rounded to its float type (OpenSpiel's
    # tensors are doubles); integer ones against the reference's values as they are
    o_ref = games.obs.astype(port_dtype).astype(np.float64) if port_dtype.kind == "f" else games.obs
    obad = c.has_obs[..., None, None] & (o_port != o_ref)

    def obs_diff(g, s, side):
        rows = sorted({int(a) for a, _ in np.argwhere(o_port[g, s] != o_ref[g, s])})
        vals = o_port[g, s] if side == "port" else o_ref[g, s]
        return "; ".join(f"agent {a}: {vals[a].tolist()}" for a in rows)

    return c.result(f"observation per agent ({observation_name})", obad, lambda g, s: obs_diff(g, s, "port"),
                    lambda g, s: obs_diff(g, s, "ref"), lambda g, s: 'obs["observation"]', int(c.has_obs.sum()))


def _ply_outcomes(c: _Replay) -> Pending:
    """Each decision ply's rewards, flags and illegal-move flag."""
    games, traj, p_rew = c.games, c.traj, c.p_rew
    r_rew = games.reward.astype(np.float32).astype(np.float64)
    p_term, p_trunc, p_ill = (np.asarray(traj[k]) for k in ("terminated", "truncated", "illegal"))
    decision = c.ply_ok & ~games.chance
    rew_bad = (decision[..., None] & games.reward_known & (p_rew != r_rew)).any(-1)
    exact = games.flags_exact
    flag_bad = np.where(exact, (p_term != games.terminated) | (p_trunc != games.truncated),
                        (p_term | p_trunc) != (games.terminated | games.truncated)) & decision
    bad = rew_bad | flag_bad | ((p_ill != games.illegal) & decision)

    def fmt_ply(g, t, side):
        port = side == "port"
        rew = [f"{r:g}" if k else "-" for r, k in zip((p_rew if port else r_rew)[g, t].tolist(), games.reward_known[g, t])]
        term, trunc, ill = ((p_term, p_trunc, p_ill) if port else (games.terminated, games.truncated, games.illegal))
        s = (f"reward [{', '.join(rew)}], terminated {bool(term[g, t])}, truncated {bool(trunc[g, t])}, "
             f"illegal {bool(ill[g, t])}")
        return s if port or exact[g, t] else s + " (only the end of the game is compared after an illegal move)"

    return c.result("reward and end of game (every ply)", bad, lambda g, t: fmt_ply(g, t, "port"),
                    lambda g, t: fmt_ply(g, t, "ref"), lambda g, t: "", int(decision.sum()), per_state=False)


def _chance_and_returns(c: _Replay, explicit_chance) -> list[Pending]:
    """With explicit chance, the chance nodes and their outcome probabilities; where the reference
    keeps returns, the port's cumulative rewards at every state."""
    games, state_ok, out = c.games, c.state_ok, []
    if explicit_chance:
        p_chance, p_probs = _states(c.first, c.traj, "chance"), _states(c.first, c.traj, "probs")
        r_probs = games.probs.astype(np.float32)
        bad = (state_ok & (p_chance != games.is_chance))[..., None] | (
            (state_ok & games.is_chance)[..., None] & (p_probs != r_probs))
        out.append(c.result("chance nodes and outcome probabilities", bad,
                            lambda g, s: f"is_chance_node {bool(p_chance[g, s])}, chance_outcomes {_floats(p_probs[g, s])}",
                            lambda g, s: f"is_chance_node {bool(games.is_chance[g, s])}, chance_outcomes "
                                         f"{_floats(r_probs[g, s]) if games.is_chance[g, s] else '-'} (as float32)",
                            lambda g, s: "", int((state_ok & games.is_chance).sum())))
    if games.returns is not None:
        p_rew = c.p_rew
        p_ret = np.concatenate([np.zeros((c.G, 1, p_rew.shape[-1])), np.cumsum(np.where(c.ply_ok[..., None], p_rew, 0), 1)], 1)
        p_ret = p_ret.astype(np.float32).astype(np.float64)
        r_ret = games.returns.astype(np.float32).astype(np.float64)
        out.append(c.result("returns (every state)", state_ok[..., None] & (p_ret != r_ret), lambda g, s: _floats(p_ret[g, s]),
                            lambda g, s: _floats(r_ret[g, s]), lambda g, s: "cumulative reward", int(state_ok.sum())))
    return out


def games_needed(detect: float, power: float) -> int:
    """Games the exact lockstep needs: a port that differs in a fraction `detect` of the
    reference's random games shows it in at least one of `G` games with probability
    `1 - (1 - detect)^G >= power`."""
    return int(math.ceil(math.log(1.0 - power) / math.log(1.0 - detect)))


def _games_detectable(games: int, power: float) -> float:
    """The smallest fraction of differing games that `games` games catch with probability `power`."""
    return 1.0 - (1.0 - power) ** (1.0 / max(games, 1))


def _replay(env, params, games, seed, explicit_chance):
    """The port's replay of the reference's `games` in one compiled call: `(first, traj)`."""
    G, T = len(games), games.plies
    plies = 1 << max(0, int(T - 1).bit_length())  # padded to a power of two: one compile serves similar runs
    rng = np.random.default_rng([seed, 4])
    n = int(env.action_space(params).n)
    actions = rng.integers(0, n, size=(G, plies, env.num_agents)).astype(np.int32)  # the non-movers' rows: any action
    movers = np.maximum(games.mover[:, :T], 0)
    gi, ti = np.nonzero(np.arange(T)[None] < games.length[:, None])
    actions[gi, ti, movers[gi, ti]] = games.action[gi, ti]
    pad = lambda x, fill=0: np.concatenate([x, np.full((G, plies - T) + x.shape[2:], fill, x.dtype)], 1)  # noqa: E731
    outcomes = pad(np.where(games.chance, games.action, 0).astype(np.int32))
    valid = pad(np.arange(T)[None] < games.length[:, None])
    fn = compiled("lockstep", _lockstep_fn, env, explicit_chance)
    first, traj = fn(params, jax.random.key(seed), actions, outcomes, pad(games.chance), valid)
    return jax.tree.map(np.asarray, first), jax.tree.map(lambda x: np.asarray(x)[:, :T], traj)


def _turn_based_notes(ref, games, traj, explicit_chance) -> list[str]:
    """The report's notes: the games played, the moves' policy, and how illegal moves and chance
    plies are compared."""
    G, T = len(games), games.plies
    played = np.arange(T)[None] < games.length[:, None]
    n_chance = int((games.chance & played).sum())
    ends = games.length - 1
    last_reward, last_illegal = games.reward[np.arange(G), ends], games.illegal[np.arange(G), ends]
    outcomes_seen = {}
    for r in last_reward[~last_illegal]:
        k = "draw" if not r.any() else f"agent {int(np.argmax(r))} ahead"
        outcomes_seen[k] = outcomes_seen.get(k, 0) + 1
    notes = [
        f"{type(ref).__name__}: {G:,} games, {int(games.length.sum()):,} plies ({int(games.illegal.sum()):,} illegal moves, "
        f"{n_chance:,} chance plies), {int(games.length.min())}..{int(games.length.max())} plies a game; final outcomes "
        + ", ".join(f"{k}: {v}" for k, v in sorted(outcomes_seen.items())),
        "moves are the reference's: uniformly random legal ones"
        + (f", and with probability {ILLEGAL_PROB:g} per ply one its mask excludes (it defines what they do)"
           if ref.illegal_defined else " (the reference does not define illegal moves: none played)")
        + "; the non-movers' rows of the port's joint action hold random actions, which it must ignore",
    ]
    if isinstance(ref, AECReference) and ref.illegal_defined:
        notes.append("after an illegal move: the mover's reward and the end of the game compared (PettingZoo gives the "
                     "others 0 and sets terminations and truncations; the jaxenvs contract +1/(n-1) and terminated)")
    if explicit_chance:
        seen = int((np.asarray(traj["has_obs"]) & games.chance & played).sum())
        notes.append(f"chance plies are applied with apply_chance; the observation after one is the port's own step's at "
                     f"the chance node where one of {CHANCE_TRIES} keys drew the reference's outcome ({seen:,} of "
                     f"{n_chance:,} chance plies; the others' are compared at the next decision)")
    return notes


def verify_turn_based(port_env, env, params, ref, num_games, seed, settings: VerifySettings, reference_cache, t_start,
                      raise_inconclusive=True):
    """`verify_port` against a `TurnBasedReference`: the reference plays `num_games` games with
    random legal moves (and illegal ones where it defines them); the port replays every game in
    one compiled call; every ply is compared exactly."""
    alpha, detect, power = settings.alpha, settings.detect, settings.power
    explicit_chance, space_notes = _turn_based_spaces(port_env, env, params, ref)
    cache_notes = []
    cache_key = (ref.fingerprint(), seed, num_games, ILLEGAL_PROB) if reference_cache is not None else None
    games = reference_cache.get(cache_key) if cache_key is not None else None
    if games is not None:
        cache_notes.append(f"games 0..{num_games - 1}")
    else:
        games = ref.play(seed, num_games, ILLEGAL_PROB)
        if cache_key is not None:
            reference_cache.put(cache_key, games)
    G, T = len(games), games.plies
    first, traj = _replay(env, params, games, seed, explicit_chance)
    replay = _Replay(games, first, traj)  # every ply compared exactly
    pending = _mover_and_mask(replay) + [_observations(replay, ref.observation_name), _ply_outcomes(replay)]
    pending += _chance_and_returns(replay, explicit_chance)
    level = alpha / len(pending)
    certified = _games_detectable(G, power)
    needed_games = games_needed(detect, power)
    for p in pending:  # an exact comparison over G random games detects a fraction `certified` of them differing
        p.effect = "games differing"
        p.detectable = lambda level, c=certified: c
        p.needed = lambda level, n=needed_games: (n, f"needs {n:,} games")
    statistics = tuple(p.finish(level, detect) for p in pending)
    failed = [s for s in statistics if s.p_value < level]
    verdict = "fail" if failed else ("inconclusive" if certified > detect else "pass")
    mismatch = shortfall = None
    if failed:
        s = min(failed, key=lambda s: replay.first_at[s.name])  # the earliest difference: game, then ply
        others = [f.name for f in failed if f is not s]
        more = f" (also differing: {'; '.join(others)})" if others else ""
        mismatch = (s.name, f"exact lockstep: port {s.port}; reference {s.reference}{more}")
    elif verdict == "inconclusive":
        shortfall = (f"inconclusive after {G:,} games: every ply agrees, but {G:,} random games catch a port that differs "
                     f"in a fraction {certified:.3g} of them with probability {power:g}, above detect={detect:g}; "
                     f"{needed_games:,} games would do (num_episodes={needed_games})")
    return conclude(
        ref, port_env, env, seed, settings, level, space_notes, statistics, t_start, ("games", cache_notes),
        mismatch, shortfall, raise_inconclusive, verdict=verdict, tiers=("exact",), num_episodes=G, horizon=T,
        states_checked=int(replay.state_ok.sum()), episodes_needed=needed_games if verdict == "inconclusive" else None,
        notes=tuple(_turn_based_notes(ref, games, traj, explicit_chance)),
    )
