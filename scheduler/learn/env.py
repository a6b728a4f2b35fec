"""A Gymnasium environment over the trace replay: one step = one pod's placement.

``reset(seed=s)`` builds the episode for ``(trace, s)`` (the trace cycles with the
seed over ``traces``) exactly as the replay would, and returns the first pod that has
a feasible node. ``step(node)`` places the pod on ``node`` (an index into the
cluster's nodes; it must be feasible), then schedules forward to the next pod with a
feasible node; pods with none fail on the way. Observations are dicts of arrays
padded to the cluster's node count; ``info["action_mask"]`` marks the feasible nodes,
``info["edge_index"]`` holds the graph, ``info["candidates"]`` the feasible indices.

Reward, the consequence of the action: the GPU share (in GPUs) of the pods that
failed between this decision and the next one, negated, plus ``frag_coef`` times the
decrease of the cluster's fragment amount (GPUs) over the same interval. Summed
over an episode, the first part is the allocated GPU minus the arrived GPU; a
placement that strands capacity is charged when the pods it starves fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from scheduler.learn.episode import Episode, EpisodeSpec, make_episode
from scheduler.objects.pod import Pod
from scheduler.plugins.profiles import default_filters
from scheduler.policy.features import NODE_FEATURES, PAIR_FEATURES, POD_FEATURES
from scheduler.policy.graph import GraphBuilder, feasible_nodes
from scheduler.resources.gpu import MILLI_PER_GPU
from scheduler.state.cluster_state import ClusterState, IntArray
from scheduler.state.gpu_fit import gpus_fitting

Observation = dict[str, npt.NDArray[np.float32]]


class SchedulingEnv(gym.Env[Observation, int]):
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(
        self,
        traces: Sequence[str] = ("default",),
        node_fraction: float = 0.25,
        frag_coef: float = 0.0,
        tune: float = 1.3,
    ) -> None:
        self.traces = tuple(traces)
        self.node_fraction = node_fraction
        self.frag_coef = frag_coef
        self.tune = tune
        self.filters = default_filters()
        self.episode: Episode | None = None
        self.state = ClusterState()
        self.builder = GraphBuilder(None)
        self.position = 0
        self.candidates: IntArray = np.zeros(0, np.int64)
        self.gpu_choice: IntArray = np.zeros(0, np.int64)
        self.allocated_milli = 0
        self.arrived_milli = 0
        # Spaces are sized on reset (the node count depends on the sampled cluster).
        self._resize(1)

    def _resize(self, nodes: int) -> None:
        self.action_space = spaces.Discrete(nodes)  # type: ignore[assignment]
        self.observation_space = spaces.Dict(  # type: ignore[assignment]
            {
                "nodes": spaces.Box(-np.inf, np.inf, (nodes, len(NODE_FEATURES)), np.float32),
                "pairs": spaces.Box(-np.inf, np.inf, (nodes, len(PAIR_FEATURES)), np.float32),
                "pod": spaces.Box(-np.inf, np.inf, (len(POD_FEATURES),), np.float32),
            }
        )

    # ---- Gymnasium API ----------------------------------------------------------------

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,  # noqa: ARG002 - Gymnasium's signature
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(seed) if seed is not None else int(self.np_random.integers(1 << 30))
        trace = self.traces[episode_seed % len(self.traces)]
        self.episode = make_episode(EpisodeSpec(trace, episode_seed, self.node_fraction, self.tune))
        self.state = self.episode.fresh_state()
        self.builder = GraphBuilder(self.episode.typical)
        self._resize(len(self.state))
        self.position = 0
        self.allocated_milli = self.arrived_milli = 0
        failed, _ = self._advance()
        observation, info = self._observe()
        info["failed_gpus"] = failed
        return observation, info

    def step(self, action: int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        node = int(action)
        where = np.flatnonzero(self.candidates == node)
        if where.size == 0:
            raise ValueError(
                f"node {node} is not feasible for pod {self._pod().name} (see info['action_mask'])"
            )
        pod = self._pod()
        gpus = self._gpus(pod, node, int(where[0]))
        frag_before = self._cluster_frag()
        self.state.place(pod, self.state.nodes[node].name, gpus)
        self.allocated_milli += pod.gpu.total_milli if gpus else 0
        self.arrived_milli += pod.gpu.total_milli
        self.position += 1
        failed, done = self._advance()
        reward = -failed
        if self.frag_coef:
            reward += self.frag_coef * (frag_before - self._cluster_frag())
        observation, info = self._observe() if not done else self._terminal()
        info["failed_gpus"] = failed
        return observation, float(reward), done, False, info

    # ---- internals --------------------------------------------------------------------

    def _pod(self) -> Pod:
        assert self.episode is not None
        return self.episode.arrivals[self.position]

    def _gpus(self, pod: Pod, node: int, position: int) -> tuple[int, ...]:
        if not pod.gpu.count:
            return ()
        if pod.gpu.is_share:
            return (int(self.gpu_choice[position]),)
        fits = gpus_fitting(self.state, np.array([node], np.int64), pod.gpu)[0]
        return tuple(int(g) for g in np.flatnonzero(fits)[: pod.gpu.count])

    def _cluster_frag(self) -> float:
        nodes = np.arange(len(self.state), dtype=np.int64)
        return float(self.builder.frag.frag(self.state, nodes).sum()) / MILLI_PER_GPU

    def _advance(self) -> tuple[float, bool]:
        """Skip (fail) pods that fit nowhere; returns the failed GPUs and whether the
        episode is over."""
        assert self.episode is not None
        failed = 0
        while self.position < len(self.episode.arrivals):
            pod = self._pod()
            self.candidates = feasible_nodes(self.state, pod, self.filters)
            if self.candidates.size:
                return failed / MILLI_PER_GPU, False
            failed += pod.gpu.total_milli
            self.arrived_milli += pod.gpu.total_milli
            self.position += 1
        return failed / MILLI_PER_GPU, True

    def _observe(self) -> tuple[Observation, dict[str, Any]]:
        pod = self._pod()
        policy_input = self.builder.build(self.state, pod, self.candidates)
        self.gpu_choice = policy_input.gpu_choice
        n = len(self.state)
        pairs = np.zeros((n, len(PAIR_FEATURES)), np.float32)
        pairs[self.candidates] = policy_input.pair_x
        mask = np.zeros(n, np.bool_)
        mask[self.candidates] = True
        observation = {"nodes": policy_input.node_x.copy(), "pairs": pairs, "pod": policy_input.pod_x}
        return observation, self._info(mask)

    def _terminal(self) -> tuple[Observation, dict[str, Any]]:
        n = len(self.state)
        observation = {
            "nodes": self.builder.node_features(self.state).copy(),
            "pairs": np.zeros((n, len(PAIR_FEATURES)), np.float32),
            "pod": np.zeros(len(POD_FEATURES), np.float32),
        }
        return observation, self._info(np.zeros(n, np.bool_))

    def _info(self, mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
        assert self.episode is not None
        capacity = self.episode.capacity_milli
        return {
            "action_mask": mask,
            "candidates": self.candidates if mask.any() else np.zeros(0, np.int64),
            "edge_index": self.builder.edge_index,
            "arrived_percent": 100.0 * self.arrived_milli / capacity,
            "allocated_percent": 100.0 * self.allocated_milli / capacity,
        }
