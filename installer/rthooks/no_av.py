"""PyInstaller runtime hook: PyAV (`av`, about 100 MB of FFmpeg libraries) stays out of the installer build.

faster-whisper imports it when it is imported, but uses it only to decode audio files; Mirador hands it
the microphone's samples as arrays (models/asr.py), never a file. A stand-in module lets the import
succeed; any use of it says what is missing instead of failing somewhere inside faster-whisper.
"""

import sys
import types


class _NoAV(types.ModuleType):
    """The stand-in `av`: any attribute read says what is missing."""

    def __getattr__(self, name):
        if name.startswith("_"):
            # probes of a module's dunders (inspect, PySide's import hook: hasattr(av, "__wrapped__")) expect
            # AttributeError; an ImportError there would break `import faster_whisper` itself
            raise AttributeError(name)
        raise ImportError(f"av.{name}: decoding audio files needs PyAV, which the Mirador installer leaves out "
                          "(Mirador transcribes the audio it records itself); run Mirador from a pip install for it")


if "av" not in sys.modules:
    try:
        import av  # noqa: F401  (a build that ships it after all)
    except ImportError:
        sys.modules["av"] = _NoAV("av")
