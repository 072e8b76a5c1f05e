"""`gpu-oncall serve`: the HTTP server, the periodic jobs and (optionally) Slack's Socket Mode,
until Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from bot.cli.log_format import effective_settings
from bot.cli.terminal import Terminal
from bot.config import Settings
from bot.errors import UserInputError
from bot.wiring.runtime import open_runtime

logger = logging.getLogger(__name__)


def serve(
    settings: Settings,
    term: Terminal,
    *,
    host: str | None,
    port: int | None,
    scenario: Path | None,
    socket_mode: bool = False,
    demo: bool = False,
) -> int:
    """`gpu-oncall serve`: run the HTTP server until Ctrl-C or SIGTERM; with `socket_mode`,
    Slack events arrive over a Socket Mode connection instead of `POST /slack/events`."""
    import signal

    from bot.serving.app import create_app, serve_forever
    from bot.work.scheduler import Jobs
    from storage.leader import make_leadership

    settings = serving_ports(settings, demo=demo)
    if socket_mode and (settings.slack.bot_token is None or settings.slack.app_token is None):
        raise UserInputError(
            "--socket-mode needs Slack: set GPU_ONCALL_SLACK__BOT_TOKEN and "
            "GPU_ONCALL_SLACK__APP_TOKEN (docs/slack.md)"
        )

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    logger.info(
        "effective settings (secrets masked): %s",
        json.dumps(effective_settings(settings), sort_keys=True),
    )
    with open_runtime(settings, scenario_path=scenario) as rt:
        watch_nodes = getattr(rt.deps.cluster, "watch_nodes", None)
        if callable(watch_nodes):  # Kubernetes: pools and domains from one list+watch
            watch_nodes()
        app = create_app(settings, rt, socket_mode=socket_mode)
        refresh = app.slack.refresh_incident if app.slack is not None else None
        leadership = make_leadership(settings.storage.url)

        def leader_gauge(leads: bool) -> None:
            app.counters.leader = int(leads)

        jobs = Jobs(
            rt.engine,
            interval_seconds=settings.server.expiry_check_seconds,
            on_expired=refresh,
            take_over=app.workers.take_over,
            takeover_seconds=settings.work.takeover_seconds,
            leadership=leadership,
            on_leadership=leader_gauge,
        ).start()
        mounts = ", ".join(sorted(app.mounts)) or "none"
        socket = None
        if socket_mode and app.slack is not None:
            socket = app.slack.socket_mode()
            socket.connect()
            term.line("gpu-oncall: connected to Slack over Socket Mode")
        try:
            serve_forever(
                app,
                host=host or settings.server.host,
                port=port if port is not None else settings.server.port,
                ready=lambda url: term.line(
                    f"gpu-oncall serving on {url}: POST /alerts, GET /healthz /readyz /metrics; "
                    f"mounted: {mounts}"
                ),
            )
        except KeyboardInterrupt:
            term.line("gpu-oncall: stopping; queued triage runs finish first")
        finally:
            jobs.shutdown()
            leadership.release()  # the next replica leads at its next tick
            if socket is not None:
                socket.close()
    return 0


def serving_ports(settings: Settings, *, demo: bool) -> Settings:
    """The settings `serve` runs with. A deployment that misses its ConfigMap must not quietly
    serve a simulated fleet: both ports are named explicitly (`sim` included), or `--demo`
    chooses the simulator for both."""
    if demo:
        return settings.model_copy(update={"cluster": "sim", "telemetry": "sim"})
    named = settings.model_fields_set
    unset = [f"GPU_ONCALL_{port.upper()}" for port in PORTS if port not in named]
    if unset:
        raise UserInputError(
            f"serve: {' and '.join(unset)} not set: point the bot at a real cluster and "
            "Prometheus (GPU_ONCALL_CLUSTER=kubernetes, GPU_ONCALL_TELEMETRY=prometheus; "
            "docs/operations.md), or serve the simulated fleet with --demo"
        )
    return settings


#: The two ports `serve` needs named: where actions go and where signals come from.
PORTS = ("cluster", "telemetry")
