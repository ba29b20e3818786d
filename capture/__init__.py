"""Screen and audio capture into evidence (see ARCHITECTURE.md)."""
