"""The report renders in a real browser: headless Chromium, a screenshot and the console.

Skipped only when Chromium is not installed (``apt-get install chromium``; CI installs it).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from hybridmetric.report import write_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
WINDOW = (1280, 2000)
CONSOLE = re.compile(r":CONSOLE\b|Uncaught")


def _sibling(name: str):
    """A module beside this file, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def chromium(page: Path, work: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    """Open ``page`` in headless Chromium with console logging on stderr."""
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={work / 'profile'}", "--enable-logging=stderr",
        "--v=0", f"--window-size={WINDOW[0]},{WINDOW[1]}", *mode, page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


def screenshot(page: Path, work: Path) -> tuple[np.ndarray, list[str]]:
    """The page's screenshot as a grey-level array, and the console lines Chromium logged."""
    shot = work / "shot.png"
    done = chromium(page, work, f"--screenshot={shot}")
    image = Image.open(shot)
    assert image.size == WINDOW
    console = [line for line in done.stderr.splitlines() if CONSOLE.search(line)]
    return np.asarray(image.convert("L"), dtype=float), console


def is_blank(grey: np.ndarray) -> bool:
    """Whether a screenshot shows (almost) nothing: under 2% of pixels differ from white."""
    return float(np.mean(grey < 245)) < 0.02 or float(grey.std()) < 5


def test_report_renders_with_no_console_errors(tmp_path: Path) -> None:
    results, frame, card = _sibling("test_report").make_case(hostile=True)
    page = write_report(results, frame, tmp_path / "report", card=card)["html"]
    grey, console = screenshot(page, tmp_path)
    assert not console, "console messages:\n" + "\n".join(console)
    assert not is_blank(grey)
    # the top band holds the title and headline: dark text on white, not an empty canvas
    assert np.mean(grey[:300] < 128) > 0.005
    dom = chromium(page, tmp_path, "--dump-dom").stdout
    assert "<script" not in dom  # the hostile metric and rater names stay text
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in dom
    for anchor in ("overview", "ceiling", "agreement", "significance", "scatter", "hybrid"):
        assert f'id="{anchor}"' in dom
    assert dom.count("<img") == 4


def _page_width(page: Path, work: Path) -> str:
    """Whether ``page``, shown at :data:`WINDOW`'s width, scrolls sideways ("wider") or not
    ("fits"), as a script in a copy of it measures the rendered document."""
    probe = work / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>document.body.dataset.width = document.documentElement.scrollWidth"
        " > window.innerWidth ? 'wider' : 'fits';</script></body>"), encoding="utf-8")
    found = re.search(r'data-width="(\w+)"', chromium(probe, work, "--dump-dom").stdout)
    assert found is not None
    return found[1]


def test_a_wide_table_scrolls_in_its_box_and_the_page_does_not(tmp_path: Path) -> None:
    """One column per metric (the by-system table) outgrows the page's column: it scrolls in
    a box of its own, and the page itself never scrolls sideways."""
    results, frame, card = _sibling("test_report").make_case(hostile=True)
    page = write_report(results, frame, tmp_path / "report", card=card)["html"]
    wide = page.with_name("wide.html")
    row = "".join(f"<td>{'w' * 60}</td>" for _ in range(30))
    text = page.read_text(encoding="utf-8")
    wide.write_text(text.replace("<tbody>", f"<tbody><tr>{row}</tr>", 1), encoding="utf-8")
    assert _page_width(wide, tmp_path) == "fits"
    unboxed = page.with_name("unboxed.html")
    unboxed.write_text(wide.read_text(encoding="utf-8").replace(
        "div.table { max-width: 100%; overflow-x: auto; }", ""), encoding="utf-8")
    assert _page_width(unboxed, tmp_path) == "wider"  # (the probe can tell)


def test_detectors_catch_errors_and_blank_pages(tmp_path: Path) -> None:
    """The checks above can fail: a blank page with script errors is caught by both."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" '
                    'href="data:,"></head><body><script>console.error("planted");'
                    'throw new Error("boom");</script></body></html>', encoding="utf-8")
    grey, console = screenshot(page, tmp_path)
    assert is_blank(grey)
    text = "\n".join(console)
    assert "planted" in text and "Uncaught Error: boom" in text
