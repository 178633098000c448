#!/usr/bin/env python3
"""Loads a generated report.html in headless Chromium and checks that it renders.

usage: report_html_check.py PTXBENCH_BINARY RUN_DIR

Builds a report from RUN_DIR with `ptxbench report`, opens report.html from disk in headless
Chromium, and fails when the browser logs a console message or a failed load, or when the
screenshot is blank or lacks the chart colours (the first two model series and the "ok" /
"compile_error" taxonomy colours). Exits 77 (skipped) when Chromium is not installed.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

# Colours the charts draw with (traces/detail/html_report.cpp): model series 0 and 1, and the
# taxonomy colours of "ok" and "compile_error".
EXPECTED_COLOURS = {"series 0": (0x1F, 0x77, 0xB4), "series 1": (0xD6, 0x27, 0x28),
                    "status ok": (0x2C, 0xA0, 0x2C), "status compile_error": (0xFF, 0x7F, 0x0E)}
MIN_PIXELS_PER_COLOUR = 40  # a legend swatch alone is 144 px; lines and dots add more


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def read_png_pixels(path):
    """Decodes an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into (width, height, rows)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace != 0:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour_type}, interlace {interlace})")
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + a) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + b) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colour_counts(path):
    width, height, bpp, rows = read_png_pixels(path)
    counts = {}
    for row in rows:
        for x in range(0, width * bpp, bpp):
            rgb = (row[x], row[x + 1], row[x + 2])
            counts[rgb] = counts.get(rgb, 0) + 1
    return width * height, counts


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ptxbench, run_dir = sys.argv[1], sys.argv[2]
    chromium = find_chromium()
    if not chromium:
        print("SKIP: Chromium is not installed (Debian package 'chromium'); the HTML report was not checked")
        return 77
    with tempfile.TemporaryDirectory(prefix="ptxbench-html-") as tmp:
        out = os.path.join(tmp, "report")
        r = subprocess.run([ptxbench, "report", run_dir, "--out", out], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"FAIL: ptxbench report exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            return 1
        html = os.path.join(out, "report.html")
        shot = os.path.join(tmp, "shot.png")
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--window-size=1400,2600", f"--screenshot={shot}", "--virtual-time-budget=5000",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={os.path.join(tmp, 'profile')}",
               "file://" + html]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        log = r.stdout + r.stderr
        problems = []
        if r.returncode != 0:
            problems.append(f"chromium exited {r.returncode}")
        # Page console output is logged as ':INFO:CONSOLE(line)] "message"' (any level); failed
        # loads as net::ERR_*. A report page has no scripts and no fetches, so any of these is a bug.
        for line in log.splitlines():
            if re.search(r":CONSOLE[:(]|net::ERR_|Uncaught|Failed to load resource", line):
                problems.append("browser log: " + line.strip())
        if not os.path.exists(shot):
            problems.append("no screenshot written")
        else:
            total, counts = colour_counts(shot)
            white = counts.get((255, 255, 255), 0)
            print(f"screenshot: {total} px, {len(counts)} distinct colours, {100.0 * (total - white) / total:.1f}% non-white")
            if len(counts) < 20 or total - white < total // 50:
                problems.append("the screenshot is (nearly) blank")
            for name, rgb in EXPECTED_COLOURS.items():
                n = counts.get(rgb, 0)
                print(f"  {name} #{rgb[0]:02x}{rgb[1]:02x}{rgb[2]:02x}: {n} px")
                if n < MIN_PIXELS_PER_COLOUR:
                    problems.append(f"chart colour of {name} missing from the screenshot ({n} px)")
        if problems:
            print("FAIL:\n  " + "\n  ".join(problems))
            print("--- chromium log ---\n" + log[-4000:])
            return 1
        print("OK: report.html renders in headless Chromium with charts and no console errors")
        return 0


if __name__ == "__main__":
    sys.exit(main())
