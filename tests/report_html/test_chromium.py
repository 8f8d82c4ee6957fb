"""Render the report in headless Chromium and check that it drew a real page.

Skipped only when Chromium is absent on a developer machine; under CI (CI=true) a missing
Chromium is a failure, since `make test` installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from clefprove.cli.main import main
from tests.conftest import EXAMPLES, ROOT
from tests.report_html.dom import parse
from tests.report_html.pngdecode import decode_png

WIDTH, HEIGHT = 1280, 2000


def chromium() -> str:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed (make test installs it with apt)")
    pytest.skip("chromium is not installed")


def run_chromium(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    env = {**os.environ, "HOME": str(tmp)}
    return subprocess.run(cmd, capture_output=True, timeout=180, env=env, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    binary = chromium()
    tmp = tmp_path_factory.mktemp("chromium")
    report = tmp / "report.html"
    code = main(
        [
            "report",
            str(EXAMPLES / "edge-allow-block-1.0.0.clef"),
            str(ROOT / "invariants"),
            "-o",
            str(report),
        ]
    )
    assert code == 1
    png = tmp / "shot.png"
    shot = run_chromium(
        binary, tmp, f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}", report.as_uri()
    )
    assert png.exists(), shot.stderr.decode(errors="replace")[-2000:]
    dom = run_chromium(binary, tmp, "--dump-dom", report.as_uri())
    return report, decode_png(png.read_bytes()), dom.stdout.decode("utf-8", errors="replace")


@pytest.mark.slow
def test_screenshot_is_a_rendered_page(rendered):
    _, pixels, _ = rendered
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    rgb = pixels[:, :, :3].reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    assert len(colours) >= 200  # anti-aliased text, badges, tables and SVG, not a blank page
    assert counts.max() / counts.sum() < 0.9
    # every quarter of the first screen has ink on it (no half-empty render)
    ink = (rgb.reshape(HEIGHT, WIDTH, 3) < 200).any(axis=2)
    for part in np.array_split(ink, 4, axis=0):
        assert part.mean() > 0.002
    # the red of the FAIL verdict is drawn (the example violates one invariant)
    red = (np.abs(rgb.astype(int) - (0xB4, 0x23, 0x18)).sum(axis=1) < 40).sum()
    assert red > 100


def test_chromium_sees_the_expected_title_and_sections(rendered):
    report, _, dumped = rendered
    root, _ = parse(report.read_text())
    expected = root.find("title").text
    assert expected == "Security review: edge-allow-block 1.0.0"
    assert f"<title>{expected}</title>" in dumped
    for section in ("summary", "model", "verdicts", "violations", "coverage", "diff", "reproduce"):
        assert f'<section id="{section}">' in dumped
