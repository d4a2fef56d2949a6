"""Band-limited resampling by a rational factor with a polyphase windowed-sinc filter.

For rates ``orig`` -> ``new`` the ratio is reduced by their gcd to ``up / down``
(44100 -> 48000 is 160 / 147). The signal is, in effect, upsampled by ``up``
(zeros inserted), low-pass filtered and decimated by ``down``; the polyphase form
computes only the kept outputs, each from ``ceil(L / up)`` input samples.

The filter (``design_lowpass``) is an ideal low-pass (sinc) at
``rolloff * min(orig, new) / 2`` Hz, truncated to ``zeros`` zero crossings on each
side and shaped by a Kaiser window with parameter ``beta``. Defaults
(zeros=16, rolloff=0.9, beta=6.0), measured: passband flat within 0.01 dB up to
0.75 of the lower Nyquist frequency (0.03 dB at 0.8); attenuation at least 48 dB
at and above the lower Nyquist frequency and 64 dB from 1.05 times it on. The taps
are scaled so the DC gain is exactly 1.
Output length is ``ceil(frames * up / down)``; output sample m sits at input time
``m * down / up`` (no delay).
"""

import math
from typing import Tuple

import numpy as np

def rational_ratio(orig_sr: int, new_sr: int) -> Tuple[int, int]:
    """(up, down): new_sr / orig_sr in lowest terms."""
    orig_sr, new_sr = int(orig_sr), int(new_sr)
    if orig_sr <= 0 or new_sr <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_sr} and {new_sr}")
    g = math.gcd(orig_sr, new_sr)
    return new_sr // g, orig_sr // g


def design_lowpass(up: int, down: int, zeros: int = 16, rolloff: float = 0.9, beta: float = 6.0) -> np.ndarray:
    """Kaiser-windowed sinc taps (odd length) for resampling by up/down, at the upsampled rate."""
    if not 0 < rolloff <= 1:
        raise ValueError(f"rolloff must be in (0, 1], got {rolloff}")
    max_rate = max(up, down)
    cutoff = rolloff * 0.5 / max_rate  # cycles per upsampled sample
    half = int(math.ceil(zeros * max_rate / rolloff))
    n = np.arange(-half, half + 1, dtype=np.float64)
    taps = 2.0 * cutoff * np.sinc(2.0 * cutoff * n) * np.kaiser(2 * half + 1, beta)
    return taps * (up / taps.sum())


def resample(x: np.ndarray, orig_sr: int, new_sr: int, zeros: int = 16, rolloff: float = 0.9,
             beta: float = 6.0) -> np.ndarray:
    """Resample (frames,) or (frames, channels) audio from orig_sr to new_sr Hz (float64 or float32 out)."""
    x = np.asarray(x)
    if x.ndim not in (1, 2):
        raise ValueError(f"expected (frames,) or (frames, channels), got shape {x.shape}")
    out_dtype = np.float32 if x.dtype == np.float32 else np.float64
    up, down = rational_ratio(orig_sr, new_sr)
    if up == down:
        return x.astype(out_dtype, copy=True)
    taps = design_lowpass(up, down, zeros, rolloff, beta)
    length = taps.size
    per_phase = -(-length // up)
    # phases[p, j] = taps[p + j * up]: the taps that meet input samples for phase p.
    padded = np.zeros(per_phase * up)
    padded[:length] = taps
    phases = padded.reshape(per_phase, up).T

    signal = x.reshape(x.shape[0], -1).T.astype(np.float64)  # (channels, frames)
    channels, frames = signal.shape
    out_frames = -(-frames * up // down)
    delay = (length - 1) // 2
    # Zeros around the signal so every input index an output reads is valid.
    lead = per_phase
    padded_signal = np.zeros((channels, lead + frames + per_phase + down + 1))
    padded_signal[:, lead: lead + frames] = signal
    out = np.empty((out_frames, channels))
    # Outputs r, r + up, r + 2 up, ... share a phase (up and down are coprime) and
    # read inputs `down` apart: each residue class is one strided matrix-vector product.
    for r in range(min(up, out_frames)):
        position = r * down + delay  # index in the upsampled, filtered stream
        base, phase = divmod(position, up)
        count = len(range(r, out_frames, up))
        first = base + lead - (per_phase - 1)  # oldest input read by output r
        weights = phases[phase, ::-1]  # weights[i] meets input first + k * down + i
        for c in range(channels):
            row = padded_signal[c]
            windows = np.lib.stride_tricks.as_strided(
                row[first:], shape=(count, per_phase), strides=(down * row.strides[0], row.strides[0]))
            out[r::up, c] = windows @ weights
    out = out.astype(out_dtype)
    return out[:, 0] if x.ndim == 1 else out
