"""Count the SASS of decode_tc_kernel's main loop, without a GPU (a dev-machine diagnostic).

    python tools/sass_loop.py [--q bf16] [--kv e4m3] [--dim 128] [--group 4] [-D...] [--header H]
    python tools/sass_loop.py --list        # the common path's instructions, one a line

Builds ``ember/csrc/ops/decode.cu`` for sm_90a into a cubin (nvcc), disassembles it with
``nvdisasm`` and walks the main loop of ``decode_tc_kernel`` (from the label its back-branch
jumps to, to that branch) along the common path: the soft cap's block and the page division's
(non-power-of-two pages) skipped, every other branch taken as the fall-through, so the O rescale
is counted as if a max grew. Prints the count, a histogram by opcode and the kernel's registers.

``nvdisasm`` is not in the dev machine's CUDA; it comes as a wheel (no GPU needed):
``pip download --no-deps nvidia-cuda-nvdisasm -d /tmp/nvd && unzip -o /tmp/nvd/*.whl -d /tmp/nvd``
then pass ``--nvdisasm /tmp/nvd/nvidia/cu13/bin/nvdisasm`` (or set ``EMBER_NVDISASM``).
``--header`` compiles another ``decode_tc.cuh`` (``git show <commit>:...`` into a file) in place
of the tree's, for before/after counts.

``--same-as="[-DFLAG ...] [@COMMIT]"`` (with the ``=``: the value may start with ``-D``) asks
whether this build's whole cubin (every kernel of the specialization) disassembles to the same
SASS as another build: the tree's ``decode.cu`` with ``COMMIT``'s ``decode_tc.cuh`` and those
flags. Exit 0 and ``identical`` if so, else 1 and the count of differing lines. That is how a
default flip is tied to the GPU run of the switch build it repeats (session 26:
``EMBER_DECODE_TMMA=2``'s fp8 kernels against ``-DEMBER_DECODE_TMMA=1 @79142ac``, whose decode
GPU tests had passed).
"""

from __future__ import annotations

import argparse
import collections
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEADER = "ember/csrc/include/ember/decode_tc.cuh"
TYPES = {"bf16": "ember::bfloat16", "fp16": "ember::half", "e4m3": "ember::fp8e4m3"}
_ADDR = re.compile(r"/\*[0-9a-f]{4}\*/")
_LABEL = re.compile(r"^(\.L_x_\d+):")
_BRA = re.compile(r"BRA `\((\.L_x_\d+)\)")


def build(args: argparse.Namespace, out: Path) -> tuple[Path, str]:
    import tvm_ffi

    include = REPO / "ember" / "csrc" / "include"
    src = REPO / "ember" / "csrc" / "ops" / "decode.cu"
    extra = []
    if args.header:  # a shadow include dir whose ember/decode_tc.cuh is the given file
        shadow = out / "inc" / "ember"
        shadow.mkdir(parents=True)
        shutil.copy(args.header, shadow / "decode_tc.cuh")
        extra = [f"-I{out / 'inc'}"]
    cubin = out / "decode.cubin"
    cmd = [
        "nvcc", "-cubin", "-o", str(cubin), "-std=c++17", "--expt-relaxed-constexpr", "-O3",
        "-DNDEBUG", "-gencode=arch=compute_90a,code=sm_90a", *extra, f"-I{include}",
        f"-I{Path(tvm_ffi.__file__).parent / 'include'}",
        f"-DEMBER_DECODE_QTYPE={TYPES[args.q]}", f"-DEMBER_DECODE_KVTYPE={TYPES[args.kv]}",
        f"-DEMBER_DECODE_HEAD_DIM={args.dim}", f"-DEMBER_DECODE_GROUP={args.group}",
        *args.D, str(src), "-Xptxas", "-v",
    ]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode:
        sys.exit(res.stderr[-3000:])
    regs = ""
    lines = res.stderr.splitlines()
    for i, line in enumerate(lines):
        if "decode_tc_kernel" in line and "Function properties" in line:
            spill = lines[i + 1].split(",")[1].strip()
            used = next(x for x in lines[i + 1 :] if "Used" in x).split("Used")[1].split(",")[0]
            regs = f"{used.strip()}, {spill}"
    return cubin, regs


def loop_path(sass: str) -> list[str]:
    """The common path through decode_tc_kernel's main loop, one instruction a line."""
    lines = sass.splitlines()
    begin = next(
        i
        for i, x in enumerate(lines)
        if x.startswith(".text._ZN5ember6decode2tc16decode_tc_kernel")
    )
    stop = next((i for i in range(begin, len(lines)) if lines[i].startswith("//----")), len(lines))
    body = lines[begin:stop]
    first = next(i for i, x in enumerate(body) if "HMMA" in x)
    labels = {m.group(1): i for i, x in enumerate(body) if (m := _LABEL.match(x))}
    start = end = None
    for i in range(first, len(body)):
        m = _BRA.search(body[i])
        if m and labels.get(m.group(1), len(body)) < first:
            start, end = labels[m.group(1)], i
            break
    if start is None:
        sys.exit("no loop back-branch found after the first HMMA")
    path, i = [], start
    while i <= end:
        line = body[i]
        m = _BRA.search(line)
        if m and labels[m.group(1)] > i:
            target = labels[m.group(1)]
            skipped = body[i:target]
            division = len(skipped) < 60 and any("I2F.RP" in x for x in skipped)
            soft_cap = any("0.60000002" in x for x in skipped)  # tanhf's constant
            if division or soft_cap or re.search(r"/\*[0-9a-f]+\*/\s+BRA", line):
                path.append(line)
                i = target
                continue
        path.append(line)
        i += 1
    return [
        re.sub(r"^\s*/\*[0-9a-f]+\*/\s*", "", x).split(";")[0].strip()
        for x in path
        if _ADDR.search(x)
    ]


def disassemble(args: argparse.Namespace) -> tuple[str, str]:
    """The build's SASS and its register line."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin, regs = build(args, Path(tmp))
        sass = subprocess.run(
            [args.nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True
        ).stdout
    return sass, regs


def same_as(args: argparse.Namespace, sass: str) -> int:
    """Compare with the build that ``--same-as`` names; 0 when the SASS is identical."""
    words = args.same_as.split()
    commits = [w[1:] for w in words if w.startswith("@")]
    other = argparse.Namespace(**vars(args))
    other.D = [w for w in words if not w.startswith("@")]
    with tempfile.TemporaryDirectory() as tmp:
        if commits:
            header = Path(tmp) / "decode_tc.cuh"
            header.write_text(
                subprocess.run(
                    ["git", "-C", str(REPO), "show", f"{commits[0]}:{HEADER}"],
                    capture_output=True, text=True, check=True,
                ).stdout
            )  # fmt: skip
            other.header = str(header)
        else:
            other.header = None
        theirs, _ = disassemble(other)
    mine, theirs = (re.sub(r"/\*[0-9a-f]{4,}\*/", "", x).splitlines() for x in (sass, theirs))
    diff = [
        x
        for x in difflib.unified_diff(theirs, mine, lineterm="", n=0)
        if x[:1] in "+-" and x[:3] not in ("+++", "---")
    ]
    if not diff:
        print(f"identical: this build's SASS is that of [{args.same_as}]")
        return 0
    print(f"different: {len(diff)} lines differ from the SASS of [{args.same_as}]")
    return 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--q", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--kv", default="e4m3", choices=tuple(TYPES))
    ap.add_argument("--dim", type=int, default=128, choices=(64, 128))
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("-D", action="append", default=[], type=lambda s: f"-D{s}", help="a -D flag")
    ap.add_argument("--header", help="a decode_tc.cuh to build instead of the tree's")
    ap.add_argument("--nvdisasm", default=os.environ.get("EMBER_NVDISASM", "nvdisasm"))
    ap.add_argument("--list", action="store_true", help="print the path's instructions")
    ap.add_argument("--same-as", help='"[-DFLAG ...] [@COMMIT]": is the whole SASS identical?')
    args = ap.parse_args()
    sass, regs = disassemble(args)
    if args.same_as is not None:
        sys.exit(same_as(args, sass))
    path = loop_path(sass)
    ops = collections.Counter(
        re.sub(r"^@!?U?P\w+\s+", "", x).split()[0].split(".")[0] for x in path
    )
    if args.list:
        print("\n".join(path))
    print(f"common path {len(path)} instructions a warp a tile; {regs}")
    print(" ".join(f"{k}:{v}" for k, v in ops.most_common(24)))


if __name__ == "__main__":
    main()
