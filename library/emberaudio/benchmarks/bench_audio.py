"""Times emberaudio's WAV IO, resampling and spectral features (scipy as a yardstick).

Run: python library/emberaudio/benchmarks/bench_audio.py [--repeat N]
Prints one line per case: best-of-N milliseconds for 10 s of stereo audio.
"""

import argparse
import os
import tempfile
import time

import numpy as np

import emberaudio


def best_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rate = 44100
    x = np.random.default_rng(0).uniform(-0.5, 0.5, size=(rate * 10, 2))
    mono16k = emberaudio.resample(x[:, 0], rate, 16000)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.wav")
        emberaudio.save(path, x, rate, encoding="PCM_24")
        cases = [
            ("save PCM_16", lambda: emberaudio.save(path + "16", x, rate, encoding="PCM_16")),
            ("save PCM_24", lambda: emberaudio.save(path + "24", x, rate, encoding="PCM_24")),
            ("load PCM_24", lambda: emberaudio.load(path)),
            ("resample 44.1k -> 16k", lambda: emberaudio.resample(x, rate, 16000)),
            ("resample 44.1k -> 48k", lambda: emberaudio.resample(x, rate, 48000)),
            ("spectrogram n_fft=512 hop=160 (16 kHz mono)", lambda: emberaudio.spectrogram(mono16k, 512, 160)),
            ("mel_spectrogram 80 mels (16 kHz mono)",
             lambda: emberaudio.mel_spectrogram(mono16k, 16000, 512, 160, n_mels=80)),
            ("mfcc 13 of 40 mels (16 kHz mono)", lambda: emberaudio.mfcc(mono16k, 16000, 13, 512, 160, n_mels=40)),
        ]
        try:
            from scipy import signal

            cases.append(("scipy resample_poly 44.1k -> 16k", lambda: signal.resample_poly(x, 160, 441, axis=0)))
            cases.append(("scipy stft n_fft=512 hop=160 (16 kHz mono)",
                          lambda: signal.stft(mono16k, nperseg=512, noverlap=352)))
        except ImportError:
            pass
        print(f"emberaudio {emberaudio.__version__}: 10 s stereo at {rate} Hz, best of {args.repeat}")
        for name, fn in cases:
            print(f"{name:46s} {best_ms(fn, args.repeat):9.2f} ms")


if __name__ == "__main__":
    main()
