"""gpu_reset and reboot through the node agent, or a ticket when none is configured.

Covers, against a real HTTP server on 127.0.0.1: the agent receives node, GPU (from the
verdict's culprit), action and idempotency key, with the bearer token, and its answer becomes
the result; a repeat through the ledger sends nothing twice; an HTTP error, a timeout and an
answer we cannot read become a `failed` result naming the endpoint; with no agent configured
the action opens a ticket naming the exact command, never a silent "skipped"; wiring picks the
HTTP agent only when `agent.url` is set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.actions.executing import execute_once
from bot.actions.registry import ActionContext, default_registry
from bot.config import AgentSettings, Settings
from bot.wiring.runtime import make_node_agent
from integrations.node_agent import HttpNodeAgent, NodeAgent
from integrations.tickets import RecordedTickets
from tests.actions.action_helpers import MemoryLedger, act_once, healthy_fleet_context

VERDICT = {
    "layer": "gpu_hardware",
    "summary": "GPU 5 of gpu-node-03: uncorrectable ECC errors",
    "findings": [{"severity": "critical", "summary": "DBE rate 3/s on GPU 5"}],
    "culprit_details": [{"node": "gpu-node-03", "gpu": "5"}],
}


@dataclass
class AgentServer:
    url: str
    answer: dict[str, Any] = field(default_factory=lambda: {"outcome": "changed", "detail": "ok"})
    status: int = 200
    hang: threading.Event | None = None
    received: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)


@pytest.fixture
def agent_server() -> Iterator[AgentServer]:
    server_ref: dict[str, AgentServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            state = server_ref["state"]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.received.append((body, dict(self.headers)))
            if state.hang is not None:
                state.hang.wait(5)  # released by the test once the client gave up
            data = json.dumps(state.answer).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = AgentServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/reset")
    server_ref["state"] = state
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    if state.hang is not None:
        state.hang.set()
    httpd.shutdown()
    httpd.server_close()


def context(scenario_dir: Path, tickets: RecordedTickets) -> ActionContext:
    return healthy_fleet_context(scenario_dir, tickets, verdict=VERDICT)


def agent(url: str, timeout: float = 5.0) -> NodeAgent:
    return HttpNodeAgent(url, client=httpx.Client(timeout=timeout), token="s3cret")


def run(ctx: ActionContext, action: str, node_agent: NodeAgent | None) -> dict[str, Any]:
    spec = default_registry(agent=node_agent).get(action)
    return act_once(spec, ctx, target="gpu-node-03", step_id="execute")


def test_the_agent_receives_the_request_and_its_answer_is_the_result(
    agent_server: AgentServer, scenario_dir: Path
) -> None:
    agent_server.answer = {"outcome": "changed", "detail": "GPU 5 reset, ECC cleared"}
    result = run(context(scenario_dir, RecordedTickets()), "gpu_reset", agent(agent_server.url))
    body, headers = agent_server.received[0]
    assert body == {
        "node": "gpu-node-03",
        "gpu": "5",
        "action": "gpu_reset",
        "idempotency_key": "k1",
    }
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["Idempotency-Key"] == "k1"
    assert result["outcome"] == "changed"
    assert result["detail"] == (
        "reset GPU gpu-node-03 GPU 5: changed by the node agent (GPU 5 reset, ECC cleared)"
    )


def test_reboot_sends_no_gpu_and_already_done_is_a_result(
    agent_server: AgentServer, scenario_dir: Path
) -> None:
    agent_server.answer = {"outcome": "already_done", "detail": "rebooted 2 min ago"}
    result = run(context(scenario_dir, RecordedTickets()), "reboot", agent(agent_server.url))
    assert agent_server.received[0][0]["gpu"] is None
    assert agent_server.received[0][0]["action"] == "reboot"
    assert result["outcome"] == "already_done"


def test_a_repeat_of_the_same_key_sends_nothing_twice(
    agent_server: AgentServer, scenario_dir: Path
) -> None:
    ctx = context(scenario_dir, RecordedTickets())
    spec = default_registry(agent=agent(agent_server.url)).get("gpu_reset")
    ledger = MemoryLedger()
    for _ in range(2):
        execute_once(
            spec, ctx, ledger=ledger, step_id="x", target="gpu-node-03", params={}, dry_run=False
        )
    assert len(agent_server.received) == 1


@pytest.mark.parametrize(
    ("status", "answer", "says"),
    [
        (500, {"error": "boom"}, "answered HTTP 500"),
        (200, {"outcome": "maybe"}, "answered outcome 'maybe'"),
    ],
)
def test_an_agent_failure_is_a_failed_result_naming_the_endpoint(
    agent_server: AgentServer, scenario_dir: Path, status: int, answer: dict[str, Any], says: str
) -> None:
    agent_server.status, agent_server.answer = status, answer
    result = run(context(scenario_dir, RecordedTickets()), "gpu_reset", agent(agent_server.url))
    assert result["outcome"] == "failed"
    assert agent_server.url in result["detail"]
    assert says in result["detail"]


def test_an_agent_that_does_not_answer_in_time_fails_the_action(
    agent_server: AgentServer, scenario_dir: Path
) -> None:
    agent_server.hang = threading.Event()
    result = run(
        context(scenario_dir, RecordedTickets()), "gpu_reset", agent(agent_server.url, 0.2)
    )
    assert result["outcome"] == "failed"
    assert f"node agent {agent_server.url} timed out" in result["detail"]


def test_without_an_agent_a_ticket_names_the_command(scenario_dir: Path) -> None:
    tickets = RecordedTickets()
    result = run(context(scenario_dir, tickets), "gpu_reset", None)
    assert result["outcome"] == "changed"
    assert result["data"]["handed_off"] is True
    assert "no node agent is configured (GPU_ONCALL_AGENT__URL)" in result["detail"]
    ticket_id, ticket = tickets.opened["k1"]
    assert result["data"]["ticket_id"] == ticket_id
    assert ticket.queue == "node-ops"
    assert ticket.fields["command"] == "nvidia-smi -r -i 5"
    assert "Run on the node (drained first): nvidia-smi -r -i 5" in ticket.body


def test_wiring_picks_the_http_agent_only_when_a_url_is_set(tmp_path: Path) -> None:
    assert make_node_agent(Settings()) is None
    configured = Settings(agent=AgentSettings(url="http://127.0.0.1:1/agent"))
    assert isinstance(make_node_agent(configured), HttpNodeAgent)
