"""Pure, jittable, composable wrappers (Gymnasium's names and semantics)."""

from jaxenvs.wrappers.base import AutoReset, TimeLimit, TimeLimitState, WithParams, Wrapper, same_step_reset, tree_select
from jaxenvs.wrappers.chance import FoldChanceNodes
from jaxenvs.wrappers.checked import CheckedActions, checked
from jaxenvs.wrappers.opponent import PlayAgainst, PlayAgainstState, random_legal_policy

__all__ = [
    "Wrapper",
    "WithParams",
    "TimeLimit",
    "TimeLimitState",
    "AutoReset",
    "CheckedActions",
    "checked",
    "FoldChanceNodes",
    "PlayAgainst",
    "PlayAgainstState",
    "random_legal_policy",
    "tree_select",
    "same_step_reset",
]
from jaxenvs.wrappers.action import ActionWrapper, ClipAction, RescaleAction, TransformAction
from jaxenvs.wrappers.episode_statistics import EpisodeStatisticsState, RecordEpisodeStatistics
from jaxenvs.wrappers.normalize import (
    NormalizeObservation,
    NormalizeObservationState,
    NormalizeReward,
    NormalizeRewardState,
    RunningMeanStd,
    normalize,
)
from jaxenvs.wrappers.observation import FlattenObservation, ObservationWrapper, TransformObservation
from jaxenvs.wrappers.relative_position import RelativePosition
from jaxenvs.wrappers.reward import TransformReward

__all__ += [
    "RecordEpisodeStatistics",
    "EpisodeStatisticsState",
    "ObservationWrapper",
    "FlattenObservation",
    "TransformObservation",
    "ActionWrapper",
    "TransformAction",
    "ClipAction",
    "RescaleAction",
    "TransformReward",
    "NormalizeObservation",
    "NormalizeObservationState",
    "NormalizeReward",
    "NormalizeRewardState",
    "RunningMeanStd",
    "normalize",
    "RelativePosition",
]
