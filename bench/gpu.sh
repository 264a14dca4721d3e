#!/usr/bin/env bash
# rgt on a GPU machine, in one run of under 8 minutes, every figure into one file.
#
#     bench/gpu.sh [FIGURES_FILE]          (default: $OUT/gpu-figures.txt, else ./gpu-figures.txt)
#     GPU_CKPT_GB=8 bench/gpu.sh           (the checkpointed state's size; 0 skips step 5)
#
# The machine is treated as a rented GPU box reached as rgt's `local` box:
#   1. the machine: nvidia-smi, torch and CUDA as the image has them;
#   2. `rgt up gpu` and `rgt audit gpu`, and `rgt audit gpu --job` of a CUDA job;
#   3. the bundled example training on the GPU through the whole lifecycle:
#      run -> watch -> pull (re-hash, load) -> verify -> down (Iron Law);
#   4. a one-process NCCL job under torchrun, started by rgt's runner (bench/gpu_nccl.py);
#   5. rgt.ckpt on GPU-resident state beside torch.save and DCP (bench/gpu_ckpt.py).
#
# rgt's own dependencies that such an image lacks travel as wheels in .whl/ (fetch them with
# bench/gpu_wheels.sh on a machine with pip); they and rgt are installed into the image's
# Python without the network. On a machine with no GPU the script runs steps 1-3 on the CPU,
# says on one line each which GPU parts it skipped, and exits 0.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
figures=${1:-${OUT:-$PWD}/gpu-figures.txt}
GPU_CKPT_GB=${GPU_CKPT_GB:-4}
work=$(mktemp -d /tmp/rgt-gpu-XXXXXX)
export RGT_HOME="$work/home" COLUMNS=110 NO_COLOR=1 PYTHONUNBUFFERED=1
: >"$figures"
failed=0

say() { printf '%s\n' "$*" | tee -a "$figures"; }
section() { say ""; say "## $*"; }
# step NAME SECONDS CMD...: run it bounded, its output into the figures, its time and status after
step() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS rc
    say "\$ $*"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$figures"
    rc=${PIPESTATUS[0]}
    say "[$name: exit $rc after $((SECONDS - t0)) s]"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
    return "$rc"
}

section "setup"
py=$(command -v python3)
if ! "$py" -c 'import rgt' 2>/dev/null; then
    if ls "$repo"/.whl/*.whl >/dev/null 2>&1; then
        "$py" -m pip install -q --no-index --no-deps --no-compile "$repo"/.whl/*.whl \
            2>&1 | tail -3
    fi
    "$py" -m pip install -q --no-index --no-deps --no-build-isolation "$repo" 2>&1 | tail -3
fi
if ! "$py" -c 'import rgt' 2>/dev/null; then  # the image's Python is read-only: beside it
    "$py" -m pip install -q --no-index --no-deps --no-build-isolation --target "$work/site" \
        "$repo" "$repo"/.whl/*.whl 2>&1 | tail -3
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" PATH="$work/site/bin:$PATH"
fi
if ! "$py" -c 'import rgt, pydantic, platformdirs, typer, yaml, httpx' 2>&1 | tail -1; then
    say "rgt cannot be imported by $py: carry its wheels (bench/gpu_wheels.sh) and run again"
    exit 1
fi
command -v rgt >/dev/null || { say "no rgt command on PATH after the install"; exit 1; }
say "python $("$py" -c "import sys; print(sys.version.split()[0])") at $py; $(rgt --version)"

section "the machine"
if command -v nvidia-smi >/dev/null; then
    say "nvidia-smi at $(command -v nvidia-smi)"
    nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current \
        --format=csv 2>&1 | tee -a "$figures"
else
    say "no nvidia-smi on PATH ($PATH)"
fi
gpu=0
"$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && gpu=1
"$py" - <<'EOF' 2>&1 | tee -a "$figures"
import os, platform, torch
print(f"torch {torch.__version__} CUDA {torch.version.cuda} cudnn {torch.backends.cudnn.version()}"
      f" nccl {torch.cuda.nccl.version() if torch.cuda.is_available() else '-'}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"device {p.name}: {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs, "
          f"capability {p.major}.{p.minor}")
print(f"{os.cpu_count()} CPUs; kernel {platform.release()}")
EOF
df -h "$work" | tee -a "$figures"
[ "$gpu" = 1 ] || say "no CUDA GPU visible to torch: the GPU parts below are skipped"
device=$([ "$gpu" = 1 ] && echo cuda || echo cpu)

section "rgt up and audit"
step up 60 rgt up gpu
step audit 120 rgt audit gpu
job="$work/job"
mkdir -p "$job"
cp "$repo/src/rgt/examples/train_mlp.py" "$repo/bench/gpu_nccl.py" "$job/"
cat >"$job/train.yaml" <<EOF
name: mlp-$device
workdir: .
run: python3 train_mlp.py --steps 400 --device $device --ckpt-dir "\$RGT_CKPT_DIR" --out out --save-every 100
outputs: [out]
checkpoint_dir: \$RGT_CKPT_DIR
EOF
cat >"$job/nccl.yaml" <<EOF
name: nccl
workdir: .
run: torchrun --standalone --nproc-per-node 1 gpu_nccl.py --ckpt-dir "\$RGT_CKPT_DIR"
checkpoint_dir: \$RGT_CKPT_DIR
EOF
step "audit --job" 120 rgt audit gpu --job "$job/train.yaml"

section "the lifecycle: the example training on $device"
cd "$job" || exit 1
t0=$SECONDS
step run 120 rgt run gpu train.yaml
step "watch to the end" 240 rgt watch gpu @last --until-done
step pull 120 rgt pull gpu @last
step verify 120 rgt verify gpu @last
say "[lifecycle up to a verified pull: $((SECONDS - t0)) s]"

section "torchrun, one process, through the runner"
if [ "$gpu" = 1 ]; then
    step "torchrun nccl" 120 rgt run gpu nccl.yaml
    step "nccl watch" 120 rgt watch gpu @last --until-done
    rgt logs gpu @last 2>&1 | grep -E "all_reduce|done step" | tee -a "$figures"
    step "nccl pull" 120 rgt pull gpu @last
else
    say "skipped: NCCL needs a CUDA GPU"
fi
step down 120 rgt down gpu --yes
cd "$repo" || exit 1

section "rgt.ckpt on GPU-resident state (${GPU_CKPT_GB} GB)"
if [ "$GPU_CKPT_GB" = 0 ]; then
    say "skipped: GPU_CKPT_GB=0"
elif [ "$gpu" = 1 ]; then
    step "gpu_ckpt" 290 "$py" bench/gpu_ckpt.py --size-gb "$GPU_CKPT_GB" --repeat 3 --budget-s 170 \
        --dir "$work" --json "$(dirname "$figures")/gpu-ckpt.json"
else
    say "skipped: the checkpoint figures are for tensors in GPU memory"
fi

rm -rf "$work"
section "end: $failed step(s) failed"
exit $((failed > 0))
