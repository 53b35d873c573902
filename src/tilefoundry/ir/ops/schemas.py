"""The attribute schema of every HIR op (names, kinds, defaults), checked when a node is made.

Type rules then read typed attributes; lowering and the canonical text read them in this order. An op
that takes no attributes has the empty schema. Every registered op has an entry (a test holds that).
"""

from __future__ import annotations

from ..core.attrs import (
    ACC_DTYPE,
    COMPUTE_DTYPE,
    REQUIRED,
    Attr,
    AttrSchema,
    anything,
    boolean,
    choice,
    dim,
    dims,
    dtype,
    integer,
    ints,
    number,
    optional,
    scalar,
)
from .reduction import reduce_kind

NO_ATTRS = AttrSchema()


def _storage(v: object) -> object:
    from ..types.storage import storage_of

    return None if v is None else storage_of(v)  # type: ignore[arg-type]


SCHEMAS: dict[str, AttrSchema] = {
    # elementwise
    **{op: NO_ATTRS for op in ("add", "sub", "mul", "div", "max", "min", "pow", "floor_div", "mod", "lt", "le",
                               "gt", "ge", "eq", "ne", "neg", "abs", "exp", "log", "rsqrt", "sqrt", "square",
                               "sigmoid", "tanh", "silu", "relu", "exp2", "log2", "ceil", "floor", "round",
                               "logical_and", "logical_or", "logical_not", "where")},
    "softplus": AttrSchema((Attr("beta", "a non-zero number", number, 1.0),
                            Attr("threshold", "a number", number, 20.0))),
    "gelu": AttrSchema((Attr("approximate", "'none' or 'tanh'", choice("none", "tanh"), "none"),)),
    "cast": AttrSchema((Attr("dtype", "a dtype", dtype),)),
    "clamp": AttrSchema((Attr("min_val", "a number or None", optional(number), None),
                         Attr("max_val", "a number or None", optional(number), None))),
    "constant": AttrSchema((Attr("value", "a number or bool", scalar), Attr("dtype", "a dtype", dtype))),
    # reductions
    "reduce": AttrSchema((Attr("axes", "an int or a tuple of ints", ints, (-1,)),
                          Attr("keepdim", "a bool", boolean, True),
                          Attr("kind", "a ReduceKind or its name", reduce_kind, "sum"),
                          ACC_DTYPE)),
    "softmax": AttrSchema((Attr("axis", "an int", integer, -1), COMPUTE_DTYPE)),
    "argmax": AttrSchema((Attr("axis", "an int", integer, -1),)),
    "topk": AttrSchema((Attr("k", "a positive int", integer), Attr("axis", "an int", integer, -1),
                        Attr("largest", "a bool", boolean, True), Attr("sorted", "a bool", boolean, True))),
    # nn
    "matmul": AttrSchema((ACC_DTYPE,)),
    "rms_norm": AttrSchema((Attr("eps", "a non-negative number", number, 1e-6), COMPUTE_DTYPE)),
    "layer_norm": AttrSchema((Attr("axis", "an int", integer, -1), Attr("eps", "a non-negative number", number, 1e-5),
                              COMPUTE_DTYPE)),
    "rope": AttrSchema((COMPUTE_DTYPE,)),
    # shape
    "reshape": AttrSchema((Attr("new_shape", "a tuple of extents (one may be -1)", dims),)),
    "transpose": AttrSchema((Attr("perm", "a tuple of ints", ints),)),
    "slice": AttrSchema((Attr("starts", "a tuple of extents", dims), Attr("sizes", "a tuple of extents", dims),
                         Attr("strides", "a tuple of ints or None", optional(ints), None))),
    "concat": AttrSchema((Attr("axis", "an int", integer, 0),)),
    "stack": AttrSchema((Attr("axis", "an int", integer, 0),)),
    "split": AttrSchema((Attr("axis", "an int", integer, 0), Attr("num_splits", "a positive int", integer))),
    "index_select": AttrSchema((Attr("dim", "an int", integer, 0),)),
    "index_add": AttrSchema((Attr("dim", "an int", integer, 0), Attr("alpha", "a number", number, 1))),
    "index_copy": AttrSchema((Attr("dim", "an int", integer, 0),)),
    "repeat_interleave": AttrSchema((Attr("repeats", "a positive int", integer), Attr("axis", "an int", integer, 0))),
    # creation
    "arange": AttrSchema((Attr("start", "an int or DimVar", dim), Attr("end", "an int or DimVar", dim),
                          Attr("step", "a positive int", integer, 1), Attr("dtype", "a dtype", dtype, "i64"))),
    "zeros": AttrSchema((Attr("shape", "a tuple of extents", dims), Attr("dtype", "a dtype", dtype, "f32"))),
    "full_like": AttrSchema((Attr("value", "a number or bool", scalar),)),
    # state and placement
    "cache_update": NO_ATTRS,
    "reshard": AttrSchema((Attr("shape_or_layout", "a shape, a shape with N @ mesh.axis splits or a ShardLayout",
                                anything, None),
                           Attr("storage", "'host', 'gmem', 'smem', 'rmem' or None", _storage, None))),
    "local": NO_ATTRS,
}

assert all(s is not REQUIRED for s in SCHEMAS.values())
