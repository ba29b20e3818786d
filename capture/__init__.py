"""Screen and audio capture into evidence (see docs/architecture.md): private by default, never silently stalled."""

from capture.health import Health, read_health
from capture.privacy import PrivacyFilter
from capture.redact import Redactor
from capture.runner import Capture, open_store_for_capture, set_pause

__all__ = ["Capture", "Health", "PrivacyFilter", "Redactor", "open_store_for_capture", "read_health", "set_pause"]
