"""Reward functions over `ptxbench serve` for TRL's GRPO trainer and verl's custom reward hook.

The service returns the verdict's typed parts (compiled, correct, targets executed with counts and work
share, speedup with its interval, suspicious flags, generalization, feedback) and a scalar from its
configured formula (`ptxbench serve --reward`). These functions return that scalar; when the service
gives none (`--reward none`) they compute it here with the same formula (`scalar_from_parts`)."""

import os

from .client import Client, PtxbenchError

DEFAULT_FORMULA = {
    "compiled": 0.1,
    "correct": 0.4,
    "targets": 0.2,
    "speedup": 0.3,
    "speedup_cap": 2.0,
    "no_generalize": 0.5,
    "suspicious_value": 0.0,
    "timeout_value": 0.0,
}


def scalar_from_parts(parts, formula=None):
    """The service's formula (serve/reward.hpp) on the reward parts."""
    f = dict(DEFAULT_FORMULA, **(formula or {}))
    if parts.get("deadline_exceeded"):
        return float(f["timeout_value"])
    if parts.get("suspicious"):
        return float(f["suspicious_value"])
    r = 0.0
    if parts.get("compiled") is True:
        r += f["compiled"]
    if parts.get("correct") is True:
        r += f["correct"]
        if parts.get("targets_executed") is True:
            r += f["targets"]
        s = parts.get("speedup")
        if isinstance(s, (int, float)) and s > 0:
            r += f["speedup"] * min(s, f["speedup_cap"]) / f["speedup_cap"]
    g = parts.get("generalizes")
    if isinstance(g, dict) and g.get("value") is False:
        r *= f["no_generalize"]
    return float(r)


def _score(state, formula, on_error):
    reward = state.get("reward") if isinstance(state, dict) else None
    if not reward:  # error, or the client's own timeout
        return float(on_error)
    if reward.get("scalar") is not None and formula is None:
        return float(reward["scalar"])
    return scalar_from_parts(reward, formula)


def _completion_text(completion):
    """TRL gives a string (standard format) or a list of messages (conversational format)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        parts = [m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return "".join(p if isinstance(p, str) else "" for p in parts)
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


def make_grpo_reward(client=None, url=None, token=None, task_key="task", timeout=600.0, formula=None,
                     on_error=0.0, settings=None, max_concurrency=16):
    """A TRL GRPO reward function: reward_fn(prompts, completions, **kwargs) -> list[float].

    The task id of each sample comes from kwargs[task_key] (TRL passes the dataset's columns as lists).
    `timeout`: per sample, seconds (the service answers a late verdict as a timeout: `timeout_value`).
    `formula`: None = the service's scalar; a dict = this formula on the parts. `on_error`: the reward when
    the service could not be asked or reported an internal error."""
    if client is None:
        client = Client(url or os.environ.get("PTXBENCH_SERVE_URL", "http://127.0.0.1:8700"),
                        token=token or os.environ.get("PTXBENCH_SERVE_TOKEN"), max_concurrency=max_concurrency)

    def reward_fn(prompts, completions, **kwargs):
        tasks = kwargs.get(task_key)
        if tasks is None:
            raise ValueError(f"ptxbench reward: the dataset needs a '{task_key}' column with each prompt's task id")
        if isinstance(tasks, str):
            tasks = [tasks] * len(completions)
        if len(tasks) != len(completions):
            raise ValueError(f"ptxbench reward: {len(tasks)} task ids for {len(completions)} completions")
        requests = []
        for task, completion in zip(tasks, completions):
            r = {"task": task, "response": _completion_text(completion), "deadline_seconds": timeout}
            if settings:
                r["settings"] = settings
            requests.append(r)
        try:
            states = client.evaluate_many(requests, timeout=timeout)
        except PtxbenchError:
            return [float(on_error)] * len(completions)
        return [_score(s, formula, on_error) for s in states]

    reward_fn.__name__ = "ptxbench_reward"
    return reward_fn


_default_client = None


def _client():
    global _default_client
    if _default_client is None:
        _default_client = Client(os.environ.get("PTXBENCH_SERVE_URL", "http://127.0.0.1:8700"),
                                 token=os.environ.get("PTXBENCH_SERVE_TOKEN"))
    return _default_client


def compute_score_parts(data_source, solution_str, ground_truth, extra_info=None):
    """verl's custom reward hook, returning a dict: {"score": float, plus the typed parts}. The task id is
    extra_info["task"] when given, else ground_truth. Timeout per sample: extra_info["timeout"] or
    $PTXBENCH_SERVE_TIMEOUT (600 s)."""
    extra_info = extra_info or {}
    task = extra_info.get("task") or ground_truth
    timeout = float(extra_info.get("timeout") or os.environ.get("PTXBENCH_SERVE_TIMEOUT", "600"))
    try:
        state = _client().evaluate(task, response=solution_str, timeout=timeout)
    except PtxbenchError as e:
        return {"score": 0.0, "error": str(e)}
    reward = state.get("reward") or {}
    out = {"score": _score(state, None, 0.0), "state": state.get("state")}
    for key in ("compiled", "correct", "targets_executed", "speedup", "suspicious", "deadline_exceeded"):
        value = reward.get(key)
        out[key] = float(value) if isinstance(value, (bool, int, float)) else 0.0
    return out


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """verl's custom reward hook (custom_reward_function.name=compute_score): the scalar reward."""
    return compute_score_parts(data_source, solution_str, ground_truth, extra_info)["score"]
