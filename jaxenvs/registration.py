"""The environment registry: Gymnasium's ids, specs and ``make`` for functional environments.

Ids are ``[namespace/]Name[-vN]``. An unversioned id resolves to the latest registered version;
``"some.module:ns/Name-v0"`` imports ``some.module`` (which registers its envs) first.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import re
from typing import Any, Callable

import numpy as np

from jaxenvs.core import Environment, Traits
from jaxenvs.wrappers.base import AutoReset, TimeLimit, WithParams
from jaxenvs.wrappers.checked import CheckedActions
from jaxenvs import spaces

__all__ = ["EnvSpec", "register", "make", "spec", "env_id_of", "registry", "pprint_registry", "describe", "parse_env_id"]

# a namespace and a name each start with a letter or "_" (so neither is ever "." or ".." where an id
# becomes a file name: run directories are named after ids) and hold letters, digits, "_", "-", "."
ENV_ID_RE = re.compile(r"^(?:(?P<namespace>[^\W\d][\w.-]*)/)?(?P<name>[^\W\d][\w.-]*?)(?:-v(?P<version>[0-9]+))?$")
ENV_ID_RULE = ("an id is [namespace/]Name[-vN]: the namespace and the name each start with a letter or '_' and hold only "
               "letters, digits, '_', '-' and '.'; N is a number")


@dataclasses.dataclass
class EnvSpec:
    """What ``make`` needs to build an environment, and what it tells about it."""

    id: str
    entry_point: Callable[..., Environment] | str
    max_episode_steps: int | None = None
    reward_threshold: float | None = None
    nondeterministic: bool = False
    kwargs: dict = dataclasses.field(default_factory=dict)
    namespace: str | None = dataclasses.field(init=False)
    name: str = dataclasses.field(init=False)
    version: int | None = dataclasses.field(init=False)

    def __post_init__(self):
        self.namespace, self.name, self.version = parse_env_id(self.id)

    def load(self) -> Callable[..., Environment]:
        """The entry point as a callable (``"pkg.mod:Class"`` is imported)."""
        if callable(self.entry_point):
            return self.entry_point
        mod_name, _, attr = self.entry_point.partition(":")
        try:
            return getattr(importlib.import_module(mod_name), attr)
        except (ImportError, AttributeError) as e:
            raise ImportError(f"entry point {self.entry_point!r} of {self.id!r} cannot be loaded: {e}") from e


registry: dict[str, EnvSpec] = {}

# Namespaces registered on first use (their package is an optional extra, imported only then):
# namespace -> (package that must be installed, "module:function" that registers the ids).
LAZY_NAMESPACES: dict[str, tuple[str, str]] = {
    "gymnax": ("gymnax", "jaxenvs.envs.gymnax_env:register_gymnax_envs"),
}
_lazy_loaded: set[str] = set()


def _load_lazy_namespace(ns: str | None, installed_only: bool = False) -> None:
    """Register the ids of lazily registered namespace ``ns`` (once). With ``installed_only``, a
    namespace whose package is not installed is skipped silently (listings); otherwise its
    registering function raises an ImportError saying what to install."""
    if ns not in LAZY_NAMESPACES or ns in _lazy_loaded:
        return
    package, target = LAZY_NAMESPACES[ns]
    if installed_only and importlib.util.find_spec(package) is None:
        return
    mod_name, _, attr = target.partition(":")
    getattr(importlib.import_module(mod_name), attr)()
    _lazy_loaded.add(ns)


def load_lazy_namespaces() -> None:
    """Register the ids of every lazily registered namespace whose package is installed (what a
    full listing of the registry calls first)."""
    for ns in LAZY_NAMESPACES:
        _load_lazy_namespace(ns, installed_only=True)


def parse_env_id(env_id: str) -> tuple[str | None, str, int | None]:
    """Split ``[namespace/]Name[-vN]`` into ``(namespace, name, version)``; ValueError if malformed."""
    if not isinstance(env_id, str):
        raise TypeError(f"an environment id is a string, got {type(env_id).__name__}")
    m = ENV_ID_RE.fullmatch(env_id)
    if m is None:
        raise ValueError(f"malformed environment id {env_id!r}; {ENV_ID_RULE} (e.g. 'GridWorld-v0' or 'mylab/Maze-v2')")
    v = m.group("version")
    return m.group("namespace"), m.group("name"), None if v is None else int(v)


def register(
    id: str,
    entry_point: Callable[..., Environment] | str,
    max_episode_steps: int | None = None,
    reward_threshold: float | None = None,
    nondeterministic: bool = False,
    kwargs: dict | None = None,
) -> EnvSpec:
    """Register an environment under ``id``. Registering the same id twice is an error."""
    ns, name, version = parse_env_id(id)
    if id in registry:
        raise ValueError(f"environment id {id!r} is already registered (entry point {registry[id].entry_point!r})")
    if not (callable(entry_point) or (isinstance(entry_point, str) and ":" in entry_point)):
        raise TypeError(f"entry_point must be a callable or 'package.module:Attribute', got {entry_point!r}")
    if max_episode_steps is not None and (not isinstance(max_episode_steps, int) or max_episode_steps < 1):
        raise ValueError(f"max_episode_steps must be None or an int >= 1, got {max_episode_steps!r}")
    if version is None and any(
        s.namespace == ns and s.name == name and s.version is not None for s in registry.values()
    ):
        raise ValueError(f"{id!r} has no version but versioned ids of {name!r} exist; add '-vN'")
    unversioned = name if ns is None else f"{ns}/{name}"
    if version is not None and unversioned in registry:
        raise ValueError(
            f"{id!r} is versioned but the unversioned id {unversioned!r} is registered: an id is either "
            f"versioned or not (as in Gymnasium): keep {unversioned!r}, or register the versioned env under another name"
        )
    spec_ = EnvSpec(id, entry_point, max_episode_steps, reward_threshold, nondeterministic, dict(kwargs or {}))
    registry[id] = spec_
    return spec_


def _resolve(env_id: str) -> EnvSpec:
    if isinstance(env_id, str) and ":" in env_id:
        mod_name, _, env_id = env_id.partition(":")
        try:
            importlib.import_module(mod_name)
        except ImportError as e:
            raise ImportError(
                f"could not import module {mod_name!r} named in the environment id {mod_name + ':' + env_id!r} "
                f"(the module:id form imports the module, which registers the id): {e}"
            ) from e
    if env_id in registry:
        return registry[env_id]
    ns, name, version = parse_env_id(env_id)
    _load_lazy_namespace(ns)
    if env_id in registry:
        return registry[env_id]
    if version is None:
        versions = [s for s in registry.values() if s.namespace == ns and s.name == name]
        if versions:
            return max(versions, key=lambda s: -1 if s.version is None else s.version)
    close = close_ids(env_id)
    same_name = [s.id for s in registry.values() if s.name == name and s.namespace == ns]
    hint = same_name or close
    msg = f"no environment registered as {env_id!r}"
    msg += f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else f"; registered: {sorted(registry)}"
    msg += (
        f" (an environment of your own: 'my_module:{env_id}' imports my_module first, whose "
        f"jaxenvs.register({env_id!r}, ...) registers it)"
    )
    raise KeyError(msg)


def spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` of ``env_id`` (unversioned ids resolve to the latest version)."""
    return _resolve(env_id)


def env_id_of(env_id: str) -> str:
    """The canonical id of ``env_id``, the one it is registered under: a ``module:`` prefix imported
    and dropped, an unversioned id resolved to its latest version (``my_module:ns/Maze`` ->
    ``ns/Maze-v1``). Raises as `spec` does (KeyError, ValueError, ImportError)."""
    return _resolve(env_id).id


def _constructor_kwargs(factory) -> list[str] | None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def make(env_id: str, autoreset: bool = True, checked: bool = False, **kwargs: Any) -> Environment:
    """Build a registered environment, wrapped as its spec says.

    ``kwargs`` that name fields of the environment's params override ``env.default_params``; the
    others go to the constructor. ``TimeLimit(max_episode_steps)`` is applied when the spec (or a
    ``max_episode_steps`` kwarg) has one, then ``AutoReset`` unless ``autoreset=False``.
    ``checked=True`` adds `jaxenvs.wrappers.CheckedActions` so out-of-range actions raise
    under `jaxenvs.checked`.
    """
    for flag, value in (("autoreset", autoreset), ("checked", checked)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"make({env_id!r}): {flag} must be True or False, got {value!r}")
    spec_ = _resolve(env_id)
    factory = spec_.load()
    all_kwargs = {**spec_.kwargs, **kwargs}
    max_steps = all_kwargs.pop("max_episode_steps", spec_.max_episode_steps)

    ctor_names = _constructor_kwargs(factory)
    # params fields are only known once we have an instance: build with the constructor kwargs
    probe_ctor = {k: v for k, v in all_kwargs.items() if ctor_names is None or k in ctor_names}
    env = factory(**probe_ctor)
    if not isinstance(env, Environment):
        raise TypeError(f"entry point of {spec_.id!r} returned {type(env).__name__}, not a jaxenvs Environment")
    params = env.default_params
    param_names = [f.name for f in dataclasses.fields(params)] if dataclasses.is_dataclass(params) else []
    overrides = {k: v for k, v in all_kwargs.items() if k in param_names and k not in probe_ctor}
    unknown = [k for k in all_kwargs if k not in probe_ctor and k not in overrides]
    if unknown:
        valid = sorted(set(ctor_names or []) | set(param_names) | {"max_episode_steps", "autoreset", "checked"})
        raise TypeError(f"make({spec_.id!r}) got unknown keyword argument(s) {unknown}; valid: {valid}")
    if overrides:
        params = params.replace(**overrides)
    env.validate_params(params)
    # the base env holds the spec (wrappers forward it): an entry point may return a wrapped env
    env.unwrapped.spec = dataclasses.replace(spec_, max_episode_steps=max_steps, kwargs=all_kwargs)
    if overrides:
        env = WithParams(env, params)
    if checked:
        env = CheckedActions(env)
    if max_steps is not None:
        env = TimeLimit(env, max_steps)
    if autoreset:
        env = AutoReset(env)
    return env  # wrappers forward ``spec`` to the base env, which holds it


def pprint_registry(print_output: bool = True) -> str | None:
    """List the registered ids grouped by namespace, with their traits and, indented below each, one
    line about the env (``jaxenvs list`` prints this listing too); returns it as a string instead
    when ``print_output`` is False."""
    groups: dict[str, list[EnvSpec]] = {}
    load_lazy_namespaces()
    for s in registry.values():
        groups.setdefault(s.namespace or "(core)", []).append(s)
    lines = []
    for ns in sorted(groups):
        lines.append(f"===== {ns} =====")
        for s in sorted(groups[ns], key=lambda s: s.id):
            try:
                entry = s.load()
                traits = getattr(entry, "traits", None)  # a class attribute: no env is built
            except ImportError as e:  # one entry point that cannot be loaded must not hide the others
                entry, traits = None, f"(cannot be loaded: {' '.join(str(e).split())})"
            if isinstance(traits, Traits):
                t = f"agents={traits.num_agents} {traits.dynamics} {traits.chance} {traits.utility}"
            else:
                t = traits if isinstance(traits, str) else ""
            lines.append(f"{s.id:<32} max_episode_steps={str(s.max_episode_steps):<5} {t}".rstrip())
            about = _description(entry)
            if about:
                lines.append(f"    {about}")
    out = "\n".join(lines)
    if print_output:
        print(out)
        return None
    return out


def _description(entry) -> str:
    """One line about an entry point for listings: its ``description`` attribute where it has one (a
    factory that stands for another library's class), else its docstring's first sentence."""
    text = getattr(entry, "description", None) or (getattr(entry, "__doc__", None) or "")
    text = " ".join(text.strip().split("\n\n")[0].split()).replace("``", "")
    return text if len(text) <= 100 else text[:99].rstrip() + "…"


def _number(x) -> str:
    """The shortest text that reads back as the same float32/int (``0.1``, not ``0.10000000149011612``)."""
    import numpy as np

    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer):
        return str(int(x))
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return np.format_float_positional(x.astype(np.float32)[()], unique=True, trim="-")


def format_space(space) -> str:
    """A space as readable text: bounds of a Box as the shortest numbers that round-trip,
    one number when all bounds are equal; Dict and Tuple spaces recursively."""
    import numpy as np

    if isinstance(space, spaces.Box):
        def bound(b):
            b = np.asarray(b)
            if b.size and np.all(b == b.flat[0]):
                return _number(b.flat[0])
            return "[" + ", ".join(_number(v) for v in b.reshape(-1)) + "]"

        try:
            lo, hi = bound(space.low), bound(space.high)
        except Exception:  # traced bounds
            return repr(space)
        return f"Box({lo}, {hi}, {space.shape}, {np.dtype(space.dtype).name})"
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {format_space(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, spaces.Tuple):
        return "Tuple(" + ", ".join(format_space(v) for v in space.spaces) + ")"
    return repr(space)


def _action_lines(base, space) -> list[str]:
    names = base.ACTION_NAMES
    if names and isinstance(space, spaces.Discrete):
        return [f"    {space.start + i} = {name}" for i, name in enumerate(names)]
    return []


def describe(env_id: str | Environment) -> str:
    """A human-readable description of ``env_id`` (what ``jaxenvs describe`` prints): spec,
    spaces, what the actions mean, params with their defaults, traits. An environment built by
    `make` may be passed instead of its id."""
    env = make(env_id, autoreset=False) if isinstance(env_id, str) else env_id
    base = env.unwrapped
    params = env.default_params
    lines = [f"{env.spec.id}  ({type(base).__module__}.{type(base).__name__})"]
    doc = (type(base).__doc__ or "").strip().splitlines()
    if doc:
        lines.append("  " + doc[0])
    lines.append(f"  observation_space: {format_space(env.observation_space(params))}" + (
        " (per agent)" if env.multi_agent else ""))
    action_space = env.action_space(params)
    lines.append(f"  action_space:      {format_space(action_space)}" + (" (per agent)" if env.multi_agent else ""))
    lines.extend(_action_lines(base, action_space))
    if dataclasses.is_dataclass(params):
        for f in dataclasses.fields(params):
            lines.append(f"  param {f.name} = {getattr(params, f.name)!r}")
    for k, v in base.traits.as_dict().items():
        if k == "dynamics" and not env.multi_agent:
            continue  # simultaneous or sequential moves only mean something with several agents
        lines.append(f"  trait {k}: {v}")
    lines.append(f"  max_episode_steps: {env.spec.max_episode_steps}")
    lines.append(f"  reward_threshold: {env.spec.reward_threshold}")
    if env.multi_agent:
        lines.append(f"  agents: {env.agents}")
    return "\n".join(lines)


def close_ids(env_id: str, n: int = 3, cutoff: float = 0.75) -> list[str]:
    """Registered ids that look like a misspelling of ``env_id`` (case-insensitive difflib ratio
    at least ``cutoff``, best first): ``GridWrold-v0`` -> ``GridWorld-v0``, ``Foo-v0`` -> none."""
    by_lower: dict[str, list[str]] = {}
    for k in registry:
        by_lower.setdefault(k.lower(), []).append(k)
    found = difflib.get_close_matches(env_id.lower(), list(by_lower), n=n, cutoff=cutoff)
    return [k for low in found for k in by_lower[low]][:n]
