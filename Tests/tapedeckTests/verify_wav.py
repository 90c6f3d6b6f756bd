"""Independent check of a Tapedeck WAV with python's wave module.

usage: verify_wav.py FILE SIGNAL [CHANNELS]
SIGNAL is 'counter' (sample k = frame*channels+channel, as int16) or 'sine440' (the null
backend's default: 440 Hz, level 0.5, 16-bit). Prints frames, channels, rate and the index of
the first wrong sample (or -1), then checks that the header matches the payload.
"""
import math
import os
import struct
import sys
import wave

path, signal = sys.argv[1], sys.argv[2]
w = wave.open(path, "rb")
frames, channels, width, rate = w.getnframes(), w.getnchannels(), w.getsampwidth(), w.getframerate()
assert width == 2, "expected 16-bit samples"
data = w.readframes(frames)
assert len(data) == frames * channels * width, "the header claims more frames than the file holds"
samples = struct.unpack("<%dh" % (len(data) // 2), data)
first_bad = -1
for k, v in enumerate(samples):
    if signal == "counter":
        expected = ((k + 2**15) % 2**16) - 2**15
    else:
        frame = k // channels
        x = 0.5 * math.sin(2 * math.pi * 440 * frame / rate) * 32767
        expected = int(math.copysign(math.floor(abs(x) + 0.5), x))  # Swift's rounded(): half away from zero
    if v != expected:
        first_bad = k
        break
# The header's data size and the file's size agree: nothing past the data chunk but padding.
size = os.path.getsize(path)
header_ok = size - len(data) < 4096
print(frames, channels, rate, first_bad, "header-ok" if header_ok else "header-bad")
