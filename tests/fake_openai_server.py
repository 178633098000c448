#!/usr/bin/env python3
"""A fake OpenAI-compatible server for the llm_clients tests (standard library only).

Usage: fake_openai_server.py --log FILE [--api-key KEY]
Binds 127.0.0.1 on a free port and prints the port on stdout's first line.

The behaviour of POST /v1/chat/completions is chosen by the request's model name,
"<behaviour>" or "<behaviour>#<tag>"; attempt counters are kept per full model name, so each
test uses its own tag. Every request is appended to the log file as one JSON line:
{"t": unix seconds, "model", "path", "authorization", "body"}.

Behaviours:
  normal            answer "Hello from <model>" with usage (also the default for unknown names)
  stream            SSE answer split across odd chunk boundaries, reasoning_content deltas, usage last
  stream-nodone     SSE with finish_reason but no [DONE]
  ratelimit         first attempt 429 with Retry-After: 1 (seconds), then normal
  ratelimit-date    first attempt 429 with Retry-After as an HTTP date 2 s ahead, then normal
  always429         429 with Retry-After: 30 every time
  burst500          attempts 1-3 answer 500/502/503, then normal
  always500         500 every time (the body echoes the Authorization header)
  hang              sleeps 5 s before answering
  stream-stall      SSE: one chunk, then silence for 5 s
  stream-slow       SSE: a chunk every 0.1 s for 3 s (trips request_timeout, never the idle timeout)
  malformed         200 with a body that is not JSON
  stream-malformed  SSE event that is not JSON
  stream-cut        SSE: two chunks, then the connection closes (no finish_reason, no [DONE])
  reasoning-content message.reasoning_content
  reasoning-field   message.reasoning
  think             <think>...</think> in content
  think-open        content starts after a bare </think> (template opened the tag)
  length            finish_reason "length", reasoning_tokens in completion_tokens_details
  n2                two choices
  error-200         200 with {"error": {...}}
  auth              401 (echoing the Authorization header it got) unless the bearer matches --api-key
  missing           404 model not found
  bad-request       400 with a 2000-character body
  big               a 10 MB content
  stream-done-nofinish  SSE: content, then [DONE] with no finish_reason (llama.cpp's server when another
                    request interrupts the generation); attempts after the first answer normally
  stream-framed     SSE: a 40,000-character answer in 4-character deltas with 200 bytes of framing each
  stream-nousage    SSE answer without any usage chunk (include_usage ignored)
  usage-implausible 100,000-character answer that reports 10 prompt and 20 completion tokens
  auth500           500 "No api key passed in" unless the bearer matches --api-key (a proxy's auth check)
  status-<N>        HTTP N with {"error": {"message": "status N: <tag>"}} (the part after '#', so a test can
                    put "model" in it)
Under the path prefix /nomodels (base_url .../nomodels/v1) the same POSTs are answered, but GET
/nomodels/v1/models fails with 400 (a proxy without its database).
  echo-messages     answers with the request's messages as JSON (system prompt placement tests)
  repair            a repairing model for GEMM tasks: turn 0 (no assistant message in the request yet) a
                    kernel that does not compile, later turns the fixed kernel (examples/scripted/);
                    other tasks get a response without a kernel
  demo-<P>          a model of skill P (0-100) for the report demo: answers any task that has reference
                    solutions (tasks/solutions/<task>/) with one of them, a probe (wrong on purpose), a copy
                    whose PTX does not compile, or no kernel; the chance of a working answer is P% on the
                    first turn and grows by 15 points a turn. Draws are seeded by (model, task, turn, how
                    many such requests came before), so a rerun gives the same mix. Streams when asked.
  teacher.<C1>+<C2>... a teacher for `ptxbench repairs`: it finds the student's failed attempt (the last
                    assistant message that is not its own) and tells its failure category from it (no kernel
                    block: no_kernel; the undeclared register break_ptx adds: compile_error; a copy of a
                    reference solution or probe: that folder's outcome in tasks/solutions/<task>/expected.json,
                    targets_not_executed for correct ones whose targets do not run). For the categories named
                    it answers the task's solution whose targets execute (with reasoning_content), for the
                    others an answer without a kernel. A request whose last message holds "## Verified repair"
                    (the explanation ptxbench asks for) gets an explanation naming the category.
  teacher-plain.<C>... the same without reasoning_content (so ptxbench can ask for an explanation).
"""
import argparse
import email.utils
import hashlib
import random
import re
import http.server
import json
import os
import socketserver
import sys
import threading
import time

LOCK = threading.Lock()
COUNTS = {}
ARGS = None


def completion(model, content, reasoning_key=None, reasoning=None, finish="stop", usage=None, choices=None):
    message = {"role": "assistant", "content": content}
    if reasoning_key:
        message[reasoning_key] = reasoning
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": choices or [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }
    return body


def chunk(model, delta=None, finish=None, usage=None, index=0):
    c = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model}
    c["choices"] = [] if delta is None and finish is None else [
        {"index": index, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        c["usage"] = usage
    return "data: " + json.dumps(c) + "\n\n"


MODELS = ["normal", "stream", "length", "repair"]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # bodies end at close, so a cut stream is a clean EOF

    def log_message(self, fmt, *args):  # keep the test output quiet
        pass

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

    def write(self, text):
        self.wfile.write(text.encode())
        self.wfile.flush()

    def do_GET(self):
        # The model list, as OpenAI-compatible servers serve it; used by the client to tell an unknown
        # model from a wrong base_url.
        if self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})
        elif self.path == "/nomodels/v1/models":
            self.send_json(400, {"error": {"message": "no database configured"}})
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            try:
                self.send_json(400, {"error": {"message": "request is not JSON"}})
            except (BrokenPipeError, ConnectionResetError):
                pass  # a client killed mid-request (the resume tests) sent part of a body and left
            return
        model = body.get("model", "")
        auth = self.headers.get("Authorization", "")
        with LOCK:
            COUNTS[model] = COUNTS.get(model, 0) + 1
            attempt = COUNTS[model]
            with open(ARGS.log, "a") as log:
                log.write(json.dumps({"t": time.time(), "model": model, "path": self.path,
                                      "authorization": auth, "body": body}) + "\n")
        if self.path not in ("/v1/chat/completions", "/nomodels/v1/chat/completions"):
            self.send_json(404, {"error": {"message": "no route " + self.path}})
            return
        behaviour = model.split("#")[0]
        self.request_body = body
        try:
            self.respond(behaviour, model, attempt, auth)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout / cancel tests)

    def respond(self, b, model, attempt, auth):
        if b == "stream":
            self.start_sse()
            # Events split mid-line and mid-JSON across writes; a comment keep-alive; CRLF line ends.
            events = [chunk(model, {"role": "assistant", "reasoning_content": "Let me "}),
                      chunk(model, {"reasoning_content": "think."}),
                      ": keep-alive\n\n",
                      chunk(model, {"content": "Hello"}).replace("\n\n", "\r\n\r\n"),
                      chunk(model, {"content": ", stream"}),
                      chunk(model, {"content": "ed world"}, finish="stop"),
                      chunk(model, usage={"prompt_tokens": 20, "completion_tokens": 9,
                                          "completion_tokens_details": {"reasoning_tokens": 3}}),
                      "data: [DONE]\n\n"]
            text = "".join(events)
            for i in range(0, len(text), 37):
                self.write(text[i:i + 37])
                time.sleep(0.002)
        elif b == "stream-done-nofinish":
            self.start_sse()
            if attempt == 1:
                self.write(chunk(model, {"content": "interrupted"}) + "data: [DONE]\n\n")
            else:
                self.write(chunk(model, {"content": "complete"}) + chunk(model, finish="stop") +
                           "data: [DONE]\n\n")
        elif b == "stream-framed":
            self.start_sse()
            pad = "p" * 160
            parts = []
            for i in range(10000):
                c = {"id": "chatcmpl-" + pad, "object": "chat.completion.chunk", "created": 1700000000,
                     "model": model, "choices": [{"index": 0, "delta": {"content": "abcd"}, "finish_reason": None}]}
                parts.append("data: " + json.dumps(c) + "\n\n")
            parts.append(chunk(model, finish="stop") + "data: [DONE]\n\n")
            self.write("".join(parts))
        elif b == "stream-nousage":
            self.start_sse()
            self.write(chunk(model, {"content": "x" * 4000}) + chunk(model, finish="stop") + "data: [DONE]\n\n")
        elif b == "usage-implausible":
            self.send_json(200, completion(model, "z" * 100000,
                                           usage={"prompt_tokens": 10, "completion_tokens": 20}))
        elif b == "auth500":
            if ARGS.api_key and auth == "Bearer " + ARGS.api_key:
                self.send_json(200, completion(model, "authorized"))
            else:
                self.send_json(500, {"error": {"message": "Authentication Error, No api key passed in.",
                                               "type": "auth_error", "param": "None", "code": "500"}})
        elif b == "echo-messages":
            self.send_json(200, completion(model, json.dumps(self.request_body.get("messages", []))))
        elif b == "stream-nodone":
            self.start_sse()
            self.write(chunk(model, {"content": "no done marker"}) + chunk(model, finish="stop"))
        elif b in ("ratelimit", "ratelimit-date"):
            if attempt == 1:
                if b == "ratelimit":
                    retry_after = "1"
                else:
                    retry_after = email.utils.formatdate(time.time() + 2, usegmt=True)
                self.send_json(429, {"error": {"message": "slow down"}}, {"Retry-After": retry_after})
            else:
                self.send_json(200, completion(model, "after rate limit"))
        elif b == "always429":
            self.send_json(429, {"error": {"message": "slow down"}}, {"Retry-After": "30"})
        elif b == "burst500":
            if attempt <= 3:
                self.send_json([500, 502, 503][attempt - 1], {"error": {"message": "overloaded"}})
            else:
                self.send_json(200, completion(model, "after 500s"))
        elif b == "always500":
            # Echoes the Authorization header it got, as some proxies do: the client must redact it.
            self.send_json(500, {"error": {"message": "internal error; request had Authorization: " + auth}})
        elif b == "hang":
            time.sleep(5)
            self.send_json(200, completion(model, "too late"))
        elif b == "stream-stall":
            self.start_sse()
            self.write(chunk(model, {"content": "first words"}))
            time.sleep(5)
        elif b == "stream-slow":
            self.start_sse()
            for i in range(30):
                self.write(chunk(model, {"content": "w%d " % i}))
                time.sleep(0.1)
            self.write(chunk(model, finish="stop") + "data: [DONE]\n\n")
        elif b == "malformed":
            data = b'{"choices": [{"message": {"content": "unterminated'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif b == "stream-malformed":
            self.start_sse()
            self.write(chunk(model, {"content": "ok so far"}) + "data: {not json\n\n")
        elif b == "stream-cut":
            self.start_sse()
            self.write(chunk(model, {"content": "partial answer "}) + chunk(model, {"content": "cut he"}))
            # returning closes the connection: no finish_reason, no [DONE]
        elif b == "reasoning-content":
            self.send_json(200, completion(model, "answer A", "reasoning_content", "thought A"))
        elif b == "reasoning-field":
            self.send_json(200, completion(model, "answer B", "reasoning", "thought B"))
        elif b == "think":
            self.send_json(200, completion(model, "<think>\nthought C\n</think>\n\nanswer C"))
        elif b == "think-open":
            self.send_json(200, completion(model, "thought D</think>answer D"))
        elif b == "length":
            self.send_json(200, completion(model, "truncated answ", finish="length",
                                           usage={"prompt_tokens": 5, "completion_tokens": 100,
                                                  "completion_tokens_details": {"reasoning_tokens": 60}}))
        elif b == "n2":
            choices = [{"index": i, "message": {"role": "assistant", "content": "choice %d" % i},
                        "finish_reason": "stop"} for i in range(2)]
            self.send_json(200, completion(model, "", choices=choices))
        elif b == "error-200":
            self.send_json(200, {"error": {"message": "backend exploded", "type": "server_error"}})
        elif b == "auth":
            if ARGS.api_key and auth == "Bearer " + ARGS.api_key:
                self.send_json(200, completion(model, "authorized"))
            else:
                # Like some real servers, echo what was received: the client must redact it.
                self.send_json(401, {"error": {"message": "Incorrect API key provided: " + auth[7:],
                                               "type": "invalid_request_error"}})
        elif b == "missing":
            self.send_json(404, {"error": {"message": "The model `%s` does not exist." % model}})
        elif b.startswith("status-"):
            status = int(b[len("status-"):])
            self.send_json(status, {"error": {"message": "status %d: %s" % (status, model.partition("#")[2])}})
        elif b == "bad-request":
            self.send_json(400, {"error": {"message": "bad request " + "x" * 2000}})
        elif b == "big":
            self.send_json(200, completion(model, "y" * (10 * 1000 * 1000)))
        elif b.startswith("demo-"):
            self.demo(b, model)
        elif b == "mix" or b.startswith("mix-"):
            self.mix(b, model)
        elif b.startswith("teacher.") or b.startswith("teacher-plain."):
            self.teacher(b, model)
        elif b == "repair":
            messages = self.request_body.get("messages", [])
            turn = sum(1 for m in messages if m.get("role") == "assistant")
            prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
            scripted = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "scripted")
            name = "no_kernel.md"
            if "gemm_" in prompt:
                name = "gemm_turn0_broken.md" if turn == 0 else "gemm_turn1_fixed.md"
            with open(os.path.join(scripted, name)) as f:
                self.send_json(200, completion(model, f.read()))
        else:
            self.send_json(200, completion(model, "Hello from " + model))


    def demo(self, behaviour, model):
        messages = self.request_body.get("messages", [])
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn == 0:  # history policy none: count the feedback messages instead
            turn = max(0, sum(1 for m in messages if m.get("role") == "user") - 1)
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks", "solutions")
        tasks = sorted((d for d in os.listdir(root) if d in prompt), key=len, reverse=True)
        task = tasks[0] if tasks else ""
        skill = max(0, min(100, int(behaviour[len("demo-"):] or "50"))) / 100.0
        key = (model, task, turn)
        with LOCK:
            DEMO_DRAWS[key] = DEMO_DRAWS.get(key, 0) + 1
            draw = DEMO_DRAWS[key]
        seed = int(hashlib.sha256(repr((key, draw)).encode()).hexdigest()[:16], 16)
        rng = random.Random(seed)
        reasoning = ""
        if not task:
            content = "I cannot find the task's id in the prompt, so here is no kernel."
        else:
            folders = sorted(os.listdir(os.path.join(root, task)))
            # Probes that hang or fault are left out: they cost the GPU minutes without adding to the demo.
            good = [f for f in folders if os.path.isdir(os.path.join(root, task, f)) and not f.startswith("probe_")]
            wrong = [f for f in folders if f.startswith("probe_") and f not in ("probe_endless_loop", "probe_illegal_address")]
            best = [f for f in good if f in ("wgmma_tma", "wgmma", "flash_fwd")] or good
            if rng.random() < min(0.95, skill + 0.15 * turn):
                folder = rng.choice(best) if rng.random() < skill else rng.choice(good)
                content = read_response(root, task, folder)
                reasoning = f"Turn {turn}: I will use the {folder} design for {task}."
            else:
                r = rng.random()
                if r < 0.45 and good:
                    folder = rng.choice(good)
                    content = break_ptx(read_response(root, task, folder))
                    reasoning = f"Turn {turn}: a quick edit of the {folder} design; I did not check the registers."
                elif r < 0.8 and wrong:
                    folder = rng.choice(wrong)
                    content = read_response(root, task, folder)
                    reasoning = f"Turn {turn}: trying the {folder} variant."
                else:
                    content = "I need to think more about the tiling before I write the kernel."
                    reasoning = f"Turn {turn}: not sure yet."
        usage = {"prompt_tokens": max(1, len(json.dumps(messages)) // 4),
                 "completion_tokens": max(1, (len(content) + len(reasoning)) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if self.request_body.get("stream"):
            self.start_sse()
            time.sleep(0.02 + 0.05 * rng.random())  # time to first token
            self.write(chunk(model, {"role": "assistant", "reasoning_content": reasoning}))
            for i in range(0, len(content), 4000):
                self.write(chunk(model, {"content": content[i:i + 4000]}))
            self.write(chunk(model, finish="stop"))
            self.write(chunk(model, usage=usage))
            self.write("data: [DONE]\n\n")
        else:
            body = completion(model, content, "reasoning_content", reasoning, usage=usage)
            self.send_json(200, body)


    def mix(self, behaviour, model):
        """An early-turn answer mix for throughput studies, drawn from the committed kernels of the task in
        the prompt: MIX_WEIGHTS of compile errors, incorrect probes, naive correct kernels, mid-speed kernels
        (mma.sync) and kernels near the library. `mix-N` seeds the draws (default 0)."""
        messages = self.request_body.get("messages", [])
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks", "solutions")
        tasks = sorted((d for d in os.listdir(root) if d in prompt), key=len, reverse=True)
        task = tasks[0] if tasks else ""
        with LOCK:
            MIX_DRAWS[behaviour] = MIX_DRAWS.get(behaviour, 0) + 1
            draw = MIX_DRAWS[behaviour]
        rng = random.Random(int(hashlib.sha256(repr((behaviour, draw)).encode()).hexdigest()[:16], 16))
        if not task:
            self.send_json(200, completion(model, "I cannot find the task's id in the prompt."))
            return
        kinds = mix_kinds(root, task)
        r, category = rng.random(), None
        for name, weight in MIX_WEIGHTS:
            r -= weight
            if r < 0 and kinds.get(name):
                category = name
                break
        category = category or next(name for name, _ in MIX_WEIGHTS if kinds.get(name))
        folder = rng.choice(kinds[category])
        content = read_response(root, task, folder)
        if category == "compile_error":
            content = break_ptx(content)
        reasoning = "mix: %s (%s)" % (category, folder)
        usage = {"prompt_tokens": max(1, len(json.dumps(messages)) // 4),
                 "completion_tokens": max(1, len(content) // 4), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        self.send_json(200, completion(model, content, "reasoning_content", reasoning, usage=usage))

    def teacher(self, behaviour, model):
        kind, _, fixes = behaviour.partition(".")
        fixes = set(fixes.split("+"))
        messages = self.request_body.get("messages", [])
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tasks", "solutions")
        tasks = sorted((d for d in os.listdir(root) if d in prompt), key=len, reverse=True)
        task = tasks[0] if tasks else ""
        attempts = [str(m.get("content", "")) for m in messages
                    if m.get("role") == "assistant" and not str(m.get("content", "")).startswith(TEACHER_MARK)]
        last = str(messages[-1].get("content", "")) if messages else ""
        if "## Verified repair" in last:
            attempt = last.split("## Failed attempt", 1)[-1].split("## Feedback on it", 1)[0]
            category = failure_category(root, task, attempt)
            content = ("The failed attempt ended in %s. The verified repair replaces it with a kernel whose "
                       "wgmma and TMA instructions do the work, so it is correct and its targets run." % category)
            usage = {"prompt_tokens": max(1, len(json.dumps(messages)) // 4),
                     "completion_tokens": max(1, len(content) // 4)}
            self.send_json(200, completion(model, content, usage=usage))
            return
        category = failure_category(root, task, attempts[-1] if attempts else "")
        fix = fixing_solution(root, task) if category in fixes else None
        reasoning = ""
        if fix:
            content = TEACHER_MARK + "\n" + read_response(root, task, fix)
            reasoning = "The attempt failed with %s; I rewrote it on the %s design." % (category, fix)
        else:
            content = TEACHER_MARK + "\nI could not find what is wrong with this attempt (%s)." % category
        usage = {"prompt_tokens": max(1, len(json.dumps(messages)) // 4),
                 "completion_tokens": max(1, (len(content) + len(reasoning)) // 4)}
        if kind == "teacher-plain" or not reasoning:
            self.send_json(200, completion(model, content, usage=usage))
        else:
            self.send_json(200, completion(model, content, "reasoning_content", reasoning, usage=usage))


DEMO_DRAWS = {}
MIX_DRAWS = {}
# The realistic mix of early-turn answers (bench_orchestrator --model mix, scripts/gpu_check.sh GPU_CHECK_MIX).
MIX_WEIGHTS = [("compile_error", 0.30), ("incorrect", 0.25), ("naive", 0.25), ("mid", 0.15), ("near", 0.05)]


def mix_kinds(root, task):
    """The task's committed kernels by mix category, from the folder names and expected.json."""
    with open(os.path.join(root, task, "expected.json")) as f:
        expected = json.load(f)
    kinds = {name: [] for name, _ in MIX_WEIGHTS}
    for folder, outcome in sorted(expected.items()):
        if folder.startswith("_") or not os.path.exists(os.path.join(root, task, folder, "response.md")):
            continue
        if folder.startswith("probe_"):
            if outcome.get("status") == "incorrect":
                kinds["incorrect"].append(folder)
        elif folder.startswith("simple"):
            kinds["naive"].append(folder)
        elif folder in ("mma_sync", "flash_fwd"):
            kinds["mid"].append(folder)
        elif folder in ("wgmma_tma", "wgmma"):
            kinds["near"].append(folder)
    if kinds["naive"] or kinds["mid"] or kinds["near"]:
        ptx = [f for f in kinds["naive"] + kinds["mid"] + kinds["near"]
               if "```ptx" in read_response(root, task, f)]
        kinds["compile_error"] = ptx
    if not kinds["mid"]:  # e.g. the backward tasks: no mma.sync kernel, their fast one stands in
        kinds["mid"] = kinds["near"]
    return kinds
TEACHER_MARK = "(teacher attempt)"


def failure_category(root, task, attempt):
    """The outcome the evaluator gives `attempt` on a GPU, as the solutions' expected.json says."""
    if "```ptx" not in attempt and "```cuda" not in attempt:
        return "no_kernel"
    if "%r_undeclared" in attempt:
        return "compile_error"
    if not task:
        return "unknown"
    with open(os.path.join(root, task, "expected.json")) as f:
        expected = json.load(f)
    for folder, outcome in expected.items():
        path = os.path.join(root, task, folder, "response.md")
        if folder.startswith("_") or not os.path.exists(path):
            continue
        if read_response(root, task, folder).strip() in attempt:
            status = outcome.get("status", "ok" if outcome.get("correct") else "incorrect")
            if status == "ok" and outcome.get("correct") and not outcome.get("targets_executed"):
                return "targets_not_executed"
            return status
    return "unknown"


def fixing_solution(root, task):
    """The task's reference solution whose target instructions execute, or None."""
    if not task:
        return None
    with open(os.path.join(root, task, "expected.json")) as f:
        expected = json.load(f)
    for folder, outcome in sorted(expected.items()):
        if folder.startswith("probe_") or folder.startswith("_"):
            continue
        if outcome.get("status") == "ok" and outcome.get("correct") and outcome.get("targets_executed"):
            return folder
    return None


def read_response(root, task, folder):
    with open(os.path.join(root, task, folder, "response.md")) as f:
        return f.read()


def break_ptx(response):
    """The response with one use of an undeclared register added after the PTX entry's opening brace."""
    return re.sub(r"(\.entry[^{]*\{\n)", "\\1\tmov.u32 \t%r_undeclared, 0;\n", response, count=1)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--api-key", default="")
    ARGS = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
