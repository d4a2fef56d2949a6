"""STFT, spectrogram, mel and MFCC against scipy references and known properties."""

import numpy as np
import pytest
import scipy.fft
from scipy import signal

import emberaudio

pytestmark = pytest.mark.feature("audio.core")


def chirp(rate=16000, seconds=0.5, channels=None):
    t = np.arange(int(rate * seconds)) / rate
    x = signal.chirp(t, 100, seconds, 6000) + 0.1 * np.random.default_rng(0).standard_normal(t.size)
    return x if channels is None else np.stack([x * (c + 1) for c in range(channels)], axis=1)


@pytest.mark.parametrize("n_fft,hop,win", [(512, 128, None), (400, 160, 400), (1024, 256, 600), (256, 100, 64)])
def test_stft_matches_scipy(n_fft, hop, win):
    x = chirp()
    ours = emberaudio.stft(x, n_fft, hop, win)
    window = np.zeros(n_fft)
    w = n_fft if win is None else win
    window[(n_fft - w) // 2: (n_fft - w) // 2 + w] = signal.get_window("hann", w)  # periodic
    padded = np.pad(x, n_fft // 2, mode="reflect")
    _, _, theirs = signal.stft(padded, nperseg=n_fft, noverlap=n_fft - hop, window=window, boundary=None,
                               padded=False, detrend=False, return_onesided=True)
    theirs = theirs * window.sum()  # scipy scales the spectrum by 1 / sum(window)
    assert ours.shape == theirs.shape == (n_fft // 2 + 1, 1 + len(x) // hop)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)


def test_stft_without_centering_matches_scipy():
    x = chirp()
    ours = emberaudio.stft(x, 256, 64, center=False)
    _, _, theirs = signal.stft(x, nperseg=256, noverlap=192, window="hann", boundary=None, padded=False)
    np.testing.assert_allclose(ours, theirs * signal.get_window("hann", 256).sum(), atol=1e-9)


def test_spectrogram_powers_and_channels():
    x = chirp(channels=2)
    spec = emberaudio.spectrogram(x, n_fft=512, hop_length=128)
    assert spec.shape == (2, 257, 1 + x.shape[0] // 128)
    np.testing.assert_allclose(spec[1], 4 * spec[0], rtol=1e-9)  # channel 1 is 2x louder
    complex_spec = emberaudio.spectrogram(x[:, 0], 512, 128, power=None)
    np.testing.assert_allclose(np.abs(complex_spec) ** 2, spec[0], rtol=1e-9)
    np.testing.assert_allclose(emberaudio.spectrogram(x[:, 0], 512, 128, power=1.0), np.abs(complex_spec))


def test_spectrogram_of_a_tone_peaks_at_its_bin():
    rate, freq = 16000, 1250.0  # exactly bin 40 of a 512-point FFT
    x = np.sin(2 * np.pi * freq * np.arange(rate) / rate)
    spec = emberaudio.spectrogram(x, n_fft=512, hop_length=256)
    assert (np.argmax(spec[:, 5:-5], axis=0) == 40).all()
    # Parseval for the Hann window: power in the bins equals sum(w^2) * A^2 / 4 * 2 sides
    frame_power = spec[:, 10].sum() * 2 - spec[0, 10] - spec[-1, 10]
    expected = 512 * np.sum(emberaudio.get_window("hann", 512) ** 2) / 2
    assert frame_power == pytest.approx(expected, rel=1e-6)


def test_float32_stays_float32():
    x = chirp().astype(np.float32)
    spec = emberaudio.spectrogram(x, 256, 64)
    assert spec.dtype == np.float32
    np.testing.assert_allclose(spec, emberaudio.spectrogram(x.astype(np.float64), 256, 64), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("scale", ["htk", "slaney"])
def test_mel_scale_known_values_and_inverse(scale):
    freqs = np.array([0.0, 200.0, 999.0, 1000.0, 4000.0, 11025.0])
    np.testing.assert_allclose(emberaudio.mel_to_hz(emberaudio.hz_to_mel(freqs, scale), scale), freqs, atol=1e-9)
    mels = emberaudio.hz_to_mel(freqs, scale)
    assert (np.diff(mels) > 0).all()
    if scale == "htk":
        assert emberaudio.hz_to_mel(1000.0, "htk") == pytest.approx(999.9855, abs=1e-3)
        assert emberaudio.hz_to_mel(700.0, "htk") == pytest.approx(2595 * np.log10(2))
    else:
        assert emberaudio.hz_to_mel(1000.0, "slaney") == pytest.approx(15.0)
        assert emberaudio.hz_to_mel(500.0, "slaney") == pytest.approx(7.5)
        assert emberaudio.hz_to_mel(6400.0, "slaney") == pytest.approx(15.0 + 27.0)


@pytest.mark.parametrize("scale", ["htk", "slaney"])
def test_filterbank_properties(scale):
    rate, n_fft, n_mels, f_min, f_max = 16000, 2048, 40, 50.0, 7600.0
    fb = emberaudio.mel_filterbank(n_fft // 2 + 1, f_min, f_max, n_mels, rate, mel_scale=scale)
    freqs = np.linspace(0, rate / 2, n_fft // 2 + 1)
    corners = emberaudio.mel_to_hz(np.linspace(emberaudio.hz_to_mel(f_min, scale),
                                               emberaudio.hz_to_mel(f_max, scale), n_mels + 2), scale)
    assert fb.shape == (n_fft // 2 + 1, n_mels)
    assert (fb >= 0).all() and fb.max() <= 1.0
    for m in range(n_mels):
        support = freqs[fb[:, m] > 0]
        assert support.min() > corners[m] and support.max() < corners[m + 2]
        # the peak bin is one of the two bins around the filter's centre
        assert abs(freqs[np.argmax(fb[:, m])] - corners[m + 1]) <= rate / n_fft
    assert (np.diff(np.argmax(fb, axis=0)) >= 0).all()
    # overlapping triangles add up to 1 between the first and last centre
    inside = (freqs >= corners[1]) & (freqs <= corners[-2])
    np.testing.assert_allclose(fb[inside].sum(axis=1), 1.0, atol=1e-9)
    assert (fb[freqs < f_min] == 0).all() and (fb[freqs > f_max] == 0).all()


def test_slaney_norm_gives_unit_area():
    rate, n_bins = 16000, 200001  # a fine grid to integrate on
    fb = emberaudio.mel_filterbank(n_bins, 0.0, 8000.0, 20, rate, mel_scale="slaney", norm="slaney")
    freqs = np.linspace(0, rate / 2, n_bins)
    areas = np.sum(fb, axis=0) * (freqs[1] - freqs[0])
    np.testing.assert_allclose(areas, 1.0, rtol=1e-3)


def test_mel_spectrogram_is_filterbank_times_power_spectrogram():
    x = chirp(channels=2)
    mel = emberaudio.mel_spectrogram(x, 16000, n_fft=512, hop_length=160, n_mels=64, f_min=20.0, f_max=7000.0)
    spec = emberaudio.spectrogram(x, 512, 160)
    fb = emberaudio.mel_filterbank(257, 20.0, 7000.0, 64, 16000)
    assert mel.shape == (2, 64, spec.shape[-1])
    np.testing.assert_allclose(mel, np.stack([fb.T @ s for s in spec]), rtol=1e-10)


def test_tone_lands_in_the_right_mel_band():
    rate, freq = 16000, 3000.0
    x = np.sin(2 * np.pi * freq * np.arange(rate // 2) / rate)
    mel = emberaudio.mel_spectrogram(x, rate, n_fft=1024, hop_length=256, n_mels=40)
    corners = emberaudio.mel_to_hz(np.linspace(0, emberaudio.hz_to_mel(8000.0), 42))
    band = np.argmax(mel[:, 10])
    assert corners[band] < freq < corners[band + 2]


@pytest.mark.parametrize("n", [1, 2, 7, 13, 40, 128])
def test_dct_matches_scipy(n):
    x = np.random.default_rng(n).standard_normal((3, n, 5))
    np.testing.assert_allclose(emberaudio.dct_ortho(x, axis=1), scipy.fft.dct(x, type=2, norm="ortho", axis=1),
                               atol=1e-10)


def test_mfcc_is_dct_of_db_mel():
    x = chirp()
    coeffs = emberaudio.mfcc(x, 16000, n_mfcc=13, n_fft=512, hop_length=160, n_mels=40)
    mel = emberaudio.mel_spectrogram(x, 16000, n_fft=512, hop_length=160, n_mels=40)
    db = 10 * np.log10(np.maximum(mel, 1e-10))
    db = np.maximum(db, db.max() - 80.0)
    reference = scipy.fft.dct(db, type=2, norm="ortho", axis=0)[:13]
    assert coeffs.shape == (13, mel.shape[1])
    np.testing.assert_allclose(coeffs, reference, atol=1e-8)


def test_mfcc_channels_and_errors():
    x = chirp(channels=2)
    coeffs = emberaudio.mfcc(x, 16000, n_mfcc=20, n_fft=400, hop_length=160, n_mels=64)
    assert coeffs.shape[:2] == (2, 20)
    with pytest.raises(ValueError, match="n_mfcc"):
        emberaudio.mfcc(x, 16000, n_mfcc=100, n_mels=64)
    with pytest.raises(ValueError, match="window"):
        emberaudio.spectrogram(x, window="gauss")


def test_normalized_spectrogram_divides_by_window_energy():
    x = chirp()
    plain = emberaudio.spectrogram(x, 512, 128, win_length=400, power=1.0)
    scaled = emberaudio.spectrogram(x, 512, 128, win_length=400, power=1.0, normalized=True)
    np.testing.assert_allclose(scaled, plain / np.sqrt(np.sum(emberaudio.get_window("hann", 400) ** 2)))
