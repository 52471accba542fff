"""The from-state tier of `verify_port`: a stochastic port drawn many times (vmapped) at each
visited reference state, the reference's own outcome there ranked among the draws."""

from __future__ import annotations

import math

import jax
import numpy as np

from jaxenvs.testing import stats
from jaxenvs.testing.exact import port_states
from jaxenvs.testing.runs import (
    ATOL,
    FROM_STATE_DRAWS,
    RTOL,
    compiled,
    flat,
    quantize,
    state_step_fn,
)
from jaxenvs.testing.verdict import Pending, VerifySettings


def ranks(port_rows: np.ndarray, ref_rows: np.ndarray, rng, tol: bool = False) -> np.ndarray:
    """Randomised ranks in (0, 1) of each reference outcome `ref_rows[s]` among the port's draws
    `port_rows[s, :]` at the same state (ties broken at random): exactly uniform when the
    reference's outcome and the port's draws are exchangeable, whatever the outcomes' type.
    With `tol`, real values within `RTOL`/`ATOL` of each other count as ties (a float32 port
    against a float64 reference)."""
    ref = ref_rows[:, None]
    width = RTOL * np.abs(ref) + ATOL if tol else 0.0
    less = (port_rows < ref - width).sum(1)
    eq = (np.abs(port_rows - ref) <= width).sum(1)
    k = port_rows.shape[1]
    return (less + rng.uniform(size=len(less)) * (eq + 1)) / (k + 1)


def lex_ranks(port_rows: np.ndarray, ref_rows: np.ndarray, rng) -> np.ndarray:
    """`ranks` of whole outcome rows (`port_rows` [S, K, C] against `ref_rows` [S, C]) in
    lexicographic order, ties (equal rows) broken at random: one fixed order of the outcomes, so
    exactly uniform under exchangeability, as `ranks` of any labelling in that order would be."""
    less = np.zeros(port_rows.shape[:2], bool)
    eq = np.ones(port_rows.shape[:2], bool)
    for j in range(port_rows.shape[2]):
        pj, rj = port_rows[:, :, j], ref_rows[:, None, j]
        less |= eq & (pj < rj)
        eq &= pj == rj
    k = port_rows.shape[1]
    return (less.sum(1) + rng.uniform(size=len(less)) * (eq.sum(1) + 1)) / (k + 1)


def from_state_statistic(env, params, recorded, key, discrete: bool, settings: VerifySettings, seed: int,
                         per_episode: float) -> Pending:
    """The from-state tier of a stochastic port: at each reference state in `recorded` the port
    steps `FROM_STATE_DRAWS` times (vmapped) with the reference's action, and the reference's
    own outcome there is ranked among the port's draws (`ranks`); the ranks of all states are
    tested for uniformity (`stats.rank_test`), per component -- the whole outcome row in a fixed
    order for discrete observations; each observation entry, the reward and the flags for real
    ones -- Bonferroni over the components. The certified effect is a Kolmogorov-Smirnov
    distance of the ranks from uniform."""
    power, detect = settings.power, settings.detect
    draws = FROM_STATE_DRAWS
    fn = compiled("state step", state_step_fn, env, draws)
    p_rows, r_rows = [], []
    chunk = 1024
    for lo in range(0, len(recorded), chunk):
        part = recorded[lo : lo + chunk]
        m = len(part)
        size = chunk  # padded to one shape: one compile of the step and of the key split serves every call
        idx = np.minimum(np.arange(size), m - 1)
        state_batch = port_states(env, params, [(part[i][2], part[i][1]) for i in idx])
        actions = np.stack([np.asarray(part[i][3]) for i in idx])
        keys = jax.random.split(jax.random.fold_in(key, (3 << 28) + lo), size)
        nobs, reward, term, trunc = fn(params, state_batch, actions, keys)
        obs = flat(nobs, 2)[:m]
        rew = np.asarray(reward, np.float64).reshape(size, draws, -1)[:m]
        flags = (np.asarray(term).astype(np.float64) * 2 + np.asarray(trunc))[:m, :, None]
        p_rows.append(np.concatenate([obs, rew, flags], axis=2))
        for e, t, core, a, outs in part:
            o = outs[-1]
            r_rows.append(np.concatenate([o[0], o[1], [2.0 * o[2] + o[3]]]))
    p_rows = np.concatenate(p_rows)
    r_rows = np.stack(r_rows)
    if discrete:
        p_rows, r_rows = quantize(p_rows), quantize(r_rows)
    S, K, C = p_rows.shape
    rng = np.random.default_rng([seed, 5])
    if discrete:  # one component: the whole row, in lexicographic order (compared in place: no sort of S x K rows)
        comps = [("outcome", p_rows, r_rows)]
    else:
        names = [f"obs[{j}]" for j in range(C - 2)] + ["reward", "flags"]
        comps = [(names[j], p_rows[:, :, j], r_rows[:, j]) for j in range(C)]
    results = []
    for cname, pc, rc in comps:
        if np.all(pc == pc[:, :1]) and np.allclose(rc, pc[:, 0], rtol=RTOL, atol=ATOL):
            continue  # the same constant outcome on both sides at every state: nothing to rank
        stat, p = stats.rank_test(lex_ranks(pc, rc, rng) if discrete else ranks(pc, rc, rng, tol=True))
        results.append((p, stat, cname))
    n_comp = max(len(results), 1)
    p_all = min(1.0, n_comp * min((r[0] for r in results), default=1.0))
    worst = min(results, default=(1.0, 0.0, "-"))
    name = "from reference states (rank of the reference's outcome)"

    def needed(level):
        n = stats.needed_rank(detect, level / n_comp, power)
        return int(math.ceil(n / max(per_episode, 1e-9))), f"needs about {n:,} reference states"

    return Pending(
        name, "from-state", "rank KS per component", p_all, "rank ks", S * K, S, True,
        f"{S} states x {K} draws; least uniform: {worst[2]} (KS {worst[1]:.4f})",
        f"the reference's outcome at each ({n_comp} components ranked)",
        detectable=lambda level: stats.detectable_rank(S, level / n_comp, power), needed=needed, kind="transition",
    )
