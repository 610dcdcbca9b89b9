"""Who applies, as the history and the apply lease name them."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping

from specs.fields import visible


def actor() -> str:
    """Who applies, as the history records it: ``CP_ACTOR`` when set (a service, another
    CI), the user and run of GitHub Actions or GitLab CI, else ``user@host``."""
    return visible(_actor(os.environ))[:_ACTOR_CHARS]


_ACTOR_CHARS = 200  # a name and a run, not a document


def _actor(env: Mapping[str, str]) -> str:
    if env.get("CP_ACTOR"):
        return env["CP_ACTOR"]
    if env.get("GITHUB_ACTIONS") == "true":
        return (
            f"{env.get('GITHUB_ACTOR', '?')} (GitHub Actions run {env.get('GITHUB_RUN_ID', '?')}"
            f" of {env.get('GITHUB_REPOSITORY', '?')})"
        )
    if env.get("GITLAB_CI") == "true":
        return (
            f"{env.get('GITLAB_USER_LOGIN', '?')} (GitLab CI job {env.get('CI_JOB_ID', '?')}"
            f" of {env.get('CI_PROJECT_PATH', '?')})"
        )
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"
