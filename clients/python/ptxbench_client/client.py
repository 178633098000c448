"""HTTP client for `ptxbench serve`: submit, wait, per-sample timeouts, a concurrency limit, and retries
on 429/5xx that honour Retry-After. Standard library only."""

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor


class PtxbenchError(Exception):
    """A request the service refused for good (4xx other than 429), or retries exhausted."""

    def __init__(self, status, field, message):
        super().__init__(f"HTTP {status}: {field + ': ' if field else ''}{message}")
        self.status = status
        self.field = field
        self.message = message


class Client:
    def __init__(self, url="http://127.0.0.1:8700", token=None, max_concurrency=16, http_timeout=90.0,
                 max_retries=8, backoff_seconds=0.5, max_retry_after=60.0, max_wait=30.0, batch_size=256):
        self.url = url.rstrip("/")
        self.token = token
        self.http_timeout = http_timeout
        self.max_retries = max_retries
        self.backoff_seconds = backoff_seconds
        self.max_retry_after = max_retry_after
        self.max_wait = max_wait  # seconds of one blocking GET (the service caps it with --max-wait)
        self.batch_size = batch_size
        self.max_concurrency = max(1, int(max_concurrency))
        self._slots = threading.BoundedSemaphore(self.max_concurrency)

    # -- HTTP ---------------------------------------------------------------------------------------
    def _call(self, method, path, body=None, timeout=None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        attempt = 0
        while True:
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with self._slots:
                    with urllib.request.urlopen(req, timeout=timeout or self.http_timeout) as resp:
                        return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    payload = json.loads(raw or b"null")
                except ValueError:
                    payload = None
                err = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
                retryable = e.code == 429 or e.code >= 500
                if not retryable or attempt >= self.max_retries:
                    raise PtxbenchError(e.code, err.get("field", ""), err.get("message", raw.decode(errors="replace")))
                delay = self._retry_after(e.headers.get("Retry-After"), attempt)
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if attempt >= self.max_retries:
                    raise PtxbenchError(0, "", f"cannot reach {self.url}: {e}")
                delay = self.backoff_seconds * (2 ** attempt)
            attempt += 1
            time.sleep(min(delay, self.max_retry_after))

    def _retry_after(self, header, attempt):
        try:
            return min(max(float(header), 0.0), self.max_retry_after)
        except (TypeError, ValueError):
            return self.backoff_seconds * (2 ** attempt)

    # -- routes ---------------------------------------------------------------------------------------
    def healthz(self):
        return self._call("GET", "/healthz")[1]

    def tasks(self):
        return self._call("GET", "/v1/tasks")[1]["tasks"]

    def queue(self):
        return self._call("GET", "/v1/queue")[1]

    def submit(self, requests):
        """requests: dicts {task, response | kernel, settings?, deadline_seconds?}. Returns their ids."""
        ids = []
        for i in range(0, len(requests), self.batch_size):
            _, body = self._call("POST", "/v1/verdicts", {"requests": list(requests[i:i + self.batch_size])})
            ids.extend(body["ids"])
        return ids

    def get(self, request_id, wait=0.0):
        path = f"/v1/verdicts/{request_id}"
        if wait > 0:
            path += f"?wait={wait:.3f}"
        return self._call("GET", path, timeout=self.http_timeout + wait)[1]

    def wait(self, request_id, timeout):
        """Blocks until the request is final or `timeout` seconds passed (then state 'client_timeout')."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            state = self.get(request_id, wait=max(0.0, min(self.max_wait, left)))
            if state.get("final"):
                return state
            if time.monotonic() >= end:
                state["state"] = "client_timeout"
                return state

    def evaluate(self, task, response=None, kernel=None, settings=None, timeout=600.0):
        return self.evaluate_many([_request(task, response, kernel, settings, timeout)], timeout=timeout)[0]

    def evaluate_many(self, requests, timeout=600.0):
        """Submits every request (deadline_seconds = timeout unless given) and waits for each, at most
        `max_concurrency` HTTP calls at a time. Returns the final states in order."""
        reqs = [dict(r) for r in requests]
        for r in reqs:
            r.setdefault("deadline_seconds", timeout)
        ids = self.submit(reqs)
        # The service answers each request by its deadline; the client waits a little longer than that.
        grace = min(30.0, 0.1 * timeout + 2.0)
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(lambda rid: self.wait(rid, timeout + grace), ids))


def _request(task, response=None, kernel=None, settings=None, timeout=None):
    r = {"task": task}
    if response is not None:
        r["response"] = response
    if kernel is not None:
        r["kernel"] = kernel
    if settings:
        r["settings"] = settings
    if timeout:
        r["deadline_seconds"] = timeout
    return r
