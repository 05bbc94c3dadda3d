"""The postmortem page in a real browser: headless Chromium loads it with no network request and draws a
non-blank page. Skipped where Chromium is not installed (`.ci/run` installs Debian's `chromium`)."""

from __future__ import annotations

import re
import shutil
import subprocess

import matplotlib.image as mpimg
import pytest

from tests.conftest import ROOT
from tests.test_report import page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Screenshots are kept here for a person (and CI artifacts) to look at; the folder is git-ignored.
SHOTS = ROOT / "tests" / "artifacts" / "report"
# Chromium's own background calls (updates, time, accounts, dictionaries): not the page's.
BROWSER_HOSTS = re.compile(r"https?://[^/\"]*(?:google\.com|googleapis\.com|gvt1\.com|gstatic\.com)[/\"]")

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


@pytest.mark.parametrize("sample", ["cuda-oom/oom-then-timeouts", "nan-loss/nan-feature", "gpu-throttling/thermal-h100", "host-device-sync/h100", "healthy/hf-trainer"])
def test_page_renders_offline_in_chromium(sample, tmp_path):
    _, text = page(sample)
    html = tmp_path / "postmortem.html"
    html.write_text(text, encoding="utf-8")
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{sample.replace('/', '-')}.png"
    netlog = tmp_path / "net.json"
    # Every request goes to a closed loopback port (no traffic leaves the machine); the net log lists them.
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-background-networking",
           "--no-first-run", "--proxy-server=127.0.0.1:9", f"--log-net-log={netlog}", "--window-size=1100,2200",
           f"--screenshot={shot}", html.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    log = netlog.read_text(errors="replace")
    urls = {u for u in re.findall(r'"url":"([^"]*)"', log) if u.startswith(("http:", "https:", "ws:", "wss:", "ftp:"))}
    assert {u for u in urls if not BROWSER_HOSTS.match(u + "/")} == set()
    assert "CONSOLE" not in proc.stderr and "Uncaught" not in proc.stderr
    pixels = mpimg.imread(shot)
    assert pixels.std() > 0.05  # not a blank page: text, tables and plots were drawn
