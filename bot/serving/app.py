"""The HTTP server (`gpu-oncall serve`): the bot's routes as a Starlette app on uvicorn, behind
the `Guard` (front.py) that decides before any body is read what each request may send.

Routes: `POST /alerts` (Alertmanager webhook v4, bot.intake.webhooks), `GET /healthz`,
`GET /readyz`, `GET /metrics`, the incident pages (`/incidents`), Slack's `/slack/events` (handed
to bolt as its own Starlette adapter does, one signature check) and, in sim mode, the simulated
exporters' `/sim/metrics`. Handlers are synchronous and run on the bounded pool, never on the
event loop. A boundary: an unexpected error becomes a 500 with a reference id and a logged
traceback. An alert is stored before its webhook is answered; triage runs in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.config import Settings
from bot.intake.counters import IntakeCounters
from bot.intake.storms import StormPolicy
from bot.intake.webhooks import WebhookIntake, one_line
from bot.limits import SLACK_BODY_BYTES
from bot.serving.exchange import Head, Reply, Request
from bot.serving.exposition import scrape
from bot.serving.front import Admission, FrontLimits, Guard, Refusal
from bot.serving.listening import HttpServer, Tuning
from bot.serving.pages import PREFIX, IncidentPages, is_page
from bot.serving.wsgi import WSGIApp, call_wsgi
from bot.wiring.runtime import Runtime
from bot.work.dispatching import TriageWorkers
from storage import incidents as incident_store
from storage.db import read_scope
from storage.engines import BUSY_TIMEOUT_MS
from storage.errors import StorageError
from storage.write_turns import first_in_line

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from bot.clock import Clock
    from bot.engine.catalog import RunbookCatalog
    from bot.engine.running import RunEngine
    from bot.slack.app import SlackBot

logger = logging.getLogger(__name__)

TEXT = "text/plain; version=0.0.4; charset=utf-8"
WEBHOOK = ("POST", "/alerts")
_BODY_ROUTES = ("/alerts",)


@dataclass
class OncallApp:
    """The bot's routes. `mount(path, app)` hands a path (and everything below it) to a WSGI
    app, which sees the full path in PATH_INFO (the simulated exporters)."""

    db: Engine
    clock: Clock
    catalog: RunbookCatalog
    engine: RunEngine
    """The run engine; `/readyz` asks its checkpointer."""
    settings: Settings
    counters: IntakeCounters
    workers: TriageWorkers
    mounts: dict[str, WSGIApp] = field(default_factory=dict)
    slack: SlackBot | None = None
    """The Slack app when `slack.bot_token` is set (served at `/slack/events` in HTTP mode)."""
    slack_path: str | None = None

    def __post_init__(self) -> None:
        self.webhook_turns = WriterTurns(
            one_at_a_time=self.db.dialect.name == "sqlite", wait_seconds=BUSY_TIMEOUT_MS / 1000
        )
        self.webhooks = WebhookIntake(
            db=self.db,
            now=self.clock.now,
            routes=self.catalog.alert_routes(),
            storms=StormPolicy.from_settings(self.settings.intake),
            queue=self.workers,
            counters=self.counters,
            turn=lambda: self.webhook_turns.take(),
        )
        token = self.settings.server.token
        self._token = token.get_secret_value().encode() if token else None
        self.pages = IncidentPages(
            db=self.db,
            settings=self.settings.pages,
            runbooks=self.catalog.names,
            now=self.clock.now,
        )

    def mount(self, path: str, app: WSGIApp) -> None:
        """Serve `path` and everything below it with `app` (e.g. `/sim/metrics`)."""
        self.mounts["/" + path.strip("/")] = app

    def serve_slack(self, path: str) -> None:
        """Hand `POST path` to the Slack app (HTTP mode)."""
        self.slack_path = path

    def front(self, pool: Executor) -> Guard:
        """The ASGI app: the guard in front of the Starlette routes, handlers on `pool`."""
        server = self.settings.server
        limits = FrontLimits(
            read_timeout_seconds=server.read_timeout_seconds,
            max_bytes_in_flight=server.max_bytes_in_flight,
        )
        return Guard(self.starlette(pool), decide=self.admit, limits=limits)

    def starlette(self, pool: Executor) -> Starlette:
        on_pool = _Pooled(pool)
        routes = [
            Route("/alerts", on_pool(self.alerts), methods=["POST"]),
            Route("/healthz", on_pool(lambda _: Reply.json(200, {"status": "ok"})),
                  methods=["GET"]),
            Route("/readyz", on_pool(lambda _: self.readyz()), methods=["GET"]),
            Route("/metrics", on_pool(lambda _: self.metrics()), methods=["GET"]),
            Route(PREFIX, on_pool(self.pages.handle), methods=["GET"]),
            Route(PREFIX + "/{rest:path}", on_pool(self.pages.handle), methods=["GET"]),
        ]
        for prefix, app in self.mounts.items():
            mounted = on_pool(functools.partial(call_wsgi, app))
            routes += [Route(prefix, mounted, methods=["GET"]),
                       Route(prefix + "/{rest:path}", mounted, methods=["GET"])]
        if self.slack is not None and self.slack_path is not None:
            routes.append(Route(self.slack_path, self.slack.starlette_endpoint(pool),
                                methods=["POST"]))
        handlers = {404: self._not_found, 405: _wrong_method, Exception: _unexpected}
        return Starlette(routes=routes, exception_handlers=handlers)

    # -- on the event loop: decided from the head, before a body is read -------------------------
    def admit(self, head: Head) -> Admission:
        """What a request may send: no body on GET/HEAD or an unknown route, Slack's size on
        its path, the webhook cap on `POST /alerts`; and the webhook's token checked first."""
        if (head.method, head.path) == WEBHOOK:
            refusal = self._check_token(head)
            if refusal is not None:
                self.counters.webhook(refusal.status)
            return Admission(self.settings.server.max_body_bytes, refusal)
        if head.method == "POST" and head.path == self.slack_path and self.slack is not None:
            return Admission(SLACK_BODY_BYTES, _slack_head_refusal(head))
        if not self._known(head.path):
            return Admission(0, Refusal(404, f"no route '{head.path}'", (),
                                        (("routes", self._routes()),)))
        if is_page(head.path):
            refused = self.pages.authorize(head)
            if refused is not None:
                return Admission(0, Refusal(refused.status, refused.body.decode().strip(),
                                            refused.headers))
        return Admission(0)

    def _check_token(self, head: Head) -> Refusal | None:
        if self._token is None:
            return None
        scheme, _, credentials = (head.header("authorization") or "").strip().partition(" ")
        given = credentials.strip().encode()
        if scheme.lower() == "bearer" and hmac.compare_digest(given, self._token):
            return None
        challenge = ("WWW-Authenticate", 'Bearer realm="gpu-oncall"')
        return Refusal(401, "missing or wrong bearer token", (challenge,))

    # -- on a pool thread ----------------------------------------------------------------------
    def alerts(self, request: Request) -> Reply:
        """Validate, store (dedup, group, route), answer; then queue the triage runs. On SQLite
        the webhooks' writes take turns (see WriterTurns)."""
        answer = self.webhooks.receive(request.body)
        return Reply.json(answer.status, answer.body)

    def readyz(self) -> Reply:
        """Ready when the database answers a query and the checkpointer answers a read (not
        asked while the database is away: on PostgreSQL it is the same server)."""
        problems: dict[str, str] = {}
        try:
            with read_scope(self.db) as session:
                incident_store.count_by_state(session)
        except StorageError as exc:
            return Reply.json(503, {"status": "not ready", "problems": {"database": one_line(exc)}})
        try:
            self.engine.checkpointer.get_tuple({"configurable": {"thread_id": "readyz"}})
        except Exception as exc:  # noqa: BLE001  (boundary: any saver's error means "not ready")
            name = type(exc).__name__
            logger.warning("readyz: checkpointer unreachable: %s: %s", name, one_line(exc))
            problems["checkpointer"] = type(exc).__name__
        if problems:
            return Reply.json(503, {"status": "not ready", "problems": problems})
        return Reply.json(200, {"status": "ready"})

    def metrics(self) -> Reply:
        text = scrape(self.db, self.counters)
        return Reply(200, text.encode(), TEXT)

    def _routes(self) -> list[str]:
        slack = [self.slack_path] if self.slack_path and self.slack else []
        return sorted(["/alerts", "/healthz", "/readyz", "/metrics", PREFIX, *self.mounts, *slack])

    def _known(self, path: str) -> bool:
        prefixes = [PREFIX, *self.mounts]
        return path in self._routes() or any(path.startswith(p + "/") for p in prefixes)

    async def _not_found(self, request: StarletteRequest, exc: Exception) -> Response:
        error = {"error": f"no route '{request.url.path}'", "routes": self._routes()}
        return JSONResponse(error, 404)


class WriterTurns:
    """Webhooks stored one at a time on SQLite, which has one write lock anyway (other
    backends: no turns). Threads waiting here are woken as soon as the turn is free; in
    SQLite's busy handler they poll with sleeps of up to 100 ms, and under a steady stream a
    waiter could lose every race for the whole busy timeout (the webhook p99 of issue 20 under
    hostile load); their transactions then go before the other writers waiting for the file's
    turn (storage/write_turns.py: triage records, checkpoints). A turn not had within
    `wait_seconds` (SQLite's busy timeout) is False and the webhook goes on without it, to
    SQLite's own busy handling (which answers 503 "retry" when its timeout passes too): turns
    order the writers, they never refuse one. A long queue (200 redeliveries at once on a
    loaded machine) once made turns alone answer 503."""

    def __init__(self, *, one_at_a_time: bool, wait_seconds: float) -> None:
        self.one_at_a_time, self.wait_seconds = one_at_a_time, wait_seconds
        self._lock = threading.Lock() if one_at_a_time else None

    @contextlib.contextmanager
    def take(self) -> Iterator[bool]:
        if self._lock is None:
            yield True
            return
        held = self._lock.acquire(timeout=self.wait_seconds)
        try:
            with first_in_line():  # before the triage's writes waiting for the file
                yield held
        finally:
            if held:
                self._lock.release()


class _Pooled:
    """Wraps a synchronous `Request -> Reply` handler as a Starlette endpoint run on `pool`,
    with the boundary for unexpected errors (a 500 with a reference, the traceback logged)."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool

    def __call__(self, handler: Callable[[Request], Reply]) -> Callable[..., object]:
        pool = self.pool

        async def endpoint(request: StarletteRequest) -> Response:
            exchange = Request(
                _head(request),
                await request.body(),
                client=request.client.host if request.client else "",
                server=_server(request),
            )
            loop = asyncio.get_running_loop()
            reply = await loop.run_in_executor(pool, _guarded, handler, exchange)
            return to_response(reply)

        return endpoint


def _guarded(handler: Callable[[Request], Reply], request: Request) -> Reply:
    try:
        return handler(request)
    except Exception:  # boundary: never a traceback to the caller
        ref = uuid.uuid4().hex[:6]
        logger.exception(
            "unexpected error serving %s (ref %s)", request.path, ref, extra={"ref": ref}
        )
        return Reply.json(500, {"error": f"unexpected error (ref {ref}); see the bot's log"})


def to_response(reply: Reply) -> Response:
    """A Reply as a Starlette response (`close` asks uvicorn to close the connection)."""
    response = Response(reply.body, reply.status, media_type=None)
    response.headers["content-type"] = reply.content_type
    for name, value in reply.headers:
        response.headers.append(name, value)
    if reply.close:
        response.headers["connection"] = "close"
    return response


def _head(request: StarletteRequest) -> Head:
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return Head(request.method, request.url.path, request.url.query, headers)


def _server(request: StarletteRequest) -> tuple[str, int]:
    server = request.scope.get("server") or ("127.0.0.1", 0)
    return str(server[0]), int(server[1] or 0)


def _slack_head_refusal(head: Head) -> Refusal | None:
    """401 before reading when Slack's signature headers are missing, malformed or stale."""
    from bot.slack.verifying import fresh_signature_headers

    fresh = fresh_signature_headers(
        timestamp=head.header("x-slack-request-timestamp"),
        signature=head.header("x-slack-signature"),
        now=time.time(),
    )
    return None if fresh else Refusal(401, "invalid request")


async def _wrong_method(request: StarletteRequest, exc: Exception) -> Response:
    allowed = exc.headers.get("Allow", "") if isinstance(exc, HTTPException) and exc.headers else ""
    takes = ", ".join(m for m in allowed.split(", ") if m != "HEAD") or allowed
    return JSONResponse(
        {"error": f"{request.url.path} takes {takes}"}, 405, headers={"Allow": takes}
    )


async def _unexpected(request: StarletteRequest, exc: Exception) -> Response:
    ref = uuid.uuid4().hex[:6]
    logger.error("unexpected error serving %s (ref %s)", request.url.path, ref, exc_info=exc)
    return JSONResponse({"error": f"unexpected error (ref {ref}); see the bot's log"}, 500)


def create_app(settings: Settings, rt: Runtime, *, socket_mode: bool = False) -> OncallApp:
    """The app over an open runtime, with its triage workers (sim mode: `/sim/metrics` too).

    With a Slack bot token, the Slack app is built and hooked into triage; in HTTP mode it is
    mounted at `/slack/events`, in Socket Mode it is not mounted (events come over the socket).
    """
    counters = IntakeCounters()
    server = settings.server
    workers = TriageWorkers(
        rt.engine,
        db=rt.db,
        catalog=rt.catalog,
        clock=rt.clock,
        silences=rt.deps.silences,
        workers=server.workers,
        queue_limit=server.queue_limit,
        counters=counters,
    )
    app = OncallApp(
        db=rt.db,
        clock=rt.clock,
        catalog=rt.catalog,
        engine=rt.engine,
        settings=settings,
        counters=counters,
        workers=workers,
    )
    if rt.fleet is not None:  # sim mode: the fleet the bot works on is the one Prometheus scrapes
        from simulator.exporter import ExporterApp

        app.mount("/sim/metrics", ExporterApp(rt.fleet, prefix="/sim"))
    if settings.slack.bot_token is not None:
        from bot.slack.app import EVENTS_PATH, make_slack_bot

        app.slack = make_slack_bot(rt, settings=settings, socket_mode=socket_mode)
        workers.hooks = app.slack
        if not socket_mode:
            app.serve_slack(EVENTS_PATH)
    return app


class RunningServer:
    """An OncallApp on uvicorn, listening from construction on. `start()` serves on a
    background thread (tests, bench) until `stop()`; `serve()` blocks (`gpu-oncall serve`).
    Either way the end is graceful: stop accepting, finish in-flight requests, then shut the
    handler pool, the triage workers (queued work goes back to the database) and Slack down."""

    def __init__(self, app: OncallApp, *, host: str = "127.0.0.1", port: int = 0) -> None:
        server = app.settings.server
        self.app = app
        self.pool = ThreadPoolExecutor(
            max_workers=server.max_concurrency, thread_name_prefix="http"
        )
        tuning = Tuning(
            backlog=server.backlog,
            keepalive_seconds=server.keepalive_seconds,
            shutdown_grace_seconds=server.shutdown_grace_seconds,
            head_timeout_seconds=server.read_timeout_seconds,
            max_connections=server.max_connections,
        )
        self.http = HttpServer(app.front(self.pool), host=host, port=port, tuning=tuning)
        self.url = self.http.url
        self._released = False

    def start(self) -> RunningServer:
        self.http.start()
        return self

    def serve(self) -> None:
        """Serve on this (main) thread until SIGTERM/SIGINT; uvicorn re-raises the signal
        after the graceful stop, once everything here has shut down."""
        try:
            self.http.serve()
        finally:
            self._release()

    def stop(self) -> None:
        self.http.stop()
        self._release()

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        self.http.socket.close()
        self.pool.shutdown(wait=True)
        try:
            self.app.workers.shutdown()
        except StorageError as exc:  # the leases expire and another replica takes the work over
            logger.warning("queued triage not handed back to the database: %s", exc)
        if self.app.slack is not None:
            self.app.slack.close()


def serve_forever(app: OncallApp, *, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until SIGTERM/Ctrl-C (then stop gracefully, see RunningServer). `ready` is told
    the URL once the socket listens."""
    server = RunningServer(app, host=host, port=port)
    ready(server.url)
    server.serve()
