"""The promotion gate: a candidate policy replaces the incumbent only if, on a replay
of recent arrivals it did not train on, it beats both the incumbent and the
heuristic fallback by a margin (percentage points of the twin's fitness)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.online.tuning import fitness
from scheduler.online.twin import TwinEpisode, mean_fitness
from scheduler.plugins.profiles import build_profile
from scheduler.plugins.registry import ProfileContext
from scheduler.policy.model import NodeScorer


@dataclass(frozen=True)
class Verdict:
    promote: bool
    candidate: float
    incumbent: float
    fallback: float
    reason: str

    def describe(self) -> str:
        return (
            f"{'promote' if self.promote else 'reject'} ({self.reason}): candidate {self.candidate:.3f}, "
            f"incumbent {self.incumbent:.3f}, fallback {self.fallback:.3f}"
        )


def judge(
    candidate: NodeScorer,
    incumbent: NodeScorer,
    holdout: Sequence[TwinEpisode],
    fallback_profile: str,
    margin: float,
) -> Verdict:
    candidate_score = fitness(candidate, holdout)
    incumbent_score = fitness(incumbent, holdout)
    fallback_score = mean_fitness(
        holdout, lambda e: build_profile(fallback_profile, ProfileContext(typical_pods=e.typical))
    )
    if candidate_score < incumbent_score + margin:
        reason = "not better than the incumbent"
    elif candidate_score < fallback_score + margin:
        reason = "not better than the fallback"
    else:
        return Verdict(True, candidate_score, incumbent_score, fallback_score, "better than both")
    return Verdict(False, candidate_score, incumbent_score, fallback_score, reason)
