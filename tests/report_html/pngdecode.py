"""A tiny PNG decoder (8-bit greyscale/RGB/RGBA, non-interlaced) over zlib and numpy.

Enough to read the screenshots headless Chromium writes, without an imaging library.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}


def decode_png(data: bytes) -> np.ndarray:
    """The pixels of *data* as a (height, width, channels) uint8 array."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour})")
    ch = _CHANNELS[colour]
    stride = width * ch
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    raw = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        ftype = int(raw[y, 0])
        line = raw[y, 1:]
        if ftype == 0:
            cur = line.copy()
        elif ftype == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, ch).astype(np.int64), axis=0) & 0xFF
            cur = cur.astype(np.uint8).reshape(stride)
        elif ftype == 2:  # Up
            cur = ((line.astype(np.int32) + prev) & 0xFF).astype(np.uint8)
        else:  # Average and Paeth depend on the pixel to the left: plain Python is fastest
            cur = np.frombuffer(_unfilter(ftype, line.tolist(), prev.tolist(), ch), np.uint8)
        out[y] = cur
        prev = cur.astype(np.int32)
    return out.reshape(height, width, ch)


def _unfilter(ftype: int, line: list[int], prev: list[int], ch: int) -> bytes:
    cur = [0] * len(line)
    for x, v in enumerate(line):
        a = cur[x - ch] if x >= ch else 0
        b = prev[x]
        if ftype == 3:
            pred = (a + b) >> 1
        else:  # Paeth
            c = prev[x - ch] if x >= ch else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
        cur[x] = (v + pred) & 0xFF
    return bytes(cur)


def encode_png(pixels: np.ndarray) -> bytes:
    """An RGB/RGBA uint8 array as PNG bytes (filter 0); for looking at crops while debugging."""
    h, w, ch = pixels.shape
    colour = {3: 2, 4: 6}[ch]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    head = struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )
