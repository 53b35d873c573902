"""A tensor that claims to live on another device, without that device: a hand-built DLPack capsule.

The memory is a host buffer that is never read; the claim lets a test reach the device checks of a
compiled entry on a machine that has only a CPU.
"""

from __future__ import annotations

import ctypes
from typing import Any

import tvm_ffi

KDL_CPU, KDL_CUDA = 1, 2
KDL_BFLOAT, KDL_FLOAT = 4, 2


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_ALIVE: list[Any] = []  # the buffers behind every fake tensor, for the life of the process
_BUFFERS: dict[int, Any] = {}  # id of a fake tensor -> its buffer (tvm-ffi tensors take no attributes)


def fake_tensor(shape: tuple[int, ...], code: int, bits: int, device_type: int, device_id: int, *,
                strides: tuple[int, ...] | None = None, byte_offset: int = 0, base: Any = None) -> Any:
    """A tvm-ffi tensor of ``shape`` and dtype (code, bits) that says it is on (device_type, device_id).

    ``strides`` (in elements; None: compact row-major), ``byte_offset`` past the start of its buffer, and
    ``base``: another fake tensor whose buffer it views (to make two tensors share memory).
    """
    n = 1
    for d in shape:
        n *= d
    extent = n if strides is None else 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    buf = _BUFFERS[id(base)] if base is not None else (ctypes.c_uint8 * (max(1, extent * bits // 8) + 64))()
    at = ctypes.addressof(buf)
    aligned = (at + 63) // 64 * 64 - at  # 64-byte aligned, as an allocator's blocks are
    dims = (ctypes.c_int64 * len(shape))(*shape)
    steps = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
    managed = _Managed()
    managed.dl_tensor = _Tensor(ctypes.c_void_p(at + aligned), _Device(device_type, device_id), len(shape),
                                _DType(code, bits, 1), dims, steps, byte_offset)
    managed.deleter = _DELETER()  # NULL: nothing to free, the buffers stay in _ALIVE
    _ALIVE.extend([buf, dims, steps, managed])
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    tensor = tvm_ffi.from_dlpack(new(ctypes.addressof(managed), b"dltensor", None))
    _BUFFERS[id(tensor)] = buf
    _ALIVE.append(tensor)  # keeps its id from being reused
    return tensor
