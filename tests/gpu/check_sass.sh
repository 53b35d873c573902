#!/usr/bin/env bash
# What the compiler made of the row kernels: every kernel whose name matches PATTERN must load and
# store gmem 16 bytes at a time (LDG.E.128 and STG.E.128) and never touch local memory (LDL/STL:
# register spills or a register array the compiler could not keep in registers). Prints one line
# of instruction counts per kernel, and the registers a thread of it takes.
#   check_sass.sh FILE PATTERN     FILE: a cubin or an executable with sm_90a code
# Exit status: 0 all kernels pass, 1 one fails or none matches, 77 no cuobjdump (skipped).
# cuobjdump is taken from $CUOBJDUMP, else from PATH.
set -uo pipefail
file=${1:?usage: check_sass.sh FILE PATTERN}
pattern=${2:?usage: check_sass.sh FILE PATTERN}
tool=${CUOBJDUMP:-$(command -v cuobjdump || true)}
if [[ -z $tool || ! -x $tool ]]; then
  echo "check_sass.sh: no cuobjdump (set CUOBJDUMP or put it on PATH); skipped"
  exit 77
fi
sass=$("$tool" -sass "$file" 2>/dev/null) || { echo "check_sass.sh: $tool -sass $file failed"; exit 1; }
usage=$("$tool" -res-usage "$file" 2>/dev/null) || { echo "check_sass.sh: $tool -res-usage $file failed"; exit 1; }

fail=0
kernels=0
while read -r name; do
  body=$(awk -v f="$name" '/Function :/ { p = ($3 == f) } p' <<< "$sass")
  count() { grep -cE "$1" <<< "$body" || true; }
  ldg128=$(count 'LDG\.E\.128')
  stg128=$(count 'STG\.E\.128')
  local_mem=$(count '[^A-Z](LDL|STL)[. ]')
  bars=$(count 'BAR\.SYNC')
  total=$(($(count '^\s+/\*[0-9a-f]{4}\*/') - $(count '^\s+/\*[0-9a-f]{4}\*/ +NOP')))
  regs=$(grep -A1 -F "Function $name:" <<< "$usage" | grep -oE 'REG:[0-9]+' | cut -d: -f2)
  verdict=ok
  if (( ldg128 == 0 || stg128 == 0 || local_mem != 0 )); then verdict=FAIL; fail=1; fi
  printf '%-4s %s: LDG.E.128 %d, STG.E.128 %d, LDL/STL %d, BAR.SYNC %d, %d instructions, %s registers\n' \
    "$verdict" "$name" "$ldg128" "$stg128" "$local_mem" "$bars" "$total" "${regs:-?}"
  kernels=$((kernels + 1))
done < <(grep -oE 'Function : [^ ]+' <<< "$sass" | awk '{print $3}' | grep -E "$pattern")

if (( kernels == 0 )); then
  echo "check_sass.sh: no kernel in $file matches $pattern"
  exit 1
fi
exit $fail
