"""Debian's `chromium`, headless, behind a recording proxy on 127.0.0.1: load a page, get its DOM
(`--dump-dom`) or a PNG screenshot, and every request that tried to leave the machine.

Chromium sends loopback traffic directly (its proxy bypass list always holds `<-loopback>`), so
the page under test is fetched from the local server, while anything else the page asks for
(a CDN, a font, a beacon) goes to the recorder, which answers 404 and writes it down. The
browser's own service traffic (component updates, sign-in) also reaches the recorder; those hosts
are listed in BROWSER_HOSTS and set aside, never the page's. A missing binary fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
BROWSER_HOSTS = frozenset(
    {"accounts.google.com", "update.googleapis.com", "clients2.google.com",
     "content-autofill.googleapis.com", "optimizationguide-pa.googleapis.com",
     "safebrowsingohttpgateway.googleapis.com", "redirector.gvt1.com"}
)  # fmt: skip
"""Chromium's own background services, contacted whatever page is open."""
_FLAGS = (
    "--headless",
    "--no-sandbox",  # the tests run as root in CI containers
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-extensions",
    "--disable-sync",
    "--disable-default-apps",
    "--hide-scrollbars",
)


@dataclass
class Recorder:
    """Requests that reached the proxy: (method, host, target)."""

    seen: list[tuple[str, str, str]] = field(default_factory=list)

    def from_pages(self) -> list[tuple[str, str, str]]:
        """What left the machine on the page's behalf (the browser's own services set aside)."""
        return [r for r in self.seen if r[1] not in BROWSER_HOSTS]


@dataclass
class Chromium:
    binary: str
    profile: Path
    proxy_port: int
    recorder: Recorder

    def _run(self, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
        args = [
            self.binary,
            *_FLAGS,
            f"--user-data-dir={self.profile}",
            f"--proxy-server=http://127.0.0.1:{self.proxy_port}",
            *extra,
            url,
        ]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    def dump_dom(self, url: str) -> str:
        """The DOM after load, serialized (scripts would have run; the pages have none)."""
        return self._run(url, "--dump-dom").stdout

    def screenshot(self, url: str, path: Path, *, size: str = "1100,2600") -> Path:
        self._run(url, f"--screenshot={path}", f"--window-size={size}")
        assert path.stat().st_size > 0
        return path


def _recording_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            target = self.path
            host = target.split(":")[0] if self.command == "CONNECT" else urlsplit(target).hostname
            recorder.seen.append((self.command, host or "", target))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_HEAD = do_CONNECT = do_PUT = _record

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            return

    return Handler


@contextmanager
def headless_chromium(tmp_path: Path) -> Iterator[Chromium]:
    """Chromium with a fresh profile under `tmp_path`, behind a recording proxy."""
    binary = shutil.which("chromium") or CHROMIUM
    assert Path(binary).exists(), "chromium is not installed (.ci/run installs Debian's)"
    recorder = Recorder()
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _recording_handler(recorder))
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield Chromium(binary, tmp_path / "chromium-profile", proxy.server_address[1], recorder)
    finally:
        proxy.shutdown()
        proxy.server_close()
