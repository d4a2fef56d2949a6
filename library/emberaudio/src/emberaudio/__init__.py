"""emberaudio: WAV IO, resampling and spectrograms for ember (FFTs from ember.fft).

Audio arrays are frames-first: (frames,) or (frames, channels).
"""

from .mel import dct_ortho, hz_to_mel, mel_filterbank, mel_spectrogram, mel_to_hz, mfcc, power_to_db
from .resample import design_lowpass, rational_ratio, resample
from .spectral import get_window, spectrogram, stft
from .wav import ENCODINGS, WavFormatError, WavInfo, info, load, save

__version__ = "1.7.0"

__all__ = [
    "ENCODINGS", "WavFormatError", "WavInfo", "dct_ortho", "design_lowpass", "get_window", "hz_to_mel",
    "info", "load", "mel_filterbank", "mel_spectrogram", "mel_to_hz", "mfcc", "power_to_db",
    "rational_ratio", "resample", "save", "spectrogram", "stft",
]
