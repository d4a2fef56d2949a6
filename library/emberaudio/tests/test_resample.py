"""Polyphase resampling against scipy.signal.resample_poly and signal properties."""

import numpy as np
import pytest
from scipy import signal

import emberaudio

pytestmark = pytest.mark.feature("audio.core")

RATES = [8000, 16000, 22050, 44100, 48000]
PAIRS = [(a, b) for a in RATES for b in RATES if a != b]


def tones(rate, seconds, freqs, amps):
    t = np.arange(int(rate * seconds)) / rate
    return sum(a * np.sin(2 * np.pi * f * t + i) for i, (f, a) in enumerate(zip(freqs, amps)))


def interior(x, margin):
    return x[margin: len(x) - margin]


@pytest.mark.parametrize("orig,new", PAIRS)
def test_matches_scipy_resample_poly(orig, new):
    # Content below 0.7 of the lower Nyquist frequency, where both filters are flat;
    # they differ in transition band and stopband design, so compare in the passband.
    low = min(orig, new) / 2
    x = tones(orig, 0.25, [0.05 * low, 0.31 * low, 0.67 * low], [0.5, 0.3, 0.2])
    ours = emberaudio.resample(x, orig, new)
    up, down = emberaudio.rational_ratio(orig, new)
    theirs = signal.resample_poly(x, up, down)
    assert ours.shape == theirs.shape == (-(-len(x) * up // down),)
    margin = new // 50  # 20 ms of edge effects
    err = np.abs(interior(ours, margin) - interior(theirs, margin)).max()
    assert err < 2e-3, err  # relative to a peak amplitude of about 1


@pytest.mark.parametrize("orig,new", [(44100, 16000), (8000, 48000), (22050, 44100), (48000, 22050)])
def test_sine_frequency_and_amplitude_survive(orig, new):
    freq, amp = 997.0, 0.8
    y = emberaudio.resample(tones(orig, 1.0, [freq], [amp]), orig, new)
    core = interior(y, new // 20)
    # amplitude: RMS of a sine is amp / sqrt(2)
    assert np.sqrt(np.mean(core ** 2)) * np.sqrt(2) == pytest.approx(amp, rel=1e-3)
    # frequency: zero-padded FFT peak of the windowed core
    n = 1 << 20
    spectrum = np.abs(np.fft.rfft(core * np.hanning(len(core)), n))
    peak = np.argmax(spectrum) * new / n
    assert peak == pytest.approx(freq, abs=0.5)


def test_content_above_new_nyquist_is_rejected():
    x = tones(48000, 0.5, [5000.0], [1.0])  # above 4 kHz, the Nyquist frequency of 8 kHz
    y = emberaudio.resample(x, 48000, 8000)
    assert np.sqrt(np.mean(interior(y, 200) ** 2)) < 10 ** (-50 / 20)


@pytest.mark.parametrize("orig,new", [(44100, 16000), (8000, 48000), (44100, 48000)])
def test_filter_meets_its_documented_response(orig, new):
    up, down = emberaudio.rational_ratio(orig, new)
    taps = emberaudio.design_lowpass(up, down) / up
    nyquist = np.pi / max(up, down)  # lower Nyquist frequency in rad/sample at the upsampled rate

    def gain_db(lo, hi):
        return 20 * np.log10(np.abs(signal.freqz(taps, worN=np.linspace(lo * nyquist, hi * nyquist, 400))[1]))

    assert np.abs(gain_db(0, 0.75)).max() < 0.01
    assert gain_db(1.0, 3.0).max() < -48
    assert gain_db(1.05, 3.0).max() < -64


def test_channels_are_independent_and_dtype_kept():
    x = np.stack([tones(16000, 0.1, [300], [0.5]), tones(16000, 0.1, [700], [0.25])], axis=1)
    y = emberaudio.resample(x, 16000, 22050)
    np.testing.assert_allclose(y[:, 0], emberaudio.resample(x[:, 0], 16000, 22050), atol=1e-12)
    np.testing.assert_allclose(y[:, 1], emberaudio.resample(x[:, 1], 16000, 22050), atol=1e-12)
    assert emberaudio.resample(x.astype(np.float32), 16000, 8000).dtype == np.float32
    np.testing.assert_array_equal(emberaudio.resample(x, 16000, 16000), x)


def test_ratio_and_errors():
    assert emberaudio.rational_ratio(44100, 48000) == (160, 147)
    assert emberaudio.rational_ratio(48000, 8000) == (1, 6)
    with pytest.raises(ValueError, match="positive"):
        emberaudio.resample(np.zeros(10), 0, 8000)
    with pytest.raises(ValueError, match="frames"):
        emberaudio.resample(np.zeros((2, 2, 2)), 8000, 16000)
