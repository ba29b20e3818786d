"""Local model runtimes behind small interfaces. Nothing here imports the rest of Mirador."""

import os

# OpenMP pools (torch, CTranslate2, llama.cpp) spin-wait between parallel regions by default, which on
# a shared 2-core machine burns the core another process needs. Passive waiting measured no slower
# idle and faster with the other core busy, for torch, whisper and the LLM alike.
# Set before any of them loads libgomp, which reads it once; a value the person set stays.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# onnxruntime (embedder, whisper's VAD) collects telemetry on Linux and macOS since 1.29: on its first
# session it writes a device id under ~/.cache/Microsoft/DeveloperTools and uploads a process event.
# Mirador runs offline and promises nothing leaves the machine, so opt out before it loads; the
# variable is read once when onnxruntime initialises. The 1.32 wheel reads ORT_DISABLE_TELEMETRY
# (ORT_TELEMETRY_DISABLED alone still leaves the device id behind); upstream's newer code reads
# ORT_TELEMETRY_DISABLED, so both are set.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
os.environ["ORT_TELEMETRY_DISABLED"] = "1"
