#!/usr/bin/env bash
# The whole GPU suite and the copy bandwidth benchmark, in one call, on a machine with an H200
# (or any sm_90a GPU) and nvcc; through the device tool:
#   set -o pipefail; bash tests/gpu/run.sh 2>&1 | tee $OUT/log        (carry: [".whl"])
# CuTe and tvm-ffi come from the nvidia-cutlass and apache-tvm-ffi wheels in .whl/ (that machine has
# neither), or from installed packages when there are no wheels. TF_GPU_BUILD_ONLY=1 stops after
# building. TF_GPU_PARTS (comma-separated; default all) picks what runs, so the suite fits several device
# calls of 600 s each:
#   runtime  the C++ runtime's CUDA programs (tests/gpu/*.cu), their SASS, the copy bandwidth bench and
#            the copy ceiling by launch shape (bench/copy_ceiling.cu)
#   compile  the compile path's CUDA target: the recorded acceptance unit built and its SASS checked, the
#            jitted kernels against the evaluator (test_compile_cuda.py), their bench (bench/kernels.py),
#            the compiled GEMM against cuBLAS (bench/compiled_gemm_cuda.py), the compiled prompt attention
#            against SDPA (bench/compiled_prefill_attention_cuda.py)
#   engine   model families on cuda, the decode engine's CUDA-graph path, its compiled slots' bench
#   decode   the decode bench at Qwen3-1.7B's shape (bench/decode.py), minutes long
#   tp       (not in the default: needs two GPUs) tensor-parallel decoding over NCCL, and the decode bench at
#            Qwen3-1.7B's and Qwen3-8B's shapes at --tp 1 and 2 (bench/decode.py --tp 1,2)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-$root/build/gpu}
build=$root/build/gpu
mkdir -p "$build" "$out"
py=${PYTHON:-python3}
parts=,${TF_GPU_PARTS:-runtime,compile,engine,decode},
for p in ${parts//,/ }; do
  case $p in runtime|compile|engine|decode|tp) ;; *) echo "run.sh: TF_GPU_PARTS names '$p'; use runtime, compile, engine, decode, tp"; exit 2 ;; esac
done
want() { [[ $parts == *,$1,* ]]; }

site=$build/site
# (pytest-xdist's wheels too, where carried: PYTEST_ADDOPTS="-n 10" then runs each pytest file's builds side by side)
wheels=($(ls .whl/nvidia_cutlass-*.whl .whl/apache_tvm_ffi-*.whl .whl/pytest_xdist-*.whl .whl/execnet-*.whl 2>/dev/null))
if (( ${#wheels[@]} )); then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}" \
    || exit 1
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
# Libraries built from Python (jitted kernels, the engine's compiled slots) go to the build folder, not the home
# cache.
export TILEFOUNDRY_CACHE=${TILEFOUNDRY_CACHE:-$build/cache}
cute=$("$py" -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))") || {
  echo "run.sh: no nvidia-cutlass: put its wheel in .whl/ (tests/gpu/README.md)"; exit 1; }
echo "CuTe headers: $cute"
nvcc --version | tail -n 1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

flags=(-std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -DTILEFOUNDRY_TARGET_CUDA -Iinclude
       -isystem "$cute" -Werror all-warnings -Xcompiler -Wall,-Wextra)
tests=(test_topology test_linear_launch test_elementwise test_reduce test_sync test_copy_async test_vector_path test_spec_style
       test_row_kernels)
want runtime || tests=()

# Build everything at once: each nvcc is single-threaded.
declare -A pids
for t in "${tests[@]}"; do
  nvcc "${flags[@]}" "tests/gpu/$t.cu" -o "$build/$t" > "$build/$t.build.log" 2>&1 &
  pids[$t]=$!
done
if want runtime; then
  nvcc "${flags[@]}" -Xcompiler -fPIC -shared bench/copy_bandwidth.cu -o "$build/libtf_copy.so" \
    > "$build/bench.build.log" 2>&1 &
  pids[bench]=$!
  nvcc "${flags[@]}" bench/copy_ceiling.cu -o "$build/copy_ceiling" > "$build/copy_ceiling.build.log" 2>&1 &
  pids[copy_ceiling]=$!
fi
# The compile path's CUDA acceptance unit (tests/generated/cuda_acceptance.cu): regenerated and compared with
# the recorded text and digest, then built by jit's own build step (nvcc, the CUDA target's flags); its
# library's path is the log's last line.
if want compile; then
  PYTHONPATH=$root/src:$root${PYTHONPATH:+:$PYTHONPATH} "$py" -m tests.cuda_unit --build > "$build/cuda_unit.build.log" 2>&1 &
  pids[cuda_unit]=$!
fi
declare -A status
for k in "${!pids[@]}"; do
  if wait "${pids[$k]}"; then status[$k]=built; else status[$k]="BUILD FAILED"; cat "$build/$k.build.log"; fi
done
echo "=== sass of the compiled acceptance unit's bf16 row kernels"
if ! want compile; then
  :
elif [[ ${status[cuda_unit]} == built ]]; then
  status[cuda_unit]="passed (matches its recorded digest, built)"
  tests/gpu/check_sass.sh "$(tail -n 1 "$build/cuda_unit.build.log")" \
    "$(PYTHONPATH=$root/src:$root "$py" -m tests.cuda_unit --sass-pattern)"
  case $? in
    0) status[cuda_unit_sass]=passed ;;
    77) status[cuda_unit_sass]="skipped (no cuobjdump)" ;;
    *) status[cuda_unit_sass]=FAILED ;;
  esac
else
  status[cuda_unit_sass]="not built"
fi
# The row kernels (RMSNorm, residual + RMSNorm, softmax, SwiGLU on bf16) must load and store gmem
# 16 bytes at a time and never spill to local memory; check_sass.sh prints their counts. No GPU is
# needed for this, so it runs in a build-only call too.
echo "=== sass of the row kernels"
if ! want runtime; then
  :
elif [[ ${status[test_row_kernels]} != "BUILD FAILED" ]]; then
  tests/gpu/check_sass.sh "$build/test_row_kernels" 'rms_norm|softmax|swiglu'
  case $? in
    0) status[sass]=passed ;;
    77) status[sass]="skipped (no cuobjdump)" ;;
    *) status[sass]=FAILED ;;
  esac
else
  status[sass]="not built"
fi

if [[ ${TF_GPU_BUILD_ONLY:-0} == 1 ]]; then
  bad=0
  for k in "${!status[@]}"; do
    echo "$k: ${status[$k]}"
    [[ ${status[$k]} == built || ${status[$k]} == passed* || ${status[$k]} == skipped* ]] || bad=1
  done
  exit $bad
fi

for t in "${tests[@]}"; do
  [[ ${status[$t]} == built ]] || continue
  echo "=== $t"
  if timeout 300 "$build/$t"; then status[$t]=passed; else status[$t]="FAILED (exit $?)"; fi
done

# What the compiler made of the other fast paths: 16-byte loads and stores in the copy, cp.async
# (LDGSTS) in the staging test, shuffles and barriers in the reduce tiers.
if command -v cuobjdump >/dev/null; then
  for f in libtf_copy.so:'LDG.E.128|STG.E.128' test_copy_async:'LDGSTS' test_reduce:'SHFL.BFLY|BAR.SYNC'; do
    bin=${f%%:*}; pat=${f#*:}
    [[ -f $build/$bin ]] && echo "sass $bin: $(cuobjdump -sass "$build/$bin" | grep -cE "$pat") instructions matching $pat"
  done
fi

if want runtime && [[ ${status[bench]:-} == built ]]; then
  echo "=== copy bandwidth"
  if PYTHONUNBUFFERED=1 "$py" bench/copy_bandwidth.py --lib "$build/libtf_copy.so" --json "$out/copy_bandwidth.json"; then
    if "$py" -c "import json,sys; sys.exit(0 if json.load(open('$out/copy_bandwidth.json'))['meets_target'] else 1)"; then
      status[bench]="passed (>= 85% of torch)"
    else
      status[bench]="BELOW 85% of torch"
    fi
  else
    status[bench]="FAILED"
  fi
fi

# What one launch copying a row kernel's bytes reaches at all, by launch shape (no goal: the ceiling the
# row kernels' bench is read against).
if want runtime && [[ ${status[copy_ceiling]:-} == built ]]; then
  echo "=== copy ceiling: one launch copying 32 to 512 MiB, by launch shape, timed as bench/kernels.py"
  if "$build/copy_ceiling" --json "$out/copy_ceiling.json"; then status[copy_ceiling]=passed
  else status[copy_ceiling]=FAILED; fi
fi

# The Python side on the GPU: the compile path's CUDA target (jitted kernels against the evaluator, then
# their GB/s against torch), model families through reference and twin, the decode engine's graph path,
# and decode speed vs HF.
export PYTHONPATH=$root/src${PYTHONPATH:+:$PYTHONPATH}
if want compile; then
  echo "=== python: the acceptance kernels jitted for cuda against the evaluator; devices and streams"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_compile_cuda.py; then status[compile]=passed
  else status[compile]=FAILED; fi
  echo "=== python: rows of any length (padded over a CTA with a tail), argmax and topk, on cuda"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_padded_rows.py tests/gpu/test_compile_topk.py; then
    status[rows_topk]=passed
  else status[rows_topk]=FAILED; fi
  echo "=== python: staged functions (matmul, views, rope, cache update, the families' decoder functions) on cuda"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_compile_stages.py; then status[stages]=passed
  else status[stages]=FAILED; fi
  echo "=== python: the benches' graph timing (outputs torch allocates cycle as the inputs do)"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_bench_timing.py; then status[bench_timing]=passed
  else status[bench_timing]=FAILED; fi
  echo "=== compiled row kernels vs torch eager / torch.compile (GB/s)"
  if PYTHONUNBUFFERED=1 "$py" bench/kernels.py --json "$out/kernels.json"; then status[kernels_bench]=passed
  else status[kernels_bench]=FAILED; fi
  echo "=== compiled GEMM (many rows, tensor cores) vs cuBLAS at Qwen3-1.7B's projections"
  if PYTHONUNBUFFERED=1 "$py" bench/compiled_gemm_cuda.py --json "$out/compiled_gemm.json"; then
    status[gemm_bench]=passed
  else status[gemm_bench]=FAILED; fi
  echo "=== compiled prompt attention (blocks of query rows, tensor cores) vs SDPA's flash backend"
  if PYTHONUNBUFFERED=1 "$py" bench/compiled_prefill_attention_cuda.py --json "$out/compiled_prefill_attention.json"
  then status[attention_bench]=passed
  else status[attention_bench]=FAILED; fi
fi
if want engine; then
  echo "=== python: model families on cuda"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_models_cuda.py; then status[models]=passed
  else status[models]=FAILED; fi
  echo "=== python: the decode engine's CUDA-graph path against the semantic Module"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_engine_cuda.py; then status[engine_graph]=passed
  else status[engine_graph]=FAILED; fi
  echo "=== the engine's compiled slots vs torch / cuBLAS / SDPA (GB/s), and the decode engine's whole Qwen3-1.7B step"
  if PYTHONUNBUFFERED=1 "$py" bench/engine_kernels.py --json "$out/engine_kernels.json"; then
    status[engine_bench]=passed
  else status[engine_bench]=FAILED; fi
fi
if want decode; then
  # One device call may run 600 s: the decode bench gets what is left of TF_GPU_TIME_LIMIT (590 s), and
  # its last runner (transformers' static cache + compile) only what the others leave.
  budget=$(( ${TF_GPU_TIME_LIMIT:-590} - SECONDS ))
  echo "=== decode speed: Qwen3-1.7B shape, this project vs transformers vs torch ($budget s left)"
  if PYTHONUNBUFFERED=1 "$py" bench/decode.py --shape qwen3-1.7b --time-budget "$budget" --json "$out/decode.json"
  then status[decode]=passed; else status[decode]=FAILED; fi
fi

if want tp; then
  echo "=== python: tensor parallel decoding over two GPUs (NCCL, collectives inside the CUDA graph)"
  if "$py" -m pytest -q -p no:cacheprovider tests/gpu/test_tensor_parallel_cuda.py; then status[tp]=passed
  else status[tp]=FAILED; fi
  for shape in qwen3-1.7b qwen3-8b; do
    echo "=== decode speed at $shape's shape, this project's engine at --tp 1 and 2"
    if PYTHONUNBUFFERED=1 "$py" bench/decode.py --shape $shape --runners project --tp 1,2 --new-tokens 512 \
        --json "$out/decode_tp_$shape.json"; then status[tp_$shape]=passed; else status[tp_$shape]=FAILED; fi
  done
fi

echo "=== summary ($parts)"
fail=0
names=("${tests[@]}")
want runtime && names+=(sass bench copy_ceiling)
want compile && names+=(cuda_unit cuda_unit_sass compile rows_topk stages bench_timing kernels_bench gemm_bench
                         attention_bench)
want engine && names+=(models engine_graph engine_bench)
want decode && names+=(decode)
want tp && names+=(tp tp_qwen3-1.7b tp_qwen3-8b)
for k in "${names[@]}"; do
  echo "$k: ${status[$k]:-not run}"
  [[ ${status[$k]:-} == passed* ]] || fail=1
done
exit $fail
