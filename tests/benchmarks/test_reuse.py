"""Which experiments a suite reuses cells from on a team server (``benchmarks.tasks.reuse.untrusted``):
the grants the server lists for the user decide, as the server answers them (the whole exchange
with a real server: tests/ui/test_server.py)."""

from types import SimpleNamespace

import pytest

from benchmarks.tasks import reuse

URI = "http://team-host:5001"


def answering(monkeypatch, status: int, grants: list[dict] | None = None) -> list[str]:
    asked = []

    def server_request(uri, endpoint, **params):
        asked.append(endpoint)
        return SimpleNamespace(status_code=status, json=lambda: {"is_admin": False, "permissions": grants or []})

    monkeypatch.setattr(reuse, "server_request", server_request)
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    reuse.untrusted.cache_clear()
    return asked


def grant(experiment_id: str, permission: str) -> dict:
    return {"resource_type": "experiment", "resource_pattern": experiment_id, "permission": permission}


def test_an_experiment_the_user_manages_by_its_own_grant_is_trusted(monkeypatch):
    answering(monkeypatch, 200, [grant("*", "EDIT"), grant("7", "MANAGE")])
    assert reuse.untrusted(URI, "editor", "own", "7") is None


@pytest.mark.parametrize(
    "grants",
    [[grant("*", "EDIT")], [grant("*", "MANAGE")], [grant("7", "EDIT")], []],
    ids=["edit-everywhere", "manage-everywhere", "edit-here", "none"],
)
def test_an_experiment_another_user_created_is_refused_in_one_line(monkeypatch, grants):
    answering(monkeypatch, 200, grants)
    message = reuse.untrusted(URI, "editor", "own", "7")
    assert "experiment 'own'" in message and "never reused" in message and "\n" not in message


def test_the_team_experiments_and_stores_without_users_need_no_question(monkeypatch):
    asked = answering(monkeypatch, 200, [])
    assert reuse.untrusted(URI, "editor", "mrpc", "2") is None
    assert reuse.untrusted(URI, "editor", "pretrain", "1") is None
    assert reuse.untrusted("sqlite:///mlflow.db", "", "own", "7") is None and asked == []
    answering(monkeypatch, 404)  # a server without MLflow's auth app (--no-auth): one user's store
    assert reuse.untrusted(URI, "editor", "own", "7") is None
