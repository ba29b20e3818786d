"""A shared scope's access key and secret: the OS keyring, or the environment of a device without one, and
the object-store options made from them (memory/store/remote.py, docs/sharing.md). Mirador never writes them to
a file.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from memory.config import RemoteBinding
from memory.errors import InputError, MiradorError

log = logging.getLogger(__name__)


KEYRING_SERVICE = "mirador-remote"


def credential_env(name: str) -> tuple[str, str]:
    """The environment variables a binding's key id and secret are read from when the OS keyring has none
    (a headless device: a server, a container): MIRADOR_REMOTE_<NAME>_KEY_ID and MIRADOR_REMOTE_<NAME>_SECRET."""
    stem = "MIRADOR_REMOTE_" + name.upper().replace("-", "_")
    return f"{stem}_KEY_ID", f"{stem}_SECRET"


def _keyring() -> Any:  # the keyring module
    import keyring
    from keyring.errors import NoKeyringError

    backend = keyring.get_keyring()
    if type(backend).__module__.startswith("keyring.backends.fail") or getattr(backend, "priority", 1) <= 0:
        raise NoKeyringError(f"{type(backend).__name__} cannot keep secrets")
    return keyring


def require_keyring(name: str) -> None:
    """Raise the error save_credentials would (no usable OS keyring) before anything else is done: `remote add`
    asks this before it contacts the store."""
    try:
        _keyring()
    except Exception as e:  # NoKeyringError, a D-Bus error
        raise _no_keyring(name, e) from e


def save_credentials(name: str, key_id: str, secret: str) -> None:
    """Keep a binding's S3 access key and secret in the OS keyring (never in the config file)."""
    if not key_id or not secret:
        raise InputError("both an access key id and a secret are needed")
    try:
        _keyring().set_password(KEYRING_SERVICE, name, json.dumps({"key_id": key_id, "secret": secret}))
    except Exception as e:  # NoKeyringError, a locked keyring, a D-Bus error
        raise _no_keyring(name, e) from e


def _no_keyring(name: str, e: Exception) -> MiradorError:
    return MiradorError(
            f"cannot keep the credentials of {name!r} in the OS keyring ({e}) — install and unlock a Secret "
            "Service (GNOME Keyring, KWallet), macOS Keychain or Windows Credential Manager, then run "
            "`mirador remote add` again; on a device without one (a server), give every Mirador process "
            f"{' and '.join(credential_env(name))} and add the binding with --env-credentials. "
            "Mirador never writes them to a file")


def load_credentials(name: str) -> tuple[str, str] | None:
    """(key id, secret) of a binding: from the OS keyring, else from the environment (credential_env), else None."""
    try:
        raw = _keyring().get_password(KEYRING_SERVICE, name)
    except Exception as e:
        log.info("no OS keyring for the credentials of %s (%s)", name, e)
        raw = None
    if raw:
        data = json.loads(raw)
        return data["key_id"], data["secret"]
    key_var, secret_var = credential_env(name)
    if os.environ.get(key_var) and os.environ.get(secret_var):
        return os.environ[key_var], os.environ[secret_var]
    return None


def delete_credentials(name: str) -> None:
    """Remove a binding's credentials from the keyring (absent ones are fine)."""
    try:
        _keyring().delete_password(KEYRING_SERVICE, name)
    except Exception as e:  # PasswordDeleteError when absent, or no keyring
        log.info("credentials of %s not removed from the keyring (%s)", name, e)


def storage_options(binding: RemoteBinding, key_id: str, secret: str, timeout: float) -> dict[str, str]:
    """LanceDB / object_store options for a binding. Few retries: a remote that is down must fail fast,
    and the write waits in the outbox instead."""
    opts = {
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "aws_region": binding.region,
        "timeout": f"{timeout:g}s",
        "connect_timeout": f"{min(timeout, 2.0):g}s",
        "client_max_retries": "1",
        "client_retry_timeout": f"{max(1, int(timeout))}",
    }
    if binding.endpoint:
        opts["aws_endpoint"] = binding.endpoint
        opts["allow_http"] = "true" if binding.endpoint.startswith("http://") else "false"
    return opts
