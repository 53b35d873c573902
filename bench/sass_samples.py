"""Where a kernel's warps wait: Nsight Compute's per-instruction samples, summed by stall reason and by code region.

Reads the CSV that ``ncu --import REPORT.ncu-rep --page source --csv --print-source sass`` prints (one block a
profiled kernel, each starting with a ``"Kernel Name"`` line) and prints, for each kernel (or those whose name
matches ``--kernel``):

- its SASS instructions (all, and those that ran) and its warp-stall samples;
- the stall reasons' shares of the samples (``stall_long_sb``: waiting on memory or a barrier's try-wait,
  ``stall_no_inst``: instruction fetch, ``stall_barrier``, ``stall_wait`` ...);
- regions: runs of instructions that ran the same number of times, side by side in the code (a loop's body, the
  code each warp runs once, the prologue), each with its share of the samples and of the fetch stalls;
- the ``--top`` instructions with the most samples.

Profile first (a report of the kernels, ``--set full`` or ``--section SourceCounters``)::

    ncu --set full --import-source no -k "regex:linear|nvjet" -o gemm python my_launches.py
    ncu --import gemm.ncu-rep --page source --csv --print-source sass > gemm_sass.csv
    python bench/sass_samples.py gemm_sass.csv --top 15
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
_PREDICATE = re.compile(r"^@!?U?P\w+\s+")


@dataclass
class Instruction:
    """One SASS instruction of a profiled kernel: its text, how many times warps executed it, its samples by
    stall reason."""

    address: str
    source: str
    executed: int
    samples: float
    stalls: dict[str, float] = field(default_factory=dict)

    @property
    def opcode(self) -> str:
        """The opcode, without its predicate (``@!P0 BRA ...`` -> ``BRA``)."""
        text = _PREDICATE.sub("", self.source.strip())
        return text.split()[0] if text else ""


@dataclass
class Kernel:
    """A profiled kernel's instructions, in code order."""

    name: str
    instructions: list[Instruction]

    @property
    def samples(self) -> float:
        return sum(i.samples for i in self.instructions)

    def stall_shares(self) -> list[tuple[str, float]]:
        """Each stall reason's share of the samples, largest first (reasons with none left out)."""
        total = self.samples or 1.0
        sums: Counter[str] = Counter()
        for i in self.instructions:
            for reason, n in i.stalls.items():
                sums[reason] += n
        return [(reason, n / total) for reason, n in sums.most_common() if n > 0]

    def regions(self, least: int = 8) -> list[tuple[int, int, int, float, float]]:
        """Runs of at least ``least`` instructions side by side that ran the same number of times (instructions
        that never ran are skipped over): (first index, last index, times run, share of samples, share of all
        samples that were instruction-fetch stalls there), in code order."""
        total = self.samples or 1.0
        runs: list[list[int]] = []
        for k, ins in enumerate(self.instructions):
            if ins.executed == 0:
                continue
            if runs and self.instructions[runs[-1][-1]].executed == ins.executed:
                runs[-1].append(k)
            else:
                runs.append([k])
        out = []
        for run in runs:
            if len(run) < least:
                continue
            share = sum(self.instructions[k].samples for k in run) / total
            fetch = sum(self.instructions[k].stalls.get("stall_no_inst", 0.0) for k in run) / total
            out.append((run[0], run[-1], self.instructions[run[0]].executed, share, fetch))
        return out


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read(text: str) -> list[Kernel]:
    """The kernels of an ``ncu --page source --csv --print-source sass`` listing.

    Raises:
        ValueError: the text has no kernel block, or a block lacks the sample and execution columns (a
            listing made without ``--print-source sass``, or from a report without source counters).
    """
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith('"Kernel Name"'):
            name = next(csv.reader([line]))[1]
            blocks.append((name, []))
        elif blocks and line.strip():
            blocks[-1][1].append(line)
    if not blocks:
        raise ValueError("no \"Kernel Name\" line: not the CSV of `ncu --import REPORT --page source --csv "
                         "--print-source sass`")
    kernels = []
    for name, lines in blocks:
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        header = rows[0] if rows else []
        missing = [c for c in ("Address", "Source", SAMPLES, EXECUTED) if c not in header]
        if missing:
            raise ValueError(f"kernel {name!r}: no column {missing[0]!r} (profile with `--set full` or "
                             "`--section SourceCounters`, list with `--print-source sass`)")
        at = {c: k for k, c in enumerate(header)}
        reasons = [c for c in header if c.startswith("stall_") and "(" not in c]
        instructions = [Instruction(row[at["Address"]], row[at["Source"]], int(_number(row[at[EXECUTED]])),
                                    _number(row[at[SAMPLES]]), {r: _number(row[at[r]]) for r in reasons})
                        for row in rows[1:] if len(row) == len(header)]
        kernels.append(Kernel(name, instructions))
    return kernels


def report(kernel: Kernel, top: int = 15) -> str:
    """The printed summary of one kernel (the module's docstring says what it holds)."""
    total = kernel.samples
    ran = sum(1 for i in kernel.instructions if i.executed > 0)
    lines = [f"=== {kernel.name}",
             f"{len(kernel.instructions)} SASS instructions, {ran} ran; {total:.0f} warp-stall samples"]
    if total == 0:
        return "\n".join(lines + ["no samples: profile with `--set full` or `--section SourceCounters`"])
    lines.append("stalls: " + ", ".join(f"{r.removeprefix('stall_')} {s:.1%}" for r, s in kernel.stall_shares()[:8]))
    lines.append("regions (instructions, times run, samples, instruction-fetch stalls):")
    for first, last, executed, share, fetch in kernel.regions():
        ops = Counter(kernel.instructions[k].opcode for k in range(first, last + 1)
                      if kernel.instructions[k].executed > 0)
        common = " ".join(op for op, _ in ops.most_common(4))
        lines.append(f"  {first:6d}-{last:<6d} x{executed:<8d} {share:6.1%} {fetch:6.1%}  {common}")
    lines.append(f"top {top} instructions (share of samples, times run, top stall):")
    for ins in sorted(kernel.instructions, key=lambda i: -i.samples)[:top]:
        reason = max(ins.stalls.items(), key=lambda kv: kv[1], default=("-", 0.0))[0].removeprefix("stall_")
        lines.append(f"  {ins.samples / total:6.1%} x{ins.executed:<8d} {reason:14s} {ins.source.strip()[:70]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", type=Path, help="the output of `ncu --import R --page source --csv --print-source sass`")
    ap.add_argument("--kernel", help="only kernels whose name matches this regular expression")
    ap.add_argument("--top", type=int, default=15, help="instructions listed by samples (default 15)")
    args = ap.parse_args(argv)
    try:
        kernels = read(args.csv.read_text())
    except (OSError, ValueError) as e:
        print(f"sass_samples.py: {args.csv}: {e}", file=sys.stderr)
        return 2
    chosen = [k for k in kernels if args.kernel is None or re.search(args.kernel, k.name)]
    if not chosen:
        names = ", ".join(k.name[:60] for k in kernels)
        print(f"sass_samples.py: no kernel matches {args.kernel!r}; the listing has: {names}", file=sys.stderr)
        return 2
    print("\n\n".join(report(k, args.top) for k in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
