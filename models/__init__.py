"""Local model runtimes behind small interfaces. Nothing here imports the rest of Mirador."""
