#!/usr/bin/env python3
"""Clicks from report.html to a trajectory page in headless Chromium and checks what the page shows.

usage: report_viewer_check.py PTXBENCH_BINARY RUN_DIR [SCREENSHOT_DIR]

Builds a report from RUN_DIR with `ptxbench report`, opens report.html from disk in headless Chromium
driven over the DevTools protocol (--remote-debugging-pipe: standard library only), saves a screenshot
of the summary, clicks the first trajectory link, and checks the trajectory page: its title is the
trajectory id the link names, it has one section per turn with the verdict statuses recorded in
RUN_DIR's trajectories.jsonl, each turn shows the three axes, the reasoning starts collapsed and opens
on a click, and a later turn shows a kernel diff. Saves report.png and trajectory.png into
SCREENSHOT_DIR (default: a temporary folder, printed). Fails on any console error or failed load.
Exits 77 (skipped) when Chromium is not installed.
"""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_html_check import find_chromium  # noqa: E402  (the same browser lookup)


class Browser:
    """A headless Chromium spoken to over --remote-debugging-pipe (fd 3 in, fd 4 out, NUL-separated JSON)."""

    def __init__(self, chromium, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def fds():
            os.dup2(to_child_r, 100)
            os.dup2(from_child_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--no-first-run", "--allow-file-access-from-files", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(3, 4), preexec_fn=fds)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("no message from Chromium")
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, name, timeout=30):
        deadline = time.time() + timeout
        for i, e in enumerate(self.events):
            if e.get("method") == name:
                del self.events[i]
                return e
        while True:
            e = self._read_message(deadline)
            if e.get("method") == name:
                return e
            self.events.append(e)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def expected_statuses(run_dir, trajectory_id):
    turns = {}
    with open(os.path.join(run_dir, "trajectories.jsonl")) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("trajectory_id") != trajectory_id:
                continue
            v = r.get("verdict")
            turns[r["turn"]] = v["status"] if isinstance(v, dict) else "request_failed"
    return [turns[t] for t in sorted(turns)]


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__)
        return 2
    ptxbench, run_dir = sys.argv[1], sys.argv[2]
    chromium = find_chromium()
    if not chromium:
        print("SKIP: Chromium is not installed (Debian package 'chromium'); the trajectory viewer was not checked")
        return 77
    with tempfile.TemporaryDirectory(prefix="ptxbench-viewer-") as tmp:
        shots = sys.argv[3] if len(sys.argv) == 4 else os.path.join(tmp, "shots")
        os.makedirs(shots, exist_ok=True)
        out = os.path.join(tmp, "report")
        r = subprocess.run([ptxbench, "report", run_dir, "--out", out], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(f"FAIL: ptxbench report exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            return 1
        problems = []
        browser = Browser(chromium, os.path.join(tmp, "profile"))
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
                browser.call(domain, session=session)
            browser.call("Emulation.setDeviceMetricsOverride",
                         {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=session)

            def evaluate(expression):
                result = browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                           "awaitPromise": True}, session=session)
                if "exceptionDetails" in result:
                    raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
                return result["result"].get("value")

            def screenshot(name, max_height=8000):
                metrics = browser.call("Page.getLayoutMetrics", session=session)
                size = metrics.get("cssContentSize") or metrics["contentSize"]
                clip = {"x": 0, "y": 0, "width": min(size["width"], 1400), "height": min(size["height"], max_height),
                        "scale": 1}
                data = browser.call("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                               "captureBeyondViewport": True}, session=session)["data"]
                path = os.path.join(shots, name)
                with open(path, "wb") as f:
                    f.write(base64.b64decode(data))
                print(f"screenshot: {path} ({int(clip['width'])}x{int(clip['height'])} px)")
                return path

            browser.call("Page.navigate", {"url": "file://" + os.path.join(out, "report.html")}, session=session)
            browser.wait_event("Page.loadEventFired")
            links = evaluate("document.querySelectorAll('a.traj').length")
            if not links:
                problems.append("report.html has no trajectory link (a.traj)")
            screenshot("report.png")
            link = evaluate("(() => { const a = document.querySelector('a.traj');"
                            " return {href: a.getAttribute('href'), id: a.title}; })()")
            print(f"clicking {link['href']} ({link['id']}) of {links} trajectory links")
            evaluate("document.querySelector('a.traj').click()")
            browser.wait_event("Page.loadEventFired")
            page = evaluate("""(() => ({
                href: location.href,
                title: document.querySelector('h1').textContent,
                statuses: [...document.querySelectorAll('section.turn')].map(s => s.dataset.status),
                axes: [...document.querySelectorAll('section.turn p.axes')].map(p => p.textContent),
                feedback: [...document.querySelectorAll('pre.feedback')].map(p => p.textContent),
                reasoning_open: [...document.querySelectorAll('details.reasoning')].map(d => d.open),
                diffs: document.querySelectorAll('pre.diff').length,
                added: document.querySelectorAll('pre.diff span.add').length,
                back: document.querySelector('a#back').getAttribute('href'),
            }))()""")
            expected = expected_statuses(run_dir, link["id"])
            print(f"trajectory page: {page['title']}: turns {page['statuses']} (expected {expected}), "
                  f"{page['diffs']} diff(s) with {page['added']} added line(s)")
            if not page["href"].endswith(link["href"]):
                problems.append(f"the click did not open {link['href']} (at {page['href']})")
            if page["title"] != link["id"]:
                problems.append(f"page title {page['title']!r} is not the trajectory {link['id']!r}")
            if page["statuses"] != expected:
                problems.append(f"turn statuses {page['statuses']} differ from the run's {expected}")
            for i, text in enumerate(page["axes"]):
                if not all(k in text for k in ("correct:", "targets executed:", "speedup:")):
                    problems.append(f"turn {i} does not show the three axes: {text!r}")
            if len(page["feedback"]) != len(expected) or not page["feedback"][0].strip():
                problems.append("the feedback each turn received is missing")
            if page["back"] != "../report.html":
                problems.append(f"the back link points to {page['back']!r}")
            if len(expected) > 1 and page["diffs"] == 0:
                problems.append("no kernel diff on a trajectory with several turns")
            if page["reasoning_open"] and any(page["reasoning_open"]):
                problems.append("the reasoning is not collapsed")
            if page["reasoning_open"]:
                opened = evaluate("(() => { const d = document.querySelector('details.reasoning');"
                                  " d.querySelector('summary').click(); return d.open; })()")
                if not opened:
                    problems.append("clicking the reasoning summary did not open it")
            screenshot("trajectory.png", max_height=3000)
            for e in browser.events:
                if e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error":
                    problems.append("browser log: " + e["params"]["entry"].get("text", ""))
                if e.get("method") == "Runtime.exceptionThrown":
                    problems.append("page exception: " + json.dumps(e["params"])[:300])
        except (RuntimeError, TimeoutError, KeyError, TypeError) as e:
            problems.append(f"browser session failed: {e}")
        finally:
            browser.close()
        if problems:
            print("FAIL:\n  " + "\n  ".join(problems))
            return 1
        print("OK: report.html links to the trajectory page, which shows every turn as recorded")
        return 0


if __name__ == "__main__":
    sys.exit(main())
