"""Point verl's custom_reward_function.path at this file (name: compute_score)."""

from ptxbench_client.rewards import compute_score, compute_score_parts  # noqa: F401
