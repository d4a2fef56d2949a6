"""emberaudio: WAV IO, resampling and spectrograms for ember (FFTs from ember.fft).

Audio arrays are frames-first: (frames,) or (frames, channels).
"""

from .mel import dct_ortho, hz_to_mel, mel_filterbank, mel_spectrogram, mel_to_hz, mfcc, power_to_db
from .resample import design_lowpass, rational_ratio, resample
from .spectral import get_window, spectrogram, stft
from .wav import ENCODINGS, WavFormatError, WavInfo, info, load, save

__all__ = [
    "ENCODINGS", "WavFormatError", "WavInfo", "dct_ortho", "design_lowpass", "get_window", "hz_to_mel",
    "info", "load", "mel_filterbank", "mel_spectrogram", "mel_to_hz", "mfcc", "power_to_db",
    "rational_ratio", "resample", "save", "spectrogram", "stft",
]


def _package_version() -> str:
    """The version shipyard stamped (a nightly's development version), else the installed distribution's."""
    import importlib.metadata
    import json
    from pathlib import Path

    stamped = Path(__file__).with_name("_build_info.json")
    if stamped.is_file():
        return str(json.loads(stamped.read_text(encoding="utf-8"))["version"])
    try:
        return importlib.metadata.version("emberaudio")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _package_version()
