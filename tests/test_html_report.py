"""``memlint report --html FILE``: one self-contained page whose chart is the memory model's
timeline, checked as markup and, in a real headless Chromium, as pixels.

The browser test skips when no Chromium is installed, unless ``MEMLINT_REQUIRE_BROWSER=1``
(CI), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from memlint.analysis import analyze_file
from memlint.cli import main
from memlint.config import Settings
from memlint.reporters import html

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "fixtures" / "seed_gtx960_keras1.py"
SMALL = ROOT / "fixtures" / "small_cnn_fits.py"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def write_page(tmp_path, *args) -> Path:
    out = tmp_path / "report.html"
    assert main(["report", "--html", str(out), *map(str, args), "--no-cache"]) == 0
    return out


def test_page_is_self_contained_and_charts_the_timeline(tmp_path, capsys):
    page = write_page(tmp_path, SMALL, "--gpu", "40MiB", "--cuda-context", "1MiB",
                      "--reserve", "1MiB").read_text()
    assert capsys.readouterr().out.startswith(f"Wrote {tmp_path / 'report.html'}: 1 model")
    # nothing from the network, no scripts
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", page)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    report = analyze_file(str(SMALL), Settings(gpu="40MiB", cuda_context="1MiB",
                                               reserve="1MiB"))
    timeline = report.breakdowns[0].timeline
    line = re.search(r'class="memory-line" points="([^"]+)"', page)
    points = [tuple(map(float, p.split(","))) for p in line.group(1).split()]
    assert len(points) == len(timeline) > 3
    # each point's height is its moment's bytes on one linear scale (higher is more)
    peak = max(range(len(timeline)), key=lambda i: timeline[i]["bytes"])
    low = min(range(len(timeline)), key=lambda i: timeline[i]["bytes"])
    scale = (points[low][1] - points[peak][1]) / (timeline[peak]["bytes"]
                                                  - timeline[low]["bytes"])
    assert scale > 0
    for (_, y), moment in zip(points, timeline):
        expected = points[peak][1] + (timeline[peak]["bytes"] - moment["bytes"]) * scale
        assert abs(y - expected) < 0.2
    xs = [x for x, _ in points]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    marker = re.search(r'class="peak-marker" cx="([\d.]+)" cy="([\d.]+)"', page)
    assert (float(marker.group(1)), float(marker.group(2))) == points[peak]
    budget = re.search(r'class="budget-line"[^>]*y1="([\d.]+)"', page)
    assert budget and float(budget.group(1)) < min(y for _, y in points)  # above the peak
    for layer in report.models[0].layers:
        assert f"{layer.name} ({layer.type})" in page
    for part in report.breakdowns[0].parts:
        assert f"<td>{part.name}</td>" in page


def test_budget_far_above_the_peak_is_written_not_scaled(tmp_path):
    page = write_page(tmp_path, SMALL, "--gpu", "h100-80gb").read_text()
    assert "above the chart" in page and "<line class=\"budget-line\"" not in page
    no_budget = write_page(tmp_path, SMALL).read_text()
    assert "budget-line" not in no_budget and "no GPU budget" in no_budget


def test_html_escapes_names():
    assert "<b>" not in html._table(("h",), [("<b>x</b>",)])


def test_unwritable_target_is_one_line(tmp_path, capsys):
    code = main(["report", "--html", str(tmp_path / "no" / "x.html"), str(SMALL), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("memlint: error: cannot write")


# ------------------------------------------------------------------ a real browser

def _browser():
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if found is None:
        if os.environ.get("MEMLINT_REQUIRE_BROWSER") == "1":
            pytest.fail("MEMLINT_REQUIRE_BROWSER=1 but no Chromium is installed")
        pytest.skip("no Chromium installed (apt-get install chromium)")
    return found


def read_png(path: Path) -> tuple:
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG without interlacing."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def _pixels(rows, colour: str, tolerance: int = 40) -> list:
    target = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return [(x, y) for y, row in enumerate(rows) for x, px in enumerate(row)
            if sum(abs(a - b) for a, b in zip(px, target)) <= tolerance]


@pytest.mark.parametrize("args", [(SEED, "--gpu", "2GiB"),
                                  (SMALL, "--gpu", "40MiB", "--cuda-context", "1MiB",
                                   "--reserve", "1MiB")], ids=["does-not-fit", "fits"])
def test_chart_is_drawn_in_headless_chromium(tmp_path, args):
    browser = _browser()
    page = write_page(tmp_path, *args)
    shot = tmp_path / "shot.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--no-first-run", "--window-size=1100,700",
                           f"--user-data-dir={tmp_path / 'profile'}",
                           f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    width, height, rows = read_png(shot)
    assert (width, height) == (1100, 700)
    line = _pixels(rows, html.LINE_COLOUR)
    budget = _pixels(rows, html.BUDGET_COLOUR)
    peak = _pixels(rows, html.PEAK_COLOUR)
    assert len(line) > 500, "the memory curve is not drawn"
    assert len(budget) > 300, "the budget line is not drawn"
    assert len(peak) > 40, "the peak is not marked"
    # the budget line runs across the chart; the marker sits on the curve's highest point
    xs = [x for x, _ in budget]
    assert max(xs) - min(xs) > 600
    top = min(y for _, y in line)
    cy = sum(y for _, y in peak) / len(peak)
    assert abs(cy - top) < 15, (cy, top)
