"""docs/app.png: the app as a new user first sees it after one click. Starts ``musictx-app`` on a free port, opens
the page in Chromium (Playwright), presses Continue with the page's defaults (the bundled motif, 20 s of seed),
waits for the takes and saves a full-page screenshot:

    python scripts/app_screenshot.py --out docs/app.png
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answering(url: str, proc: subprocess.Popen, seconds: float = 150) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            sys.exit(f"musictx-app exited ({proc.returncode})")
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("musictx-app did not answer in time")
            time.sleep(0.5)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs/app.png"))
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    port, work = free_port(), Path(tempfile.mkdtemp())
    proc = subprocess.Popen([sys.executable, "-m", "musictx.app", "--port", str(port), "--threads", "2"], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_until_answering(url, proc)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(180_000)
            page.goto(url)
            page.wait_for_function("() => document.querySelector('#seed-roll img')")
            page.locator("#continue").click()
            page.locator("#result-0 img").wait_for()
            page.wait_for_function("() => /^0:\\d\\d$/.test(document.querySelector('#audio-0 #duration')"
                                   "?.textContent.trim() ?? '')")
            page.screenshot(path=str(args.out), full_page=True)
            browser.close()
        print(f"wrote {args.out}")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
