"""The import surface models written for the reference project rely on (DESIGN.md)."""

from __future__ import annotations


def test_public_names_import() -> None:
    import tilefoundry.dsl.tf as tf_module
    from tilefoundry import func, module
    from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Tensor, Topology, tf
    from tilefoundry.ir.core.module import LoadedModule, Module
    from tilefoundry.ir.types.dim import DimVar as IrDimVar
    from tilefoundry.ir.types.shard import Topology as IrTopology
    from tilefoundry.runtime import RuntimeFunction, RuntimeModule, runtime_func, runtime_module
    from tilefoundry.runtime.check import PREDICATES, check
    from tilefoundry.runtime.resource import DictResource, SafetensorsResource
    from tilefoundry.target import CpuTarget, CudaTarget

    assert DimVar is IrDimVar and Topology is IrTopology and tf is tf_module
    assert callable(func) and callable(module) and callable(check) and callable(runtime_func)
    assert {"allclose", "rel_l2", "cosine", "equal", "ulp", "max_abs", "max_rel", "nan_inf"} == set(PREDICATES)
    assert CudaTarget("nvidia.h200_sxm").arch == "sm_90a" and CpuTarget().kind == "cpu"
    for name in (Tensor, ConstTensor, Mesh, Module, LoadedModule, RuntimeModule, RuntimeFunction,
                 runtime_module, DictResource, SafetensorsResource):
        assert name is not None


def test_star_import_of_tf_gives_every_op() -> None:
    namespace: dict[str, object] = {}
    exec("from tilefoundry.dsl.tf import *", namespace)
    for op in ("add", "matmul", "rms_norm", "rope", "softmax", "cache_update", "topk", "reshard", "local"):
        assert callable(namespace[op])
