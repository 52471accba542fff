"""The checker's turn-based phases (`TurnPhases`, a part of `jaxenvs.checker.phases.Checker`):
legal-action masks, the current player, non-movers, explicit chance."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxenvs import spaces
from jaxenvs._fast_compile import fast_jit
from jaxenvs.core import Environment
from jaxenvs.wrappers.base import AutoReset, has_wrapper
from .results import EnvCheckError
from .trees import first_difference, first_leaf, host, index_label

__all__ = ["TurnPhases"]

MASK_STEP_STATES = 256  # visited states whose every action mask-step tries
CHANCE_DRAWS = 4000  # step's draws at one chance node for the chi-square test of chance-outcomes
CHANCE_LEVEL = 1e-4  # significance level of that test


def _first_bad(bad: np.ndarray, rule: str, path: str, says) -> None:
    """`EnvCheckError` ``(rule, says(i), path)`` at the first True ``i`` of the bool[N] ``bad``."""
    if bad.any():
        i = int(np.argmax(bad))
        raise EnvCheckError(rule, says(i), path)


class TurnPhases:
    """The phases of turn-based games' rules (the checker's state is `Checker`'s)."""

    def check_turn_traits(self):
        """``traits-implemented``: each turn-based trait is declared exactly when it is implemented."""
        base = getattr(self.env, "unwrapped", self.env)
        t = base.traits

        def defines(name):
            return getattr(type(base), name, None) is not getattr(Environment, name)

        claims = (
            ("action_style", t.action_style == "full_action_set", "'full_action_set'", ("legal_action_mask",)),
            ("dynamics", t.dynamics == "sequential", "'sequential'", ("current_player",)),
            ("chance", t.chance == "explicit_stochastic", "'explicit_stochastic'",
             ("is_chance_node", "chance_outcomes", "apply_chance")),
        )
        for trait, declared, value, methods in claims:
            missing = [m for m in methods if not defines(m)]
            present = [m for m in methods if defines(m)]
            if declared and missing:
                raise EnvCheckError(
                    "traits-implemented",
                    f"traits.{trait} is {value} but {type(base).__name__} does not define {', '.join(missing)}",
                )
            if not declared and present:
                raise EnvCheckError(
                    "traits-implemented",
                    f"{type(base).__name__} defines {', '.join(present)} but traits.{trait} is "
                    f"{getattr(t, trait)!r}, not {value}",
                )
        if self.masked and not isinstance(self.act_space, spaces.Discrete):
            raise EnvCheckError(
                "traits-implemented", f"action_style='full_action_set' needs a Discrete action space, got {self.act_space}"
            )

    def _mask_shape(self) -> tuple[int, ...]:
        return self.agent_lead + (self.act_space.n,)

    def check_mask_obs(self, obs, state, where: str):
        """``mask-structure`` for one (unbatched) observation and state."""
        if not (isinstance(obs, Mapping) and "observation" in obs and "action_mask" in obs):
            got = sorted(obs) if isinstance(obs, Mapping) else type(obs).__name__
            raise EnvCheckError(
                "mask-structure",
                f"a full_action_set env's observation is a dict with 'observation' and 'action_mask', got {got} {where}",
                "obs",
            )
        mask = self.call("mask-structure", "env.legal_action_mask", self.env.legal_action_mask, state, self.params)
        if str(jnp.result_type(mask)) != "bool" or tuple(jnp.shape(mask)) != self._mask_shape():
            raise EnvCheckError(
                "mask-structure",
                f"legal_action_mask returned {jnp.result_type(mask)}{list(jnp.shape(mask))}, expected "
                f"bool{list(self._mask_shape())} {where}",
            )
        om = obs["action_mask"]
        if str(jnp.result_type(om)) != "uint8" or tuple(jnp.shape(om)) != self._mask_shape():
            raise EnvCheckError(
                "mask-structure",
                f"{jnp.result_type(om)}{list(jnp.shape(om))} {where}, expected uint8{list(self._mask_shape())}",
                "obs['action_mask']",
            )
        if not np.array_equal(host(om), host(mask).astype(np.uint8)):
            raise EnvCheckError(
                "mask-structure",
                f"{host(om).tolist()} {where} but legal_action_mask of the returned state is "
                f"{host(mask).astype(np.uint8).tolist()}",
                "obs['action_mask']",
            )

    def batched(self, fn, tree, n_batch: int):
        """``fn`` (of one env's state) over ``tree``'s ``n_batch`` leading axes, jitted."""
        lead = tuple(jnp.shape(first_leaf(tree)))[:n_batch]
        flat = jax.tree.map(lambda x: jnp.reshape(x, (-1,) + tuple(jnp.shape(x))[n_batch:]), tree)
        out = fast_jit(jax.vmap(fn))(flat)
        return jax.tree.map(lambda x: np.asarray(x).reshape(lead + x.shape[1:]), out)

    def check_mask_rollout(self, first, traj):
        """``mask-structure`` and ``mask-autoreset`` along the vmapped rollout."""
        params = self.params
        mask_fn = lambda s: self.env.legal_action_mask(s, params)  # noqa: E731
        done = np.asarray(traj["terminated"]) | np.asarray(traj["truncated"])
        for where, obs, states, n in (("after reset", first["obs"], first["state"], 1),
                                      ("along the rollout", traj["obs"], traj["state"], 2)):
            masks = self.call("mask-structure", "vmap(env.legal_action_mask)", self.batched, mask_fn, states, n)
            om = host(obs["action_mask"])
            if om.dtype != np.uint8 or masks.dtype != bool:
                raise EnvCheckError("mask-structure", f"obs mask {om.dtype}, legal_action_mask {masks.dtype} {where}")
            bad = np.any(om != masks.astype(np.uint8), axis=tuple(range(n, om.ndim)))
            if bad.any():
                i = int(np.argmax(bad.reshape(-1)))
                names = ("env",) if n == 1 else ("step", "env")
                at = index_label(i, bad.shape, names)
                rule = "mask-autoreset" if n == 2 and done.reshape(-1)[i] else "mask-structure"
                extra = " (the step ended an episode: after the auto-reset the mask is the new game's)" if rule == "mask-autoreset" else ""
                raise EnvCheckError(
                    rule,
                    f"{om.reshape(-1, *om.shape[n:])[i].tolist()} {where} ({at}) but legal_action_mask of the returned "
                    f"state is {masks.reshape(-1, *masks.shape[n:])[i].astype(np.uint8).tolist()}{extra}",
                    "obs['action_mask']",
                )
        self.check_final_obs_mask(first, traj, done)

    def check_final_obs_mask(self, first, traj, done):
        """``mask-autoreset``: ``info["final_obs"]["action_mask"]`` of an ended episode is the mask
        of the state it ended in (that step replayed below the outermost AutoReset)."""
        if not (isinstance(self.env, AutoReset) and "final_obs" in traj["info"]) or not done.any():
            return
        inner, params = self.env.env, self.params
        t_idx, b_idx = np.nonzero(done)
        prev = jax.tree.map(
            lambda f, s: jnp.concatenate([f[None], s[:-1]])[t_idx, b_idx], first["state"], traj["state"]
        )
        keys = self.step_keys[t_idx, b_idx]
        actions = jax.tree.map(lambda a: a[t_idx, b_idx], traj["action"])

        def ended(key, state, action):
            key_step, _ = self.env.split_key(key)
            _, state, *_ = inner.step_env(key_step, state, action, params)
            return inner.legal_action_mask(state, params)

        masks = np.asarray(fast_jit(jax.vmap(ended))(keys, prev, actions)).astype(np.uint8)
        final = host(traj["info"]["final_obs"]["action_mask"])[t_idx, b_idx]
        bad = np.any(final != masks, axis=tuple(range(1, final.ndim)))
        _first_bad(bad, "mask-autoreset", "info['final_obs']['action_mask']", lambda i: (
            f"{final[i].tolist()} at step {t_idx[i]}, env {b_idx[i]}, where the episode ended, but the ended state's "
            f"legal_action_mask is {masks[i].tolist()}"))

    def visited_states(self):
        """States of ``MASK_STEP_STATES`` env steps (the state each action is taken in): a
        random-legal rollout of the env with an auto-reset (added when the env has none), so that
        every state is a live one."""
        env = self.env if has_wrapper(self.env, AutoReset) else AutoReset(self.env)
        params, B = self.params, 32
        T = -(-MASK_STEP_STATES // B)
        k_reset, k_run = jax.random.split(jax.random.fold_in(self.key, 7))

        def run(k_reset, k_run):
            obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(k_reset, B), params)

            def body(carry, key):
                obs, state = carry
                k_act, k_step = jax.random.split(key)
                action = self.act_space.sample(k_act, (B,) + self.agent_lead)
                action = jax.vmap(self.act)(jax.random.split(k_act, B), obs, action)
                out = jax.vmap(env.step, (0, 0, 0, None))(jax.random.split(k_step, B), state, action, params)
                return (out[0], out[1]), state

            return jax.lax.scan(body, (obs, state), jax.random.split(k_run, T))[1]

        states = self.call("mask-step", "a rollout collecting visited states", fast_jit(run), k_reset, k_run)
        return env, jax.tree.map(lambda x: x.reshape((T * B,) + x.shape[2:]), states)

    def check_turn_based(self):
        env, states = self.visited_states()
        params, n_states = self.params, MASK_STEP_STATES
        probe = fast_jit(jax.vmap(lambda s: (
            env.current_player(s, params),
            env.is_chance_node(s, params),
            env.legal_action_mask(s, params) if self.masked else jnp.zeros((), bool),
        )))
        player, chance, masks = (np.asarray(x) for x in self.call("current-player", "env.current_player", probe, states))
        n = self.num_agents
        if self.applies("current-player"):
            if player.dtype != np.int32 or player.shape != (n_states,):
                raise EnvCheckError("current-player", f"current_player returned {player.dtype}{list(player.shape[1:])}, expected an int32 scalar")
            if ((player < 0) | (player >= n)).any():
                i = int(np.argmax((player < 0) | (player >= n)))
                raise EnvCheckError("current-player", f"current_player is {player[i]} in a visited state; it must lie in [0, {n})")
        if chance.dtype != bool or chance.shape != (n_states,):
            raise EnvCheckError("chance-outcomes", f"is_chance_node returned {chance.dtype}{list(chance.shape[1:])}, expected a bool scalar")
        if self.applies("mask-mover"):
            self.check_mask_mover(masks, player, chance)
        if self.applies("mask-step"):
            self.check_mask_step(env, states, masks, player, chance)
        if self.applies("non-mover-ignored"):
            self.check_non_mover_ignored(env, states, masks, player, chance)
        if self.applies("chance-outcomes"):
            self.check_chance(env, states, chance)
            if self.applies("apply-chance"):
                self.check_apply_chance(env, states, chance)

    def check_mask_mover(self, masks, player, chance):
        """``mask-mover``: at decision states (every visited state is live) the mover has a legal
        action and the others none; at chance nodes nobody has one."""
        sequential = self.traits.dynamics == "sequential" and self.multi
        rows = masks if self.agent_lead else masks[:, None]
        has = rows.any(-1)  # [state, agent]
        mover = np.arange(rows.shape[1])[None, :] == player[:, None] if sequential else np.ones_like(has)
        for i in range(len(rows)):
            if chance[i] and has[i].any():
                raise EnvCheckError("mask-mover", f"agent {int(np.argmax(has[i]))} has legal actions at a chance node (visited state {i})")
            if chance[i]:
                continue
            if not has[i][mover[i]].all():
                who = f"the mover (agent {player[i]})" if sequential else f"agent {int(np.argmin(has[i]))}"
                raise EnvCheckError("mask-mover", f"{who} has no legal action in a live decision state (visited state {i})")
            if sequential and has[i][~mover[i]].any():
                raise EnvCheckError(
                    "mask-mover",
                    f"agent {int(np.argmax(has[i] & ~mover[i]))} is not to move (current_player is {player[i]}) but its "
                    f"mask row is not all zero (visited state {i})",
                )

    @property
    def multi(self) -> bool:
        return bool(self.agent_lead)

    def _joint(self, mover_action, player, others):
        """Joint actions [S, num_agents]: ``mover_action`` in the mover's row, ``others`` elsewhere."""
        if not self.multi:
            return jnp.asarray(mover_action, jnp.int32)
        rows = np.arange(self.num_agents)[None, :] == np.asarray(player)[:, None]
        return jnp.asarray(np.where(rows, np.asarray(mover_action)[:, None], others), jnp.int32)

    def check_mask_step(self, env, states, masks, player, chance):
        """``mask-step``: every action in every visited decision state; info["illegal_action"] is
        true exactly for the actions the mask rules out."""
        params, n_act = self.params, self.act_space.n
        live = ~chance
        sequential = self.traits.dynamics == "sequential" and self.multi
        key = jax.random.fold_in(self.key, 11)

        def illegal_flags(state, joint):
            info = env.step(key, state, joint, params)[5]
            if "illegal_action" not in info:
                raise EnvCheckError("mask-step", "a full_action_set env reports info['illegal_action'] (bool) on every step", "info")
            return info["illegal_action"]

        run = fast_jit(jax.vmap(illegal_flags))
        rows = masks if self.multi else masks[:, None]
        for a in range(n_act):
            if sequential:
                joint = self._joint(np.full(len(player), a), player, 0)
                expected = ~rows[np.arange(len(player)), player, a]
            else:
                joint = jnp.full((len(player),) + self.agent_lead, a, jnp.int32)
                expected = ~rows[:, :, a].all(-1)
            flags = self.call("mask-step", "env.step from visited states", run, states, joint)
            flags = np.asarray(flags)
            if flags.dtype != bool or flags.shape != (len(player),):
                raise EnvCheckError("mask-step", f"info['illegal_action'] is {flags.dtype}{list(flags.shape[1:])}, expected a bool scalar", "info['illegal_action']")
            _first_bad(live & (flags != expected), "mask-step", "info['illegal_action']", lambda i: (
                f"action {a} in visited state {i} (mask {rows[i].astype(np.uint8).tolist()}): step says "
                f"illegal={bool(flags[i])}, the mask says illegal={bool(expected[i])}"))

    def check_non_mover_ignored(self, env, states, masks, player, chance):
        """``non-mover-ignored``: the same mover's action with other values in the non-movers'
        rows (in range and out of it) gives the same step, leaf for leaf."""
        params, n_act, S = self.params, self.act_space.n, len(player)
        rng = np.random.default_rng(0)
        if self.masked:
            rows = masks if self.multi else masks[:, None]
            mover_rows = rows[np.arange(S), player]
            choice = np.array([rng.choice(np.flatnonzero(r)) if r.any() else 0 for r in mover_rows])
        else:
            choice = rng.integers(0, n_act, S)
        key = jax.random.fold_in(self.key, 13)
        step = fast_jit(jax.vmap(lambda s, a: env.step(key, s, a, params)))
        ref = self.call("non-mover-ignored", "env.step from visited states", step, states, self._joint(choice, player, 0))
        for others in (rng.integers(0, n_act, (S, self.num_agents)), np.full((S, self.num_agents), -1), np.full((S, self.num_agents), n_act + 5)):
            out = step(states, self._joint(choice, player, others))
            names = ("obs", "state", "reward", "terminated", "truncated", "info")
            diff = first_difference(dict(zip(names, ref)), dict(zip(names, out)), exact=True)
            if diff:
                raise EnvCheckError(
                    "non-mover-ignored",
                    f"changing only the non-movers' actions (to {others[0].tolist()} in the first state) changed "
                    f"the step's result (element {diff[1]}); a sequential step reads the current player's row only",
                    diff[0],
                )

    def check_chance(self, env, states, chance):
        """``chance-outcomes``: probabilities at the visited chance nodes, then CHANCE_DRAWS steps
        from the first one: the outcomes drawn follow chance_outcomes (chi-square at level
        CHANCE_LEVEL), impossible ones never come, and apply_chance reproduces step's state."""
        if not chance.any():
            raise EnvCheckError(
                "chance-outcomes",
                f"traits.chance is 'explicit_stochastic' but none of {len(chance)} visited states is a chance node",
            )
        params = self.params
        idx = np.flatnonzero(chance)
        nodes = jax.tree.map(lambda x: x[idx], states)
        probs = self.call("chance-outcomes", "env.chance_outcomes", fast_jit(jax.vmap(lambda s: env.chance_outcomes(s, params))), nodes)
        probs = np.asarray(probs)
        if probs.dtype != np.float32 or probs.ndim != 2:
            raise EnvCheckError("chance-outcomes", f"chance_outcomes returned {probs.dtype}{list(probs.shape[1:])}, expected float32[K]")
        if (probs < 0).any() or not np.allclose(probs.sum(-1), 1.0, atol=1e-5):
            i = int(np.argmax((probs < 0).any(-1) | ~np.isclose(probs.sum(-1), 1.0, atol=1e-5)))
            raise EnvCheckError("chance-outcomes", f"chance_outcomes {probs[i].tolist()} at a chance node: probabilities are >= 0 and sum to 1")
        node = jax.tree.map(lambda x: x[idx[0]], states)
        p = probs[0]
        action = jnp.zeros(self.agent_lead, jnp.int32)
        keys = jax.random.split(jax.random.fold_in(self.key, 17), CHANCE_DRAWS)
        base_state = getattr(env, "unwrapped_state", lambda s: s)

        def draw(key):
            _, stepped, *_, info = env.step(key, node, action, params)
            if "chance_outcome" not in info:
                raise EnvCheckError("chance-outcomes", "step at a chance node reports the outcome drawn in info['chance_outcome']", "info")
            outcome = info["chance_outcome"]
            applied = env.apply_chance(node, outcome, params)
            same = jax.tree.map(lambda x, y: jnp.all(x == y), base_state(stepped), base_state(applied))
            return outcome, jnp.all(jnp.stack(jax.tree.leaves(same)))

        outcomes, same = self.call("chance-outcomes", "env.step at a chance node", fast_jit(jax.vmap(draw)), keys)
        outcomes, same = np.asarray(outcomes), np.asarray(same)
        if ((outcomes < 0) | (outcomes >= len(p))).any():
            raise EnvCheckError("chance-outcomes", f"info['chance_outcome'] {outcomes.min()}..{outcomes.max()} at a chance node, expected indices into chance_outcomes' {len(p)}")
        if not same.all():
            raise EnvCheckError(
                "chance-outcomes",
                f"apply_chance(state, {outcomes[int(np.argmin(same))]}) differs from the state step reached drawing that outcome",
            )
        counts = np.bincount(outcomes, minlength=len(p))
        if (counts[p == 0] > 0).any():
            raise EnvCheckError("chance-outcomes", f"step drew outcome {int(np.argmax(counts * (p == 0)))}, whose probability is 0")
        support = p > 0
        if support.sum() > 1:
            import scipy.stats

            expected = p[support].astype(np.float64) / p[support].astype(np.float64).sum() * CHANCE_DRAWS
            pvalue = scipy.stats.chisquare(counts[support], expected).pvalue
            if pvalue < CHANCE_LEVEL:
                raise EnvCheckError(
                    "chance-outcomes",
                    f"step's draws {counts.tolist()} in {CHANCE_DRAWS} steps do not follow chance_outcomes {p.tolist()} "
                    f"(chi-square p = {pvalue:.2g} < {CHANCE_LEVEL})",
                )

    def check_apply_chance(self, env, states, chance):
        """``apply-chance``: eager (host) calls at the first visited chance node: each outcome of
        probability > 0 is applied, each of probability 0, -1 and ``K`` (out of range) raise a
        ValueError; at the first visited decision state (if any) a possible outcome raises too."""
        params = self.params
        pick = lambda i: jax.tree.map(lambda x: x[i], states)  # noqa: E731
        node = pick(int(np.flatnonzero(chance)[0]))
        probs = np.asarray(env.chance_outcomes(node, params))
        possible = [int(o) for o in np.flatnonzero(probs > 0)]
        for o in possible:
            self.call("apply-chance", f"env.apply_chance(state, {o}) at a chance node (probability {probs[o]:g})", env.apply_chance, node, jnp.int32(o), params)
        bad = [(o, f"outcome {o} of probability 0") for o in np.flatnonzero(probs <= 0).tolist()]
        bad += [(-1, "outcome -1 (out of range)"), (len(probs), f"outcome {len(probs)} (out of range)")]
        cases = [(node, o, f"{why} at a chance node (chance_outcomes {probs.tolist()})") for o, why in bad]
        if (~chance).any() and possible:
            cases.append((pick(int(np.flatnonzero(~chance)[0])), possible[0], f"outcome {possible[0]} at a decision state (not a chance node)"))
        for state, o, why in cases:
            try:
                env.apply_chance(state, jnp.int32(o), params)
            except ValueError:
                continue
            except Exception as e:
                raise EnvCheckError("apply-chance", f"apply_chance of {why} raised {type(e).__name__}, expected a ValueError: {e}") from e
            raise EnvCheckError(
                "apply-chance",
                f"apply_chance accepted {why}; called with concrete arguments it must raise a ValueError "
                "(jaxenvs.core.check_chance_outcome does the checks)",
            )
