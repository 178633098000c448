"""Client and RL reward functions for `ptxbench serve` (standard library only)."""

from .client import Client, PtxbenchError
from .rewards import compute_score, compute_score_parts, make_grpo_reward, scalar_from_parts

__all__ = [
    "Client",
    "PtxbenchError",
    "compute_score",
    "compute_score_parts",
    "make_grpo_reward",
    "scalar_from_parts",
]
