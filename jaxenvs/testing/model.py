"""The model tier of `verify_port`: the port's outcomes per (observation, action) against the
reference's exact transition table."""

from __future__ import annotations

import math

import jax
import numpy as np

from jaxenvs.testing import stats
from jaxenvs.testing.reference import TransitionModel
from jaxenvs.testing.runs import (
    MAX_DRAWS,
    STATES_PER_OBS,
    compiled,
    port_reset_fn,
    port_rollout_fn,
    quantize,
    state_step_fn,
)
from jaxenvs.testing.verdict import Pending, VerifySettings


def _outcome_table(model: TransitionModel, obs: int, action: int):
    """`(keys, probs)`: the model's distinct outcomes `(next obs, reward, terminated)` (rewards
    quantized as the port's) and their probabilities, or None when the model lacks the pair."""
    outs = model.outcomes(obs, action)
    if outs is None:
        return None
    merged: dict = {}
    for p, s, r, t in outs:
        k = (float(s), float(quantize(np.array([r]))[0]), float(t))
        merged[k] = merged.get(k, 0.0) + p
    keys = list(merged)
    return keys, np.array([merged[k] for k in keys])


def model_initial(env, params, key, model: TransitionModel, settings: VerifySettings) -> Pending:
    power, detect = settings.power, settings.detect
    probs = np.asarray(model.initial, np.float64)
    df = max(int(np.count_nonzero(probs)) - 1, 1)
    name = "initial observation"

    def run(draws: int) -> Pending:
        obs = np.asarray(compiled("reset", port_reset_fn, env)(params, key, 0, draws)).ravel().astype(np.int64)
        inside = (obs >= 0) & (obs < len(probs))
        counts = np.bincount(obs[inside], minlength=len(probs)).astype(np.float64)
        extra = int((~inside).sum())
        p = stats.goodness_of_fit(np.append(counts, extra), np.append(probs, 0.0))
        freq = counts / max(draws, 1)
        tv = 0.5 * (np.abs(freq - probs).sum() + extra / max(draws, 1))
        top = np.argsort(-counts)[:4]
        port = "{" + ", ".join(f"{o}: {freq[o]:.4f}" for o in top if counts[o]) + "}" + f", TV {tv:.4f}"
        ref = "{" + ", ".join(f"{o}: {probs[o]:.4f}" for o in np.argsort(-probs)[:4] if probs[o]) + "} (exact)"
        return Pending(
            name, "model", "goodness of fit", p, "tv", draws, 0, True, port, ref,
            detectable=lambda level: stats.detectable_model(draws, df, level, power),
            needed=lambda level: (None, f"needs {stats.needed_model(detect, df, level, power):,} port resets"),
            top_up=lambda level: run(min(MAX_DRAWS, stats.needed_model(detect, df, level, power))), kind="initial",
        )

    return run(256)


def model_transitions(env, params, pol, horizon, key, model: TransitionModel, num_actions, episodes,
                      settings: VerifySettings) -> Pending:
    """The port, stepped from its own states at every observation it reached in its `episodes`
    episodes (the state of the earliest visit and, from another episode, of the latest) with
    every action, against the model's exact probabilities."""
    power, detect = settings.power, min(settings.detect, settings.detect_local)  # every pair tested
    run = compiled("rollout", port_rollout_fn, env, pol, horizon, True)
    _, (obs, _, _, _, _, _, states, alive) = run(params, key, 0, episodes)
    obs = np.asarray(obs).reshape(episodes, horizon)
    alive = np.asarray(alive)
    chosen: dict[int, list] = {}
    e_idx, t_idx = np.nonzero(alive)
    order = np.lexsort((e_idx, t_idx))  # by step, then episode
    for o, rows in stats.group(obs[e_idx, t_idx][order].astype(np.int64)).items():
        visits = [(int(e_idx[order][r]), int(t_idx[order][r])) for r in rows]
        first, last = visits[0], visits[-1]  # the earliest and the latest step that reached o
        chosen[int(o)] = [first] + ([last] if last[0] != first[0] and STATES_PER_OBS > 1 else [])
    pairs, tables, missing = [], {}, []
    for o in sorted(chosen):
        for a in range(num_actions):
            tab = _outcome_table(model, o, a)
            if tab is None:
                missing.append((o, a))
                continue
            tables[(o, a)] = tab
            pairs += [(e, t, o, a) for e, t in chosen[o]]
    name = "transition | (observation, action)"
    if missing:
        o, a = missing[0]
        return Pending(name, "model", "goodness of fit", 0.0, "tv", len(pairs), 0, True,
                        f"reached observation {o} (action {a})", f"{model.source} has no entry for it",
                        detectable=lambda level: 0.0, kind="transition")
    num_pairs = len(tables)
    df = max(max(int(np.count_nonzero(p)) - 1 for _, p in tables.values()), 1)
    state_idx = np.array([[e, t] for e, t, _, _ in pairs])
    state_batch = jax.tree.map(lambda x: np.asarray(x)[state_idx[:, 0], state_idx[:, 1]], states)
    action_batch = np.array([a for _, _, _, a in pairs], np.int32)
    min_states = min(len(chosen[o]) for o, _ in tables)
    rows_of = {k: [j for j, (_, _, o, a) in enumerate(pairs) if (o, a) == k] for k in tables}

    def sample(draws: int) -> Pending:
        """`draws` per (observation, action), split over its states."""
        per = 1 << max(0, int(math.ceil(math.log2(draws / min_states))))  # a power of 2: few compiles
        fn = compiled("state step", state_step_fn, env, per)
        outs, chunk = [], min(256, 1 << int(math.ceil(math.log2(len(pairs)))))
        for lo in range(0, len(pairs), chunk):
            idx = np.minimum(np.arange(lo, lo + chunk), len(pairs) - 1)  # the last chunk padded: one shape
            keys = jax.random.split(jax.random.fold_in(key, (2 << 28) + lo), chunk)
            sub = jax.tree.map(lambda x: x[idx], state_batch)
            nobs, reward, term, _ = fn(params, sub, action_batch[idx], keys)
            m = min(chunk, len(pairs) - lo)
            outs.append((np.asarray(nobs).reshape(chunk, per)[:m], np.asarray(reward, np.float64).reshape(chunk, per)[:m],
                         np.asarray(term).reshape(chunk, per)[:m]))
        nobs = np.concatenate([o[0] for o in outs])
        reward = quantize(np.concatenate([o[1] for o in outs]))
        term = np.concatenate([o[2] for o in outs])
        ps, found, n_min = [], [], None
        for (o, a), (keys, probs) in tables.items():
            rows = rows_of[(o, a)]
            got = np.stack([nobs[rows].ravel(), reward[rows].ravel(), term[rows].ravel().astype(np.float64)], 1)
            match = np.all(got[:, None, :] == np.array(keys, np.float64)[None], axis=-1)  # [draws, outcomes]
            ids = np.where(match.any(1), match.argmax(1), len(keys))
            counts = np.bincount(ids, minlength=len(keys) + 1).astype(np.float64)
            p = stats.goodness_of_fit(counts, np.append(probs, 0.0))
            n = counts.sum()
            n_min = n if n_min is None else min(n_min, n)
            tv = 0.5 * np.abs(counts / n - np.append(probs, 0.0)).sum()
            ps.append(p)
            extra = [tuple(r) for r in np.unique(got[ids == len(keys)], axis=0)[:3]]
            found.append((p, -tv, (o, a), counts / n, keys, probs, extra))
        p_all = min(1.0, num_pairs * min(ps))
        _, neg_tv, (o, a), freq, keys, probs, extra = min(found, key=lambda f: (f[0], f[1]))
        fmt = lambda k: f"(next {k[0]:g}, reward {k[1]:g}, term {bool(k[2])})"  # noqa: E731
        port = f"at observation {o}, action {a}: " + ", ".join(f"{fmt(k)} {f:.4f}" for k, f in zip(keys, freq[:-1]))
        if extra:
            port += f", outcomes of probability 0: {', '.join(fmt(k) for k in extra[:3])} ({freq[-1]:.4f})"
        port += f"; TV {-neg_tv:.4f} (the least likely of {num_pairs} pairs)"
        ref = ", ".join(f"{fmt(k)} {p:.4f}" for k, p in zip(keys, probs)) + f" ({model.source})"
        draws_done = int(n_min)
        return Pending(
            name, "model", "goodness of fit per (observation, action)", p_all, "tv", int(len(nobs) * per), 0, True,
            port, ref,
            detectable=lambda level: stats.detectable_model(draws_done, df, level / num_pairs, power),
            needed=lambda level: (None, f"needs {stats.needed_model(detect, df, level / num_pairs, power):,} draws per pair"),
            top_up=lambda level: sample(min(MAX_DRAWS, stats.needed_model(detect, df, level / num_pairs, power))),
            kind="transition",
        )

    return sample(256)
