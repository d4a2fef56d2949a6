"""Short-time Fourier transform and spectrograms, computed with ember.fft.rfft.

Signals are 1-D ``(frames,)`` or frames-first ``(frames, channels)`` as ``load``
returns them. Results put time last: ``(n_freq, n_frames)`` for 1-D input and
``(channels, n_freq, n_frames)`` for 2-D input, with ``n_freq = n_fft // 2 + 1``.
"""

from typing import Optional

import ember.fft
import numpy as np

_WINDOWS = ("hann", "hamming", "rectangular")


def get_window(name: str, length: int) -> np.ndarray:
    """Periodic (DFT-even) window of `length` samples: "hann", "hamming" or "rectangular"."""
    n = np.arange(length, dtype=np.float64)
    if name == "hann":
        return 0.5 - 0.5 * np.cos(2.0 * np.pi * n / length)
    if name == "hamming":
        return 0.54 - 0.46 * np.cos(2.0 * np.pi * n / length)
    if name in ("rectangular", "boxcar", "ones"):
        return np.ones(length)
    raise ValueError(f"unknown window {name!r}; expected one of {_WINDOWS}")


def _channels_first(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 1:
        return x[None, :]
    if x.ndim == 2:
        return x.T
    raise ValueError(f"expected (frames,) or (frames, channels), got shape {x.shape}")


def stft(x: np.ndarray, n_fft: int = 400, hop_length: Optional[int] = None, win_length: Optional[int] = None,
         window: str = "hann", center: bool = True, pad_mode: str = "reflect") -> np.ndarray:
    """Complex STFT, shape (n_freq, n_frames) or (channels, n_freq, n_frames).

    Frame t covers samples [t * hop, t * hop + n_fft) of the signal, which with
    center=True is first padded by n_fft // 2 on both sides (pad_mode as np.pad),
    so frame t is centred on sample t * hop. The window (win_length, default
    n_fft) is zero-padded on both sides to n_fft.
    """
    win_length = n_fft if win_length is None else int(win_length)
    hop_length = win_length // 4 if hop_length is None else int(hop_length)
    if not 0 < win_length <= n_fft:
        raise ValueError(f"win_length must be in 1..n_fft, got {win_length}")
    if hop_length < 1:
        raise ValueError(f"hop_length must be positive, got {hop_length}")
    signal = _channels_first(x)
    single = np.asarray(x).ndim == 1
    compute_dtype = np.float32 if signal.dtype == np.float32 else np.float64
    signal = signal.astype(compute_dtype)
    if center:
        pad = n_fft // 2
        if pad_mode == "reflect" and signal.shape[1] <= pad:
            raise ValueError(f"signal of {signal.shape[1]} samples is too short for reflect padding of {pad}")
        signal = np.pad(signal, ((0, 0), (pad, pad)), mode=pad_mode)
    if signal.shape[1] < n_fft:
        raise ValueError(f"signal of {signal.shape[1]} samples is shorter than n_fft={n_fft}")
    full_window = np.zeros(n_fft)
    offset = (n_fft - win_length) // 2
    full_window[offset: offset + win_length] = get_window(window, win_length)
    n_frames = 1 + (signal.shape[1] - n_fft) // hop_length
    starts = np.arange(n_frames) * hop_length
    frames = signal[:, starts[:, None] + np.arange(n_fft)[None, :]]  # (channels, n_frames, n_fft)
    spectrum = ember.fft.rfft(frames * full_window.astype(compute_dtype), n=n_fft, axis=-1)
    spectrum = np.swapaxes(spectrum, -1, -2)  # (channels, n_freq, n_frames)
    return spectrum[0] if single else spectrum


def spectrogram(x: np.ndarray, n_fft: int = 400, hop_length: Optional[int] = None,
                win_length: Optional[int] = None, window: str = "hann", power: Optional[float] = 2.0,
                center: bool = True, normalized: bool = False) -> np.ndarray:
    """|STFT| ** power (power=None returns the complex STFT); see stft for shapes and framing.

    normalized=True divides the STFT by sqrt(sum(window ** 2)) first.
    """
    spectrum = stft(x, n_fft, hop_length, win_length, window, center)
    if normalized:
        window_samples = get_window(window, n_fft if win_length is None else int(win_length))
        spectrum = spectrum / np.sqrt(np.sum(window_samples ** 2))
    if power is None:
        return spectrum
    magnitude = np.abs(spectrum)
    return magnitude if power == 1.0 else magnitude ** power
