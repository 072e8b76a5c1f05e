"""Settings: environment variables with the GPU_ONCALL_ prefix and `__` nesting, secrets kept out
of reprs, and docs/configuration.md generated from the field docstrings and kept current.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings, render_settings_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_environment_overrides_nested_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_ONCALL_STORAGE__URL", "sqlite:////tmp/x.db")
    monkeypatch.setenv("GPU_ONCALL_POLICY__APPROVERS", '["cli:alice", "U123"]')
    monkeypatch.setenv("GPU_ONCALL_LABELS__DCGM", "hostname")
    settings = Settings()
    assert settings.storage.url == "sqlite:////tmp/x.db"
    assert settings.policy.approvers == ["cli:alice", "U123"]
    assert settings.labels.dcgm == "hostname"


def test_secrets_never_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_ONCALL_TICKETS__TOKEN", "s3cr3t-token")
    settings = Settings()
    assert "s3cr3t-token" not in repr(settings)
    assert "s3cr3t-token" not in str(settings.model_dump())


def test_configuration_doc_is_current() -> None:
    assert DOC.read_text() == render_settings_doc(), (
        "regenerate: python -m bot.config > docs/configuration.md"
    )
