"""Mel scale, mel filterbanks, mel spectrograms and MFCCs.

Two mel scales: "htk" (default) m = 2595 log10(1 + f / 700); "slaney" (Auditory
Toolbox) linear below 1 kHz, m = 3 f / 200, logarithmic above,
m = 15 + 27 ln(f / 1000) / ln(6.4). The filterbank has triangles whose corners sit
at n_mels + 2 points equally spaced in mel between f_min and f_max, evaluated at
the STFT bin frequencies; norm="slaney" scales each to unit area in Hz.
MFCCs are the orthonormal DCT-II (computed with ember.fft) of the log mel
spectrogram in dB, 10 log10(max(mel, 1e-10)), optionally floored top_db below the peak.
"""

from typing import Optional

import ember.fft
import numpy as np

from .spectral import spectrogram

_F_SP = 200.0 / 3  # slaney: Hz per mel below the break
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP  # 15 mels
_LOG_STEP = np.log(6.4) / 27.0


def _check_scale(mel_scale: str) -> None:
    if mel_scale not in ("htk", "slaney"):
        raise ValueError(f"mel_scale must be 'htk' or 'slaney', got {mel_scale!r}")


def hz_to_mel(freq, mel_scale: str = "htk"):
    """Frequency in Hz to mels."""
    _check_scale(mel_scale)
    freq = np.asarray(freq, dtype=np.float64)
    if mel_scale == "htk":
        return 2595.0 * np.log10(1.0 + freq / 700.0)
    linear = freq / _F_SP
    logarithmic = _MIN_LOG_MEL + np.log(np.maximum(freq, _MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOG_STEP
    return np.where(freq >= _MIN_LOG_HZ, logarithmic, linear)


def mel_to_hz(mels, mel_scale: str = "htk"):
    """Mels to frequency in Hz (inverse of hz_to_mel)."""
    _check_scale(mel_scale)
    mels = np.asarray(mels, dtype=np.float64)
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    linear = mels * _F_SP
    logarithmic = _MIN_LOG_HZ * np.exp(_LOG_STEP * (np.maximum(mels, _MIN_LOG_MEL) - _MIN_LOG_MEL))
    return np.where(mels >= _MIN_LOG_MEL, logarithmic, linear)


def mel_filterbank(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int,
                   mel_scale: str = "htk", norm: Optional[str] = None) -> np.ndarray:
    """Triangular filters, shape (n_freqs, n_mels), for bins at k * sample_rate / (2 (n_freqs - 1))."""
    if not 0 <= f_min < f_max:
        raise ValueError(f"need 0 <= f_min < f_max, got {f_min}, {f_max}")
    if norm not in (None, "slaney"):
        raise ValueError(f"norm must be None or 'slaney', got {norm!r}")
    bin_freqs = np.linspace(0.0, sample_rate / 2.0, n_freqs)
    corners = mel_to_hz(np.linspace(hz_to_mel(f_min, mel_scale), hz_to_mel(f_max, mel_scale), n_mels + 2),
                        mel_scale)
    left, centre, right = corners[:-2], corners[1:-1], corners[2:]
    rising = (bin_freqs[:, None] - left[None, :]) / (centre - left)[None, :]
    falling = (right[None, :] - bin_freqs[:, None]) / (right - centre)[None, :]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    if norm == "slaney":
        filters *= (2.0 / (right - left))[None, :]
    return filters


def mel_spectrogram(x: np.ndarray, sample_rate: int, n_fft: int = 400, hop_length: Optional[int] = None,
                    win_length: Optional[int] = None, window: str = "hann", power: float = 2.0,
                    center: bool = True, n_mels: int = 128, f_min: float = 0.0, f_max: Optional[float] = None,
                    mel_scale: str = "htk", norm: Optional[str] = None) -> np.ndarray:
    """Mel-filtered power spectrogram: (n_mels, n_frames) or (channels, n_mels, n_frames)."""
    spec = spectrogram(x, n_fft, hop_length, win_length, window, power, center)
    f_max = sample_rate / 2.0 if f_max is None else float(f_max)
    filters = mel_filterbank(n_fft // 2 + 1, f_min, f_max, n_mels, sample_rate, mel_scale, norm)
    return np.einsum("fm,...ft->...mt", filters.astype(spec.dtype), spec)


def power_to_db(power_spec: np.ndarray, amin: float = 1e-10, top_db: Optional[float] = 80.0) -> np.ndarray:
    """10 log10(max(x, amin)); with top_db, floored at (max - top_db) per spectrogram."""
    db = 10.0 * np.log10(np.maximum(power_spec, amin))
    if top_db is not None:
        peak = db.max(axis=(-2, -1), keepdims=True)
        db = np.maximum(db, peak - top_db)
    return db


def dct_ortho(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Orthonormal DCT-II along `axis` (scipy.fft.dct(type=2, norm="ortho")), via one FFT.

    Reordering v = (x0, x2, x4, ..., x5, x3, x1) turns the DCT into
    Re(exp(-i pi k / 2N) FFT(v)[k]).
    """
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    n = x.shape[-1]
    reordered = np.concatenate([x[..., ::2], x[..., 1::2][..., ::-1]], axis=-1)
    spectrum = ember.fft.fft(reordered, axis=-1)
    twiddle = np.exp(-0.5j * np.pi * np.arange(n) / n)
    out = np.real(spectrum * twiddle) * np.sqrt(2.0 / n)
    out[..., 0] /= np.sqrt(2.0)
    return np.moveaxis(out, -1, axis)


def mfcc(x: np.ndarray, sample_rate: int, n_mfcc: int = 40, n_fft: int = 400, hop_length: Optional[int] = None,
         win_length: Optional[int] = None, window: str = "hann", center: bool = True, n_mels: int = 128,
         f_min: float = 0.0, f_max: Optional[float] = None, mel_scale: str = "htk", norm: Optional[str] = None,
         top_db: Optional[float] = 80.0) -> np.ndarray:
    """MFCCs: (n_mfcc, n_frames) or (channels, n_mfcc, n_frames)."""
    if not 0 < n_mfcc <= n_mels:
        raise ValueError(f"n_mfcc must be in 1..n_mels ({n_mels}), got {n_mfcc}")
    mel = mel_spectrogram(x, sample_rate, n_fft, hop_length, win_length, window, 2.0, center, n_mels,
                          f_min, f_max, mel_scale, norm)
    coefficients = dct_ortho(power_to_db(mel, top_db=top_db), axis=-2)
    return coefficients[..., :n_mfcc, :]
