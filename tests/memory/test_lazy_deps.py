"""LanceDB loads without the REST client it does not use, and still works (memory/store/lazy_deps.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys, tempfile
from memory.store.core import Store
loaded_at_open = "lance_namespace_urllib3_client.api" in sys.modules
store = Store(tempfile.mkdtemp())
row = store.add_memory("We deploy on Tuesdays", scope="work")
found = store.get(row["id"])["text"]
loaded_after_use = "lance_namespace_urllib3_client.api" in sys.modules
import lance_namespace_urllib3_client as client  # whoever does use the client gets all of it
print(json.dumps({"at_open": loaded_at_open, "after_use": loaded_after_use, "found": found,
                  "client": hasattr(client, "ApiClient") and "lance_namespace_urllib3_client.api" in sys.modules}))
"""


def test_store_works_without_loading_the_rest_client_which_stays_available():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
                              "HOME": str(Path.home()), "MIRADOR_PASSPHRASE": "a passphrase for the probe",
                              "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"at_open": False, "after_use": False, "found": "We deploy on Tuesdays", "client": True}

