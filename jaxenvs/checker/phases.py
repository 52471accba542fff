"""The checker (`Checker`): the phases every environment goes through, in `PHASES` order (its
traits and spaces, single-env jitted calls, vmap, the scanned rollout, a key-ignoring step), each
raising `EnvCheckError` with the id of the rule it found broken. The turn-based phases are its
part `jaxenvs.checker.turn_phases.TurnPhases`."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import DictKey, keystr

from jaxenvs import spaces
from jaxenvs._fast_compile import compiler_options, fast_jit
from jaxenvs.core import ActionError, Traits
from .results import CheckReport, EnvCheckError
from .rulebook import PHASES, RULEBOOK
from .trees import (aval, callback_primitives, contains_each, first_difference, first_leaf, index_label, leaves,
                    space_leaves, structure_difference)
from .turn_phases import TurnPhases

__all__ = ["Checker", "PYTHON_LOOP_STEPS"]

OBS_DTYPES = ("float32", "int32", "uint8")
PYTHON_LOOP_STEPS = 3  # single-env jitted steps compared against the scanned rollout


class Checker(TurnPhases):
    def __init__(self, env, params, key, num_steps, num_envs, skip):
        self.env = env
        self.params = params
        self.key = jax.random.key(0) if key is None else key
        self.T = num_steps
        self.B = num_envs
        self.skip = skip
        self.name = getattr(env, "name", type(env).__name__)

    # -- small helpers ------------------------------------------------------------------------
    def call(self, rule: str, what: str, fn, *args):
        try:
            return fn(*args)
        except EnvCheckError:
            raise
        except ActionError as e:
            raise EnvCheckError("action-sample", f"{what} rejected an action sampled from {self.act_space}: {e}") from e
        except jax.errors.UnexpectedTracerError as e:
            self.check_no_leaked_tracer()
            raise EnvCheckError("no-leaked-tracer", f"{what} used a tracer leaked from an earlier trace: {e}") from e
        except Exception as e:
            raise EnvCheckError(rule, f"{what} raised {type(e).__name__}: {e}") from e

    def check_no_leaked_tracer(self):
        """Raise unless no attribute of the environment (or of any wrapper in its chain) holds a
        JAX tracer, as a ``step`` that saves its traced state on ``self`` leaves behind."""
        env, seen = self.env, set()
        while env is not None and id(env) not in seen:
            seen.add(id(env))
            for name, value in getattr(env, "__dict__", {}).items():
                try:
                    leaves = jax.tree.leaves(value)
                except Exception:  # not a pytree: nothing of JAX's inside
                    continue
                if any(isinstance(x, jax.core.Tracer) for x in leaves):
                    raise EnvCheckError(
                        "no-leaked-tracer",
                        f"after jax.jit(env.step), attribute {name!r} of {type(env).__name__} holds a traced value: "
                        "reset/step must be pure (return what changes in the state, store nothing on self)",
                        f"{type(env).__name__}.{name}",
                    )
            env = env.__dict__.get("env") if hasattr(env, "__dict__") else None

    # -- static checks ------------------------------------------------------------------------
    def check_static(self):
        env = self.env
        traits = getattr(env, "traits", None)
        if not isinstance(traits, Traits):
            raise EnvCheckError("traits", f"env.traits is {type(traits).__name__}, expected a jaxenvs.Traits instance")
        n = getattr(env, "num_agents", traits.num_agents)
        if n != traits.num_agents:
            raise EnvCheckError("traits", f"env.num_agents={n!r} but traits.num_agents={traits.num_agents}")
        agents = tuple(getattr(env, "agents", tuple(str(i) for i in range(n))))
        if len(agents) != n or len(set(agents)) != n or not all(isinstance(a, str) for a in agents):
            raise EnvCheckError("traits", f"env.agents={agents!r} must be {n} distinct strings (num_agents={n})")
        self.traits, self.num_agents = traits, n
        self.agent_lead = (n,) if n > 1 else ()

        if self.params is None:
            self.params = env.default_params
        validate = getattr(env, "validate_params", None)
        if validate is not None:
            try:
                validate(self.params)
            except Exception as e:
                raise EnvCheckError("params", f"validate_params rejected the params under test: {e}") from e

        for attr in ("observation_space", "action_space"):
            try:
                space = getattr(env, attr)(self.params)
            except Exception as e:
                raise EnvCheckError("spaces", f"env.{attr}(params) raised {type(e).__name__}: {e}") from e
            if not isinstance(space, spaces.Space):
                raise EnvCheckError("spaces", f"env.{attr}(params) returned {type(space).__name__}, not a jaxenvs Space")
        self.obs_space = env.observation_space(self.params)
        self.act_space = env.action_space(self.params)

        shape_fn = getattr(env, "batched_action_shape", None)
        if shape_fn is not None and self.act_space.shape is not None:
            want = self.agent_lead + tuple(self.act_space.shape)
            got = tuple(shape_fn(self.params))
            if got != want:
                raise EnvCheckError(
                    "action-shape",
                    f"batched_action_shape is {got}, expected {want} for {n} agent(s) of {self.act_space}",
                    "action",
                )

    # -- observation checks ---------------------------------------------------------------------
    def check_obs(self, obs, n_batch: int, where: str, names: tuple[str, ...], root: str = "obs"):
        """Dtype, shape and containment of ``obs`` with ``n_batch`` leading batch axes."""
        n_lead = n_batch + len(self.agent_lead)
        for path, space, sub in space_leaves(self.obs_space, obs):
            label = root + keystr(path)
            for leaf_path, leaf in leaves(sub, label):
                dt = str(jnp.result_type(leaf))
                if dt not in OBS_DTYPES:
                    raise EnvCheckError("obs-dtype", f"{dt} {where}; observations are {'/'.join(OBS_DTYPES)}", leaf_path)
            if space.shape is not None:
                if not isinstance(sub, jax.Array):
                    raise EnvCheckError("obs-structure", f"{type(sub).__name__} {where}, but its space is {space}", label)
                leaf = sub
                if space.dtype is not None and str(jnp.result_type(leaf)) != np.dtype(space.dtype).name:
                    raise EnvCheckError(
                        "obs-dtype",
                        f"{jnp.result_type(leaf)} {where} but its space {space} has {np.dtype(space.dtype).name}",
                        label,
                    )
                want = tuple(self.agent_lead) + tuple(space.shape)
                got = tuple(jnp.shape(leaf))[n_batch:]
                if got != want:
                    extra = f" (leading axis of {self.num_agents} agents)" if self.agent_lead else ""
                    raise EnvCheckError("obs-shape", f"shape {got} {where}, expected {want}{extra} for {space}", label)
            if self.applies("obs-in-space"):
                lead_shape = tuple(jnp.shape(first_leaf(sub)))[:n_lead]
                ok = contains_each(space, sub, n_lead)
                if not ok.all():
                    i = int(np.argmin(ok))
                    at = index_label(i, lead_shape, names + ("agent",))
                    value = jax.tree.map(lambda a: np.asarray(a).reshape((-1,) + a.shape[n_lead:])[i], sub)
                    raise EnvCheckError(
                        "obs-in-space", f"{value} {where}{' (' + at + ')' if at else ''} is not in {space}", label
                    )

    # -- reset/step output checks ---------------------------------------------------------------
    def check_reset_output(self, out):
        if not (isinstance(out, tuple) and len(out) == 2):
            got = f"a {type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            raise EnvCheckError("reset-structure", f"reset returned {got}; expected the tuple (obs, state)")
        return out

    def check_step_output(self, out, obs0, state0):
        if not (isinstance(out, tuple) and len(out) == 6):
            got = f"a {type(out).__name__}" + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else "")
            raise EnvCheckError(
                "step-structure", f"step returned {got}; expected (obs, state, reward, terminated, truncated, info)"
            )
        obs, state, reward, terminated, truncated, info = out
        for root, a, b in (("obs", obs0, obs), ("state", state0, state)):
            if jax.tree.structure(a) != jax.tree.structure(b):
                path = structure_difference(a, b, root)
                raise EnvCheckError(
                    "structure-stable",
                    f"pytree structure differs between reset and step:\n  reset: {jax.tree.structure(a)}\n"
                    f"  step:  {jax.tree.structure(b)}",
                    path,
                )
            for (path, x), (_, y) in zip(leaves(a, root), leaves(b, root)):
                (sx, dx, _), (sy, dy, _) = aval(x), aval(y)
                if sx != sy:
                    raise EnvCheckError("shape-stable", f"shape {sx} after reset but {sy} after step", path)
                if dx != dy:
                    raise EnvCheckError(
                        "dtype-stable",
                        f"{dx} after reset but {dy} after step; a lax.scan carry needs identical dtypes",
                        path,
                    )
        rdt, rshape = str(jnp.result_type(reward)), tuple(jnp.shape(reward))
        if rdt != "float32":
            raise EnvCheckError("reward-dtype", f"reward has dtype {rdt}, expected float32", "reward")
        if rshape != self.agent_lead:
            want = f"float32{list(self.agent_lead)} (one per agent)" if self.agent_lead else "a float32 scalar"
            raise EnvCheckError("reward-shape", f"reward has shape {rshape}, expected {want}", "reward")
        for name, flag in (("terminated", terminated), ("truncated", truncated)):
            fdt = str(jnp.result_type(flag))
            if fdt != "bool":
                raise EnvCheckError("flag-dtype", f"{name} has dtype {fdt}, expected bool", name)
            if tuple(jnp.shape(flag)) != ():
                raise EnvCheckError(
                    "flag-shape",
                    f"{name} has shape {tuple(jnp.shape(flag))}, expected a scalar (flags are per episode, not per agent)",
                    name,
                )
        self.check_info_structure(info, obs)
        return out

    def check_info_structure(self, info, obs):
        if not isinstance(info, Mapping):
            raise EnvCheckError("info-structure", f"info is {type(info).__name__}, expected a dict", "info")
        for k, v in info.items():
            path = "info" + keystr((DictKey(k),))
            if not isinstance(k, str):
                raise EnvCheckError("info-structure", f"info key {k!r} is not a string", path)
            if k == "final_obs":
                if jax.tree.structure(v) != jax.tree.structure(obs):
                    msg = "info['final_obs'] does not have the observation's structure"
                    raise EnvCheckError("info-structure", msg, path)
            elif not isinstance(v, jax.Array):
                raise EnvCheckError(
                    "info-structure", f"info values are arrays (info is a flat dict), got {type(v).__name__}", path
                )

    def info_signature(self, info, n_lead: int = 0) -> dict:
        return {p: (a[0][n_lead:], a[1]) for p, a in ((p, aval(x)) for p, x in leaves(info, "info"))}

    def check_info_same(self, ref: dict, other: dict, what: str):
        for p in list(ref) + [p for p in other if p not in ref]:
            if p not in other:
                raise EnvCheckError("info-stable", f"key present in the first step's info but missing {what}", p)
            if p not in ref:
                raise EnvCheckError("info-stable", f"key absent from the first step's info but present {what}", p)
            if ref[p] != other[p]:
                msg = f"(shape, dtype) {ref[p]} in the first step's info but {other[p]} {what}"
                raise EnvCheckError("info-stable", msg, p)

    # -- phases ---------------------------------------------------------------------------------
    def make_inputs(self):
        """Keys and random actions of the rollout, drawn once (outside the checked programs).

        Env ``b`` resets with ``reset_keys[b]`` and takes ``actions[t, b]`` with ``step_keys[t, b]``;
        ``alt_step_keys`` replaces ``step_keys`` in the key-sensitivity run.
        """
        k_reset, k_step, k_act, k_alt = jax.random.split(self.key, 4)
        self.reset_keys = jax.random.split(k_reset, self.B)
        self.step_keys = jax.random.split(k_step, (self.T, self.B))
        self.alt_step_keys = jax.random.split(k_alt, (self.T, self.B))
        self.actions = self.act_space.sample(k_act, (self.T, self.B) + self.agent_lead)
        # envs with legal actions: the action of (t, b) is drawn from obs["action_mask"] with this key
        self.action_keys = jax.random.split(jax.random.fold_in(k_act, 1), (self.T, self.B))

    @property
    def masked(self) -> bool:
        return self.traits.action_style == "full_action_set"

    def act(self, key, obs, action):
        """The action taken in ``obs`` (one env): uniformly random among the legal ones of
        ``obs["action_mask"]`` for a ``full_action_set`` env, else the pre-drawn ``action``."""
        if not self.masked:
            return action
        return self.act_space.sample(key, self.agent_lead, mask=obs["action_mask"])

    def check_single(self):
        """Jitted single-env reset and a few steps: structure, dtypes, trace counts."""
        env, params = self.env, self.params
        self.make_inputs()
        traces = {"reset": 0, "step": 0}

        def reset_fn(key, params):
            traces["reset"] += 1
            return env.reset(key, params)

        def step_fn(key, state, action, params):
            traces["step"] += 1
            return env.step(key, state, action, params)

        jreset, jstep = fast_jit(reset_fn), fast_jit(step_fn)
        obs0, state0 = self.check_reset_output(self.call("jit", "jax.jit(env.reset)", jreset, self.reset_keys[0], params))
        self.check_obs(obs0, 0, "after reset", ())
        if self.applies("mask-structure"):
            self.check_mask_obs(obs0, state0, "after reset")
        for path, x in leaves(state0, "state"):
            if not isinstance(x, jax.Array):
                raise EnvCheckError("reset-structure", f"state leaves are arrays, got {type(x).__name__}", path)

        ok = contains_each(self.act_space, self.actions, 2 + len(self.agent_lead))
        if not ok.all():
            bad = jax.tree.map(lambda a: np.asarray(a).reshape((-1,) + a.shape[2 + len(self.agent_lead) :]), self.actions)
            bad = jax.tree.map(lambda a: a[int(np.argmin(ok))], bad)
            raise EnvCheckError("action-sample", f"{bad} sampled from {self.act_space} is not contained in it", "action")

        loop, state, first_state_out, obs = [], state0, None, obs0
        for t in range(PYTHON_LOOP_STEPS):
            k, a = self.step_keys[t, 0], jax.tree.map(lambda x: x[t, 0], self.actions)
            a = self.act(self.action_keys[t, 0], obs, a)
            out = self.check_step_output(self.call("jit", "jax.jit(env.step)", jstep, k, state, a, params), obs0, state0)
            self.check_obs(out[0], 0, f"after step {t}", ())
            loop.append(out)
            obs, state = out[0], out[1]
            first_state_out = out[1] if first_state_out is None else first_state_out
        self.call("jit", "jax.jit(env.reset)", jreset, self.reset_keys[-1], params)
        self.check_no_leaked_tracer()

        info_ref = self.info_signature(loop[0][5])
        for t, out in enumerate(loop[1:], 1):
            self.check_info_same(info_ref, self.info_signature(out[5]), f"in step {t}'s info")

        if self.applies("retrace"):
            calls = {"reset": 2, "step": len(loop)}
            for name, n in traces.items():
                if n == 1:
                    continue
                what = f"jax.jit(env.{name}) traced {n} times in {calls[name]} calls with the same shapes"
                if name == "step":  # the usual cause: a state leaf whose weak type changes
                    for (path, x), (_, y) in zip(leaves(state0, "state"), leaves(first_state_out, "state")):
                        wx, wy = ("weakly typed" if aval(v)[2] else "strongly typed" for v in (x, y))
                        if wx != wy:
                            raise EnvCheckError(
                                "retrace",
                                f"{what}: the leaf is {wx} after reset but {wy} after step (give it an explicit "
                                "dtype in both, e.g. jnp.int32(0) or .astype)",
                                path,
                            )
                raise EnvCheckError("retrace", what)
        self.single = obs0, state0, loop, info_ref

    def check_vmap(self):
        """Trace reset and step vmapped over a batch of keys, then over a batch of params."""
        env, params, B = self.env, self.params, self.B
        actions = jax.tree.map(lambda x: x[0], self.actions)

        def reset_step(key, params, action):
            obs, state = env.reset(key, params)
            return env.step(key, state, action, params)

        self.call(
            "vmap",
            f"jax.vmap over {B} keys of (reset, step)",
            jax.eval_shape,
            jax.vmap(reset_step, (0, None, 0)),
            self.reset_keys,
            params,
            actions,
        )
        if self.applies("params-vmap"):
            batch = jax.tree.map(lambda x: jnp.stack([jnp.asarray(x)] * 2), params)
            self.call(
                "params-vmap",
                "jax.vmap over a batch of 2 params of (reset, step)",
                jax.eval_shape,
                jax.vmap(reset_step, (0, 0, None)),
                jax.random.split(self.reset_keys[0], 2),
                batch,
                jax.tree.map(lambda x: x[0], actions),
            )

    def rollout_fn(self):
        env = self.env

        def rollout(reset_keys, step_keys, actions, params, action_keys=self.action_keys):
            """reset_keys [B], step_keys [T, B], actions [T, B, ...] -> first obs/state, trajectory."""
            obs0, state0 = jax.vmap(env.reset, (0, None))(reset_keys, params)

            def body(carry, xs):
                obs, state = carry
                keys, actions, akeys = xs
                actions = jax.vmap(self.act)(akeys, obs, actions)
                obs, state, reward, terminated, truncated, info = jax.vmap(env.step, (0, 0, 0, None))(
                    keys, state, actions, params
                )
                out = {
                    "action": actions,
                    "obs": obs,
                    "state": state,
                    "reward": reward,
                    "terminated": terminated,
                    "truncated": truncated,
                    "info": info,
                }
                return (obs, state), out

            _, traj = jax.lax.scan(body, (obs0, state0), (step_keys, actions, action_keys))
            return {"obs": obs0, "state": state0}, traj

        return rollout

    def check_rollout(self):
        env, params, B, T = self.env, self.params, self.B, self.T
        obs0, state0, loop, info_ref = self.single
        inputs = (self.reset_keys, self.step_keys, self.actions, params)
        rollout = self.rollout_fn()
        try:
            traced = fast_jit(rollout).trace(*inputs)
        except EnvCheckError:
            raise
        except Exception as e:
            raise EnvCheckError("scan", f"a lax.scan rollout of env.step raised {type(e).__name__}: {e}") from e
        if self.applies("no-callbacks"):
            found = callback_primitives(traced.jaxpr)
            if found:
                raise EnvCheckError(
                    "no-callbacks",
                    f"reset/step contain host callbacks {sorted(set(found))}; environments run entirely on the device",
                )
        compiled = self.call(
            "jit", "compiling the rollout", lambda: traced.lower().compile(compiler_options(jax.default_backend()))
        )
        first, traj = compiled(*inputs)

        # batched shapes are the single-env shapes behind a batch axis
        for root, single, batched in (("obs", obs0, first["obs"]), ("state", state0, first["state"])):
            for (path, x), (_, y) in zip(leaves(single, root), leaves(batched, root)):
                if (B,) + aval(x)[0] != aval(y)[0] or aval(x)[1] != aval(y)[1]:
                    msg = f"{aval(x)[:2]} unbatched but {aval(y)[:2]} under vmap over {B} keys"
                    raise EnvCheckError("vmap", msg, path)

        self.check_obs(first["obs"], 1, "after reset", ("env",))
        self.check_obs(traj["obs"], 2, "along the rollout", ("step", "env"))
        if "final_obs" in traj["info"]:
            self.check_obs(traj["info"]["final_obs"], 2, "along the rollout", ("step", "env"), root="info['final_obs']")

        self.check_info_same(info_ref, self.info_signature(traj["info"], 2), "inside lax.scan under vmap")
        default = getattr(env, "default_params", None)
        if default is not None and default is not params:
            action = jax.tree.map(lambda x: x[0, 0], self.actions)

            def step_default(key):
                _, state = env.reset(key, default)
                return env.step(key, state, action, default)[5]

            info_default = self.call(
                "jit", "env.step with env.default_params", jax.eval_shape, step_default, self.reset_keys[0]
            )
            self.check_info_same(self.info_signature(info_default), info_ref, "with the params under test")

        if self.applies("reward-finite"):
            r = np.asarray(traj["reward"])
            ok = np.isfinite(r).reshape(-1)
            if not ok.all():
                i = int(np.argmin(ok))
                at = index_label(i, r.shape, ("step", "env", "agent"))
                raise EnvCheckError("reward-finite", f"reward {r.reshape(-1)[i]} at ({at}) is not finite", "reward")

        self.check_deterministic(compiled, inputs, first, traj)
        self.actions = traj["action"]  # what was taken (masked envs draw it from the mask)
        if self.applies("mask-autoreset"):
            self.check_mask_rollout(first, traj)

        if self.applies("key-sensitivity"):
            _, traj3 = compiled(self.reset_keys, self.alt_step_keys, self.actions, params)
            if first_difference(traj, traj3, exact=True) is None:
                raise EnvCheckError(
                    "key-sensitivity",
                    f"traits.chance is 'stochastic' but {B} envs x {T} steps gave the same trajectory for two different "
                    "step keys (does step ignore its key? If only reset is random, the chance trait is 'deterministic'; "
                    "for rare events raise num_steps/num_envs)",
                )
        self.terminated, self.truncated = int(np.sum(traj["terminated"])), int(np.sum(traj["truncated"]))

    def check_deterministic(self, compiled, inputs, first, traj):
        """``deterministic``: a rerun of the same compiled rollout gives the same trajectory, and the
        separately compiled single-env reset and steps (`check_single`) the same values."""
        obs0, state0, loop, _ = self.single
        _, traj2 = compiled(*inputs)
        diff = first_difference(traj, traj2, exact=True)
        if diff:
            raise EnvCheckError(
                "deterministic",
                f"two runs of the same compiled rollout with the same keys differ at element {diff[1]} (host "
                "callbacks or other randomness outside jax.random?)",
                diff[0],
            )
        names = ("obs", "state", "reward", "terminated", "truncated", "info")
        pairs = [("reset", {"obs": obs0, "state": state0}, jax.tree.map(lambda x: x[0], first))]
        pairs += [(f"step {t}", dict(zip(names, out)), jax.tree.map(lambda x: x[t, 0], traj)) for t, out in enumerate(loop)]
        for when, single, batched in pairs:
            diff = first_difference(single, batched, exact=False)
            if diff:
                raise EnvCheckError(
                    "deterministic",
                    f"the same keys gave different values at {when} (element {diff[1]}) in a jitted single-env call "
                    "and in the vmapped lax.scan rollout (randomness drawn at trace time, e.g. with numpy or "
                    "Python's random?)",
                    diff[0],
                )

    def check_step_ignores_key(self):
        """The base env's ``step_env`` under two different key sequences, same actions."""
        base, params = self.env.unwrapped, self.params

        def rollout(step_keys):
            _, state = jax.vmap(base.reset_env, in_axes=(0, None))(self.reset_keys, params)

            def body(state, xs):
                keys, action = xs
                out = jax.vmap(base.step_env, in_axes=(0, 0, 0, None))(keys, state, action, params)
                return out[1], out

            return jax.lax.scan(body, state, (step_keys, self.actions))[1]

        traj = fast_jit(rollout)(self.step_keys), fast_jit(rollout)(self.alt_step_keys)
        names = ("obs", "state", "reward", "terminated", "truncated", "info")
        diff = first_difference(dict(zip(names, traj[0])), dict(zip(names, traj[1])), exact=True)
        if diff:
            raise EnvCheckError(
                "step-ignores-key",
                f"traits.chance is 'deterministic' but the step's result changed with its key (element {diff[1]}); "
                "a step that draws randomness has chance='stochastic'",
                diff[0],
            )

    def applies(self, rule: str) -> bool:
        """``rule`` concerns this environment (its traits) and is not skipped."""
        return rule not in self.skip and RULEBOOK[rule].applies_to(self.traits)

    def run(self) -> CheckReport:
        self.check_static()  # the traits, which every other phase's rules are chosen by
        rules = tuple(r.id for r in RULEBOOK.values() if r.applies_to(self.traits))
        for phase in PHASES[1:]:
            if any(phase in RULEBOOK[r].phases for r in rules):
                getattr(self, phase)()
        return CheckReport(
            env=self.name,
            num_envs=self.B,
            num_steps=self.T,
            rules=tuple(r for r in rules if r not in self.skip),
            skipped=self.skip,
            terminated=self.terminated,
            truncated=self.truncated,
        )
