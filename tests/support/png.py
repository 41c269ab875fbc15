"""A PNG reader small enough to trust: the pixels of a screenshot, without Pillow or numpy.

Reads 8-bit RGB or RGBA, non-interlaced images (what Chromium writes), undoing the five
scanline filters of the PNG specification.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def read_png(path: Path) -> tuple[int, int, int, bytes]:
    """``(width, height, channels, pixels)``: the rows one after the other, unfiltered."""
    data = path.read_bytes()
    assert data[:8] == SIGNATURE, "not a PNG file"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8, "unsupported PNG bit depth"
            assert colour in (2, 6), "unsupported PNG colour type"
            assert interlace == 0, "unsupported interlaced PNG"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        row_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = prev[i]
            corner = prev[i - channels] if i >= channels else 0
            if row_filter == 1:
                line[i] = (line[i] + left) & 0xFF
            elif row_filter == 2:
                line[i] = (line[i] + up) & 0xFF
            elif row_filter == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif row_filter == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return width, height, channels, b"".join(rows)
