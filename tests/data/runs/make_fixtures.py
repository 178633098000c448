#!/usr/bin/env python3
"""Writes the fixture run directories used by tests/test_export.cpp and tests/test_report.cpp.

The outcomes table below is chosen by hand; the expected numbers in the tests are computed by hand
from this table (see the comments there), not by running this script's logic. Records follow
traces/record.hpp (format_version 1). Re-run after editing: python3 make_fixtures.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM = "You write PTX kernels for sm_90a."
TASK = {"gemm_a": "Write C = A * B^T (bf16).", "mha_b": "Write attention forward (bf16)."}
COMPILED = {"ok", "incorrect", "runtime_error", "timeout", "suspicious", "launch_error", "nondeterministic"}

# (model, task, sample) -> list of turns: (status, correct, executed, speedup); "request_failed" = no response.
OUTCOMES = {
    ("alpha", "gemm_a", 0): [("compile_error",), ("incorrect", False), ("ok", True, True, 1.5)],
    ("alpha", "gemm_a", 1): [("ok", True, False, 0.6), ("ok", True, True, 0.9), ("ok", True, True, 1.25)],
    ("alpha", "gemm_a", 2): [("no_kernel",), ("compile_error",), ("request_failed",)],
    ("alpha", "mha_b", 0): [("ok", True, True, 1.1)],
    ("alpha", "mha_b", 1): [("runtime_error",), ("timeout",), ("incorrect", False)],
    ("alpha", "mha_b", 2): [("static_error",), ("ok", True, False, 0.5)],
    ("beta", "gemm_a", 0): [("compile_error",), ("compile_error",), ("compile_error",)],
    ("beta", "gemm_a", 1): [("incorrect", False), ("ok", True, True, 0.8), ("suspicious", True, True, 5.0)],
    ("beta", "mha_b", 0): [("ok", True, True, 2.0)],
    ("beta", "mha_b", 1): [("bad_manifest",), ("ok", True, False, 1.0), ("incorrect", False)],
}


def kernel(model, task, sample, turn):
    # alpha/mha_b/0/0 and beta/mha_b/0/0 are the same kernel up to comments and whitespace (dedup test).
    if task == "mha_b" and sample == 0 and turn == 0:
        if model == "alpha":
            return "// attention v1\n.version 8.5\n.target sm_90a\n.visible .entry attn(.param .u64 q)\n{\n  ret;\n}\n"
        return ".version 8.5 /* same kernel */\n.target   sm_90a\n.visible .entry attn(.param .u64 q) { ret; }"
    return (f"// {model} {task} sample {sample} turn {turn}\n.version 8.5\n.target sm_90a\n"
            f".visible .entry k_{model}_{task}_{sample}_{turn}(.param .u64 a)\n{{\n  mov.u32 %r1, {turn};\n  ret;\n}}\n")


def response_text(model, task, sample, turn, status):
    if status == "no_kernel":
        return "I am not sure how to write this kernel."
    manifest = json.dumps({"entry": "k", "grid": ["1", "1", "1"], "block": ["128", "1", "1"], "params": []})
    return f"Here is my kernel.\n```ptx\n{kernel(model, task, sample, turn)}```\n```json\n{manifest}\n```\n"


def verdict(task, status, correct=None, executed=None, speedup=None):
    order = ["parse", "static", "compile", "correctness", "execution", "timing"]
    fail_stage = {"no_kernel": "parse", "bad_manifest": "parse", "static_error": "static", "compile_error": "compile",
                  "runtime_error": "correctness", "timeout": "correctness", "incorrect": "correctness",
                  "suspicious": "timing"}.get(status)
    stages, failed = {}, False
    for st in order:
        if failed:
            s = "skipped"
        elif st == fail_stage:
            s, failed = status, True
        else:
            s = "ok"
        stages[st] = {"status": s, "summary": "", "diagnostics": [], "figures": {}, "wall_seconds": 0.1}
    return {"status": status, "task_id": task, "kernel_hash": "", "wall_seconds": 5.0, "settings": {},
            "environment": {}, "axes": {"correct": correct, "targets_executed": executed, "speedup": speedup},
            "stages": stages}


def feedback(status):
    return f"Your kernel failed: {status}. Fix it." if status != "ok" else "Correct. Make it faster."


def records():
    out = []
    for (model, task, sample), turns in OUTCOMES.items():
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK[task]}]
        for turn, outcome in enumerate(turns):
            status = outcome[0]
            last = turn == len(turns) - 1
            rec = {"format_version": 1, "run_id": "fixture-run", "model": model, "task_id": task, "sample": sample,
                   "turn": turn, "trajectory_id": f"{model}/{task}/{sample}", "messages": list(history),
                   "started_at": "2026-12-01T10:00:00Z", "finished_at": "2026-12-01T10:00:15Z"}
            if status == "request_failed":
                rec.update(response=None, candidate=None, verdict=None, feedback="", stop_reason="request_failed",
                           request_error={"kind": "http", "http_status": 500, "message": "server error"},
                           timings={"request_s": 30.0, "cpu_stages_s": 0.0, "gpu_stage_s": 0.0,
                                    "orchestrator_cpu_ms": 1})
                out.append(rec)
                break
            text = response_text(model, task, sample, turn, status)
            reasoning = f"Plan for {model} {task} {sample} turn {turn}: tile the problem."
            if (model, task, sample, turn) == ("beta", "mha_b", 1, 1):
                text = f"<think>{reasoning}</think>\n{text}"  # a server that inlines reasoning
                reasoning = ""
            rec["response"] = {"content": text, "reasoning": reasoning, "finish_reason": "stop",
                               "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "reasoning_tokens": 200},
                               "attempts": 1, "latency_seconds": 10.0}
            rec["request_error"] = None
            rec["candidate"] = None if status == "no_kernel" else {
                "language": "ptx", "kernel_source": kernel(model, task, sample, turn), "manifest_text": "{}",
                "kernel_hash": ""}
            rec["verdict"] = verdict(task, *outcome)
            rec["feedback"] = "" if last else feedback(status)
            rec["stop_reason"] = "turn_limit" if last else ""
            rec["timings"] = {"request_s": 10.0, "cpu_stages_s": 1.0, "gpu_stage_s": 4.0, "orchestrator_cpu_ms": 2}
            out.append(rec)
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": rec["feedback"]}]
    return out


def write(name, lines, run=True, tail=""):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    if run:
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump({"run_id": name, "format_version": 1, "config": {"turns": 3}}, f)
    with open(os.path.join(d, "trajectories.jsonl"), "w") as f:
        for r in lines:
            f.write(json.dumps(r) + "\n")
        f.write(tail)


def main():
    recs = records()
    write("two_models", recs)
    # A killed run: the last record cut short mid-line, and one garbage line in between.
    sub = [r for r in recs if r["model"] == "alpha" and r["task_id"] == "mha_b"]
    write("truncated", sub[:2], tail="this is not json\n" + json.dumps(sub[2])[:80])
    # Mixed versions: one record from a future format.
    future = dict(sub[0], format_version=2, sample=7)
    write("mixed_versions", [sub[0], future])
    write("empty", [])
    write("future_only", [future])


if __name__ == "__main__":
    main()
