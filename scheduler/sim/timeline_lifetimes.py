"""What the timeline replay tells lifetime-aware plugins (``remaining_lifetimes``), and
the profile it runs with them.

- ``hidden``: nothing; a lifetime-aware profile then decides as its base does.
- ``oracle``: the lifetimes the replay itself runs (the trace's, on the replay's clock;
  infinite for a censored pod), less each resident's age: the ceiling of what knowing
  lifetimes can give a plugin.
- ``model``: a ``scheduler.lifetimes`` model's median remaining lifetime at each pod's
  age, cross-fitted so no pod is forecast by a model fitted on it (``timeline_model``;
  the trace's clock: a ``time_scale`` other than 1 is refused).

A replay's ``lifetime_args`` (``KEY=VALUE`` pairs: ``weight=20``, ``blocked=NodeHours``)
are the lifetime-aware plugins' args, validated as a profile's ``pluginConfig`` is;
specs set them, and the lifetimes, only for profiles that run a lifetime-aware plugin
(``uses_lifetimes``), and their label then says so (``spec_label``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from scheduler.framework.profile import Profile
from scheduler.plugins.profile_config import ProfileConfig, ResolvedProfile
from scheduler.plugins.profiles import build, build_profile, preset, resolve
from scheduler.plugins.registry import ProfileContext
from scheduler.plugins.remaining_lifetimes import (
    HiddenLifetimes,
    OracleLifetimes,
    RemainingLifetimes,
    ResidentClock,
)
from scheduler.state.fragmentation import TypicalPods

LifetimeSource = Literal["hidden", "oracle", "model"]
LIFETIME_SOURCES: tuple[LifetimeSource, ...] = ("hidden", "oracle", "model")
LIFETIME_PLUGINS = frozenset({"FgdReserveLifetime", "GnnLifetimeScore"})


def uses_lifetimes(policy: str) -> bool:
    """Whether the preset ``policy`` runs a lifetime-aware plugin."""
    try:
        resolved = preset(policy)
    except ValueError:
        return False
    return any(name in LIFETIME_PLUGINS for name, _ in resolved.scores)


def lifetime_source(
    source: LifetimeSource,
    trace: str,
    pod_keys: Sequence[str],
    lifetimes_s: Iterable[float],
    clock: ResidentClock,
) -> RemainingLifetimes:
    """What ``source`` tells of the pods of ``trace`` (keys, and the lifetimes the replay
    runs, on its clock)."""
    if source == "hidden":
        return HiddenLifetimes()
    if source == "oracle":
        return OracleLifetimes(dict(zip(pod_keys, (float(t) for t in lifetimes_s), strict=True)), clock)
    if source == "model":
        from scheduler.sim.timeline_model import model_lifetimes  # noqa: PLC0415 - scipy, only when asked

        return model_lifetimes(trace, clock)
    raise ValueError(f"unknown lifetime source {source!r}; known: {', '.join(LIFETIME_SOURCES)}")


def lifetime_profile(
    policy: str,
    seed: int,
    typical: TypicalPods,
    checkpoint: str | None,
    lifetimes: RemainingLifetimes,
    args: Sequence[tuple[str, str]],
) -> tuple[Profile, np.random.Generator]:
    """``replay.seeded_profile`` with ``lifetimes`` in the profile's context, and
    ``args`` (when given) as the lifetime plugins' args."""
    ctx = ProfileContext(
        rng=np.random.default_rng(seed),
        typical_pods=typical,
        checkpoint=Path(checkpoint) if checkpoint else None,
        lifetimes=lifetimes,
    )
    if not args:
        return build_profile(policy, ctx), np.random.default_rng(seed)
    return build(resolve_with_args(policy, args), ctx), np.random.default_rng(seed)


def resolve_with_args(policy: str, args: Sequence[tuple[str, str]]) -> ResolvedProfile:
    """The preset ``policy`` with ``args`` as its lifetime plugins' ``pluginConfig``;
    ``ProfileConfigError`` naming the arg when one is not valid."""
    used = {name for name, _ in preset(policy).scores} & LIFETIME_PLUGINS
    config = ProfileConfig.model_validate(
        {
            "schedulerName": policy,
            "preset": policy,
            "pluginConfig": [{"name": name, "args": dict(args)} for name in sorted(used)],
        }
    )
    return resolve(config, where=f"--lifetime-arg of {policy}")


def spec_label(policy: str, lifetimes: LifetimeSource, args: Sequence[tuple[str, str]]) -> str:
    """The policy's name, with the lifetimes it was told and the args given, when not
    the defaults (``fgd-reserve-lifetime[oracle,weight=20]``)."""
    tags: list[str] = [lifetimes] if lifetimes != "hidden" else []
    tags += [f"{key}={value}" for key, value in args]
    return f"{policy}[{','.join(tags)}]" if tags else policy
