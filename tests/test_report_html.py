"""``report.html``: self-contained, with tables and plots; opened in headless Chromium."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimage

from tests.test_report_support import make_toy_project

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run")
# Counts every <img> that decoded, written into the DOM for --dump-dom to show.
IMAGE_PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  document.body.dataset.decoded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.images = images.length;
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = "headless Chromium not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("RAGBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def report_page(pytester: pytest.Pytester) -> Path:
    """report.html of a run with three systems, breakdowns and a baseline comparison."""
    make_toy_project(pytester, 30)
    pytester.runpytest("--ragbench", "--ragbench-systems", "exact,terse", "--ragbench-save", "a")
    (pytester.path / "degrade.txt").write_text("x")
    pytester.runpytest("--ragbench", "--ragbench-systems", "exact,terse",
                       "--ragbench-compare", "a", "--ragbench-fail-on", "regression")
    return pytester.path / ".ragbench" / "report.html"


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(data)
            for data in re.findall(r'<img[^>]* src="data:image/png;base64,([^"]+)"', page)]


def _not_blank(png: bytes) -> bool:
    pixels = mpimage.imread(io.BytesIO(png))[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    return float(pixels.std()) > 0.02 and len(colours) > 20


def test_page_is_self_contained_with_tables_and_plots(report_page: Path) -> None:
    page = report_page.read_text(encoding="utf-8")
    assert "<script" not in page and "<link" not in page
    sources = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "url(" not in page and "@import" not in page
    assert page.count("<table>") >= 6  # components, items, metrics, breakdowns, comparisons, …
    images = _images(page)
    # Distributions, intervals per system and per category, one delta plot per comparison.
    assert len(images) == 3 + 3
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") and _not_blank(png) for png in images)
    for text in ("Session failed", "regression toy.token_f1 [system=exact]",
                 "exact_vs_terse", "exact_vs_baseline", "toy by category"):
        assert text in page


def test_chromium_renders_the_tables_and_images(report_page: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    profile = tmp_path / "profile"
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
    probe = tmp_path / "probe.html"
    probe.write_text(report_page.read_text(encoding="utf-8").replace(
        "</body>", IMAGE_PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run([chromium, *flags, "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=180, check=True).stdout
    expected_images = len(_images(report_page.read_text(encoding="utf-8")))
    assert dom.count("<table>") >= 6
    assert dom.count("<img ") == expected_images
    assert f'data-decoded="{expected_images}"' in dom
    assert f'data-images="{expected_images}"' in dom

    shot = tmp_path / "report.png"
    subprocess.run([chromium, *flags, f"--screenshot={shot}", "--window-size=1280,2000",
                    report_page.as_uri()], capture_output=True, timeout=180, check=True)
    assert shot.is_file()
    assert _not_blank(shot.read_bytes())
