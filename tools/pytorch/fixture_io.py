"""Reader/writer for Strata's test fixture files (.fx); the C++ reader is tests/support/fixture.hpp.

Format (little-endian, no padding):
  8 bytes  magic "STRATAFX"
  u32      version = 1
  u32      entry count
  per entry:
    u32    name length in bytes, then the name (UTF-8, no terminator)
    u32    dtype: 0 = f32, 1 = i32, 2 = f64
    u32    rank
    rank x u64 dims (row-major, last dim fastest)
    data   prod(dims) elements (1 element when rank == 0)
Names are unique; entries keep the order they were written in.
"""
import struct

import numpy as np

MAGIC = b"STRATAFX"
VERSION = 1
_DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<i4"), 2: np.dtype("<f8")}
_CODES = {np.dtype("float32"): 0, np.dtype("int32"): 1, np.dtype("float64"): 2}


def write_fixture(path, entries):
    """entries: list of (name, numpy array of float32 / int32 / float64)."""
    names = [n for n, _ in entries]
    if len(set(names)) != len(names):
        raise ValueError("duplicate entry names")
    out = bytearray(MAGIC)
    out += struct.pack("<II", VERSION, len(entries))
    for name, arr in entries:
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would turn a 0-d array into 1-d)
        if arr.dtype not in _CODES:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        code = _CODES[arr.dtype]
        raw = name.encode("utf-8")
        out += struct.pack("<I", len(raw)) + raw
        out += struct.pack("<II", code, arr.ndim)
        out += struct.pack(f"<{arr.ndim}Q", *arr.shape)
        out += arr.astype(_DTYPES[code], copy=False).tobytes(order="C")
    with open(path, "wb") as f:
        f.write(out)


def read_fixture(path):
    """Returns an ordered dict name -> numpy array."""
    with open(path, "rb") as f:
        buf = f.read()
    if buf[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic")
    version, count = struct.unpack_from("<II", buf, 8)
    if version != VERSION:
        raise ValueError(f"{path}: unsupported version {version}")
    pos, out = 16, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", buf, pos); pos += 4
        name = buf[pos:pos + n].decode("utf-8"); pos += n
        code, rank = struct.unpack_from("<II", buf, pos); pos += 8
        dims = struct.unpack_from(f"<{rank}Q", buf, pos); pos += 8 * rank
        dt = _DTYPES[code]
        count_el = int(np.prod(dims, dtype=np.int64)) if rank else 1
        arr = np.frombuffer(buf, dtype=dt, count=count_el, offset=pos).reshape(dims)
        pos += count_el * dt.itemsize
        out[name] = arr
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} trailing bytes")
    return out
