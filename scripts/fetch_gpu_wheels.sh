#!/usr/bin/env bash
# Download the wheels listed in scripts/gpu_wheels.txt for the CUDA check machine (CPython 3.12,
# manylinux x86_64) into an ignored folder, then prove they install there: an offline
# `pip install --target` of exactly those wheels for that platform into a clean folder.
#
#     bash scripts/fetch_gpu_wheels.sh                 # → .gpu-wheels/ (git-ignored)
#     bash scripts/fetch_gpu_wheels.sh --dest DIR      # elsewhere
#
# Each wheel's requirements that the list itself does not satisfy are printed: they must be in
# the GPU image (README "Measured on a GPU" names what it holds). `--no-deps` everywhere: the
# list is pinned and closed by hand, so nothing is resolved against this machine's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-wheels
python=${PYTHON:-python3}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dest) dest=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) echo "error: unknown option $1 (use --dest DIR, --python PY)" >&2; exit 2 ;;
  esac
done
# pip matches manylinux_2_N exactly, so name the tags a current wheel may carry.
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
           manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
target_opts=(--only-binary=:all: --no-deps --python-version 3.12 --implementation cp "${platforms[@]}")

mkdir -p "$dest"
"$python" -m pip download -q "${target_opts[@]}" -d "$dest" -r scripts/gpu_wheels.txt

# The proof: an offline install of the list, for the GPU machine's platform, into a clean folder.
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
"$python" -m pip install -q --no-index --find-links "$dest" --target "$check/site" \
  --no-compile "${target_opts[@]}" -r scripts/gpu_wheels.txt
"$python" - "$dest" <<'PY'
"""List the wheels, their size, and each requirement (for CPython 3.12 on Linux) the list misses."""
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

dest = Path(sys.argv[1])
pins = {}
for line in Path("scripts/gpu_wheels.txt").read_text().splitlines():
    line = line.split("#", 1)[0].strip()
    if line:
        name, version = line.split("==")
        pins[canonicalize_name(name)] = version
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
total = 0
wheels = {}
for path in sorted(dest.glob("*.whl")):
    name, version, _, _ = parse_wheel_filename(path.name)
    if pins.get(name) == str(version):
        wheels[name] = path
missing = sorted(set(pins) - set(wheels))
if missing:
    sys.exit(f"error: no wheel in {dest} for: {', '.join(missing)}")
for name, path in sorted(wheels.items()):
    total += path.stat().st_size
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = zf.read(meta).decode()
    outside = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            if canonicalize_name(req.name) not in pins:
                outside.append(str(req))
    note = f"needs from the image: {', '.join(outside)}" if outside else "closed"
    print(f"{path.name:60s} {path.stat().st_size / 2**20:6.2f} MiB  {note}")
print(f"{len(wheels)} wheels, {total / 2**20:.2f} MiB in {dest}; offline --target install for "
      "cp312 manylinux x86_64: OK")
PY
