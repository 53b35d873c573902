"""bench/sass_samples.py: Nsight Compute's per-instruction listing read back (two kernels, the columns ncu prints),
summed by stall reason and by region, and its refusals of a file that is not such a listing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from sass_samples import read, report  # noqa: E402

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"# Samples","Instructions Executed","stall_long_sb","stall_no_inst","stall_barrier",'
          '"stall_long_sb (Not Issued)"')


def _row(address: str, source: str, samples: int, executed: int, long_sb: int, no_inst: int, barrier: int) -> str:
    return f'"{address}","{source}","{samples}","{samples}","{samples}","{executed:,}","{long_sb}","{no_inst}",' \
           f'"{barrier}","{long_sb}"'


def _listing() -> str:
    loop = [_row(f"0x{0x100 + 16 * k:x}", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24", 2, 4096, 0, 0, 2)
            for k in range(8)]
    once = [_row(f"0x{0x200 + 16 * k:x}", f"LEA R{k}, P1, R0, R52, 0xb", 3, 64, 0, 3, 0) for k in range(8)]
    never = [_row("0x300", "BRA 0x300", 0, 0, 0, 0, 0)]
    first = ['"Kernel Name","gemm_kernel(float const*)",', HEADER,
             _row("0x0", "@!P0  BRA 0x80", 40, 4096, 40, 0, 0), *loop, *never, *once]
    second = ['"Kernel Name","nvjet_sm90_tst_128x128_64x6_2x1",', HEADER, _row("0x0", "EXIT", 1, 128, 1, 0, 0)]
    return "\n".join(first + second) + "\n"


def test_the_listing_is_summed_by_reason_and_by_region() -> None:
    gemm, peer = read(_listing())
    assert gemm.name == "gemm_kernel(float const*)" and peer.name.startswith("nvjet")
    assert len(gemm.instructions) == 18 and gemm.samples == 40 + 16 + 24
    assert gemm.instructions[0].opcode == "BRA" and gemm.instructions[0].executed == 4096  # "4,096" read
    assert dict(gemm.stall_shares()) == {"stall_long_sb": 0.5, "stall_no_inst": 0.3, "stall_barrier": 0.2}
    # the branch and the loop ran 4096 times side by side; the once-a-warp run after the instruction that never ran
    assert gemm.regions() == [(0, 8, 4096, 0.7, 0.0), (10, 17, 64, 0.3, 0.3)]
    text = report(gemm, top=2)
    assert "18 SASS instructions, 17 ran; 80 warp-stall samples" in text
    assert "long_sb 50.0%, no_inst 30.0%, barrier 20.0%" in text
    assert "50.0% x4096     long_sb        @!P0  BRA 0x80" in text


def test_the_command_prints_the_kernels_it_is_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "sass.csv"
    path.write_text(_listing())
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_samples.py"), str(path), "--kernel", "nvjet"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "=== nvjet_sm90_tst_128x128_64x6_2x1" in proc.stdout and "gemm_kernel" not in proc.stdout


@pytest.mark.parametrize("text, words", [
    ("ID,API Name,Duration\n1,cuLaunchKernel,3\n", "no \"Kernel Name\" line"),
    ('"Kernel Name","k",\n"Address","Source"\n"0x0","EXIT"\n', "no column 'Warp Stall Sampling (All Samples)'"),
])
def test_a_file_that_is_not_the_listing_is_refused_by_name(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "other.csv"
    path.write_text(text)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_samples.py"), str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(ValueError, match="Kernel Name|no column"):
        read(text)


def test_no_matching_kernel_names_the_ones_there(tmp_path: Path) -> None:
    path = tmp_path / "sass.csv"
    path.write_text(_listing())
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "sass_samples.py"), str(path), "--kernel", "attn"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no kernel matches 'attn'" in proc.stderr and "gemm_kernel" in proc.stderr
