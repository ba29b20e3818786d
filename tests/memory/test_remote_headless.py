"""A device without an OS keyring (a server, a container, this test machine) shares a scope with credentials
from its environment: real `mirador` processes, two homes, a real SeaweedFS. Nothing of the secret reaches a
file, and `remote add` without a keyring says how to do this instead of only refusing."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from tests.conftest import files_containing
from tests.memory import seaweed as sw_fixtures
from tests.memory.mcp_support import ROOT, env_for
from tests.memory.seaweed import BUCKET, KEY_ID, SECRET

seaweed = sw_fixtures.seaweed  # fixture

CLI = [sys.executable, "-m", "desktop.cli.main"]
KEY_VAR, SECRET_VAR = "MIRADOR_REMOTE_ACME_TEAM_KEY_ID", "MIRADOR_REMOTE_ACME_TEAM_SECRET"


def cli(home: Path, *args: str, creds: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = env_for(home)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # no OS keyring, whatever the machine has
    env["MIRADOR_NO_SERVICE"] = "1"
    for var in (KEY_VAR, SECRET_VAR, "MIRADOR_REMOTE_SECRET"):
        env.pop(var, None)
    if creds:
        env.update({KEY_VAR: KEY_ID, SECRET_VAR: SECRET})
    return subprocess.run([*CLI, *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=300)


def test_a_device_without_a_keyring_shares_a_scope_with_credentials_from_its_environment(tmp_path, seaweed):
    prefix = f"headless-{uuid.uuid4().hex[:8]}"
    url = f"s3://{BUCKET}/{prefix}"
    a, b = tmp_path / "a", tmp_path / "b"
    bind = ("remote", "add", "acme-team", "--scope", "work/acme", "--url", url, "--endpoint", seaweed.endpoint,
            "--key-id", KEY_ID)

    # Without a keyring, plain `add` refuses, naming the way that works here; nothing is bound.
    p = cli(a, *bind, "--secret-stdin", stdin=SECRET + "\n")
    assert p.returncode == 1 and "--env-credentials" in p.stderr and KEY_VAR in p.stderr, p.stderr
    # --env-credentials with the variables missing: refused, naming them.
    p = cli(a, *bind, "--env-credentials", creds=False)
    assert p.returncode == 2 and KEY_VAR in p.stderr and SECRET_VAR in p.stderr, p.stderr

    for home in (a, b):
        p = cli(home, *bind, "--env-credentials", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["credentials"].startswith("the environment")
    p = cli(a, "remote", "test", "acme-team", "--json")
    assert p.returncode == 0, p.stderr

    p = cli(a, "add", "The acme deploy freeze starts on the 18th", "--scope", "work/acme", "--json")
    assert p.returncode == 0, p.stderr
    p = cli(b, "add", "My locker combination is 4417", "--scope", "personal", "--json")
    assert p.returncode == 0, p.stderr
    p = cli(b, "search", "when does the acme deploy freeze start", "--json")
    assert p.returncode == 0 and "deploy freeze starts on the 18th" in p.stdout, p.stdout + p.stderr

    # A process without the variables cannot reach the shared scope, and says what to set.
    p = cli(b, "remote", "test", "acme-team", creds=False)
    assert p.returncode != 0 and KEY_VAR in p.stderr, p.stderr

    assert seaweed.holding("deploy freeze starts on the 18th", prefix)
    assert not seaweed.holding("locker combination", prefix)  # B's personal memory stays on B
    for home in (a, b):
        assert not files_containing(home, SECRET)
