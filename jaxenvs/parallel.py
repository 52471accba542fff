"""Deprecated: `jaxenvs.parallel` is now `jaxenvs.sharding` (what it does: shard env batches over
devices and hosts). This alias re-exports it for one release and warns on import."""

import warnings

from jaxenvs.sharding import *  # noqa: F401,F403
from jaxenvs.sharding import ENV_AXIS, __all__, batch_sharding, constrain_batch, env_mesh, initialize_distributed, to_host  # noqa: F401

warnings.warn(
    "jaxenvs.parallel is renamed jaxenvs.sharding; import from jaxenvs.sharding (the alias goes in the next release)",
    DeprecationWarning,
    stacklevel=2,
)
