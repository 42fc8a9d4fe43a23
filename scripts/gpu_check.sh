#!/usr/bin/env bash
# The GPU check: specbench's CUDA path, bounded (≤ 8 minutes on one GPU), offline, one folder of
# results. See scripts/gpu_check.py for the steps and README "Measured on a GPU".
#
#     bash scripts/gpu_check.sh --out OUT                        # a CUDA machine
#     bash scripts/gpu_check.sh --out OUT --device cpu --quick   # any machine (CI)
#
# Carry the wheels of scripts/gpu_wheels.txt in .gpu-wheels/ (bash scripts/fetch_gpu_wheels.sh)
# to a machine that lacks them. PYTHON picks the interpreter (default: python3, the one holding
# torch). Exit code 0: every step passed; 1: a step failed (summary.md says which); 2: bad options.
set -u
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/gpu_check.py "$@"
