"""The engine's graphs keep every channel's value in each checkpoint.

The savers write only a commit's newest checkpoint (storage/checkpointer_savers.py, `_needed`):
the checkpoints it supersedes, and the task writes they applied, never reach disk. A
`DeltaChannel` rebuilds its value from its ancestors' writes, so no graph the engine builds may
have one: every runbook's, of every shape (fused stages, and stages and one node per step for
runs checkpointed before them).
"""

from __future__ import annotations

from langgraph.channels.delta import DeltaChannel

from bot.actions.registry import default_registry
from bot.engine.catalog import load_catalog
from bot.engine.compiling import build_graph
from bot.engine.stages import Shape
from integrations.signals import load_signal_catalog
from runbooks import RUNBOOK_DIR, SIGNALS_FILE


def test_no_graph_has_a_channel_rebuilt_from_its_ancestors_writes() -> None:
    signals = load_signal_catalog(SIGNALS_FILE).names()
    catalog = load_catalog([RUNBOOK_DIR], signals=signals, actions=default_registry().names())
    assert catalog.names()
    for name in catalog.names():
        for shape in Shape:
            channels = build_graph(catalog.get(name), shape).compile().channels
            assert channels and not [
                c for c in channels.values() if isinstance(c, DeltaChannel)
            ], (name, shape)
