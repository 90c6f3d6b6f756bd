#!/usr/bin/env python3
"""WAVE channel masks for the channel-layout tests, read and written independently of Tapedeck.

  channel_mask.py make PATH CHANNELS MASK   a WAVE_FORMAT_EXTENSIBLE s16 file, 4800 frames at
                                            48 kHz, channel c holding the value 1000*(c+1)
  channel_mask.py mask PATH [--any-content] prints dwChannelMask in hex, or "plain" for a
                                            WAVEFORMATEX file; exits 1 if the channels were
                                            reordered (channel c does not hold 1000*(c+1))
"""
import struct
import sys


def make(path, channels, mask):
    frames = 4800
    data = b"".join(struct.pack("<" + "h" * channels, *[1000 * (c + 1) for c in range(channels)]) for _ in range(frames))
    guid = struct.pack("<H", 1) + bytes([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])
    fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, 48000, 48000 * 2 * channels, 2 * channels, 16, 22, 16, mask) + guid
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


def mask(path, check_order):
    raw = open(path, "rb").read()
    assert raw[:4] == b"RIFF" and raw[8:12] == b"WAVE", "not RIFF WAVE"
    at, fmt, data = 12, None, None
    while at + 8 <= len(raw):
        cid, size = raw[at:at + 4], struct.unpack("<I", raw[at + 4:at + 8])[0]
        if cid == b"fmt ":
            fmt = raw[at + 8:at + 8 + size]
        if cid == b"data":
            data = raw[at + 8:at + 8 + size]
            break
        at += 8 + size + (size & 1)
    tag, channels = struct.unpack("<HH", fmt[:4])
    print("0x%X" % struct.unpack("<I", fmt[20:24])[0] if tag == 0xFFFE else "plain")
    first = struct.unpack("<" + "h" * channels, data[:2 * channels])
    if check_order and list(first) != [1000 * (c + 1) for c in range(channels)]:
        print("channels reordered: %s" % (first,))
        sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4], 0))
    else:
        mask(sys.argv[2], "--any-content" not in sys.argv)
