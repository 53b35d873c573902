import sys, collections, torch
sys.path.insert(0, "bench")
import compiled_decode as cd
from tilefoundry import jit
from torch.profiler import profile, ProfilerActivity
fns = cd.slot_functions()
ext = {"ctx": 4096, "capacity": 4096}
for name in ("qkv", "o_proj", "gate_up", "down", "attention"):
    fn = fns[name]
    c = jit(fn)
    args = []
    for p in fn.params:
        shape = tuple(d if isinstance(d, int) else ext.get(d.name, 1) for d in p.type.shape)
        if p.type.dtype.is_int:
            t = torch.arange(shape[0]) if p.name == "kv_pos" else torch.full(shape, 4095)
        else:
            t = torch.randn(shape) * 0.05
        args.append(t.to(p.type.dtype.torch_dtype).cuda())
    for _ in range(5): c(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(50): c(*args)
        torch.cuda.synchronize()
    agg = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            agg[e.name[:70]].append(e.device_time)
    print(name, {k: f"{sum(v)/len(v):.2f}us x{len(v)//50}" for k, v in agg.items()})
