"""Harmless log lines must get no answer from `rgt gotcha search`, rule or guess.

The rules were widened to whole failure classes (any exit code 137, any NCCL watchdog wording,
any "invalid API key", localised messages; then any Slurm refusal, FailedScheduling reason,
image-pull state, eviction, rsync/scp/sftp transport failure, NVML failure and every way the Hub
is unreachable). A wider rule is also more likely to fire on a line
that only shares its vocabulary: a healthy run's log speaks of memory, timeouts, killed helpers,
NCCL, ssh, quotas and API keys all the time. These lines were written for this test in the shape
of ordinary training, scheduler, tracker and ssh output; none of them reports a failure.
"""

from __future__ import annotations

import pytest

from rgt.profiles import search_gotchas

HARMLESS = [
    # df rows: a squashfs snap is always full, a data disk at 45% is fine
    "/dev/loop3        56832   56832         0 100% /snap/core18/2812",
    "/dev/nvme0n1p1  1921724  864775   1056949  45% /data",
    "Volatile Uncorr. ECC: 0, Aggregated Uncorr. ECC: 0",
    "srun: job 4242 queued and waiting for resources; tasks 0-3 will start together",
    "Kill process group on exit: enabled",
    # memory, in a healthy run
    "Epoch 3/10: 100%|██████████| 1563/1563 [02:11<00:00, 11.9it/s, loss=0.412, mem=14.2G]",
    "INFO: peak GPU memory 21.3 GiB of 80 GiB",
    "[rank0]: max_memory_allocated=18.4GB max_memory_reserved=20.1GB",
    "memory.max = 64G, memory.current = 12G",
    "Pinned host memory pool: 2.0 GiB reserved for the data loader",
    "Estimated memory per GPU at batch size 32: 61.2 GiB (fits in 80 GiB)",
    # timeouts and collectives that are only configured
    "Setting NCCL timeout to 1800 seconds",
    "dist.init_process_group(backend='nccl', timeout=timedelta(minutes=30))",
    "Setting collective operation timeout to 30 minutes",
    "Socket timeout set to 60s",
    "node1:2211:2211 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>",
    "node1:2211:2211 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "Rank 3 finished all-reduce warmup in 0.8 s",
    # processes stopped on purpose, exit codes that are fine
    "Stopped the old TensorBoard on port 6006",
    "Process exited with code 0 after 3h12m",
    "Exit code: 0",
    "JobState=COMPLETED Reason=None ExitCode=0:0",
    "4242       gpu    train    alice PD       0:00      1 (Priority)",
    "Submitted batch job 4242",
    # trackers and tokens that work
    "wandb: Currently logged in as: alice (team-x). Use `wandb login --relogin` to force relogin",
    "wandb: Appending key for api.wandb.ai to your netrc file: /root/.netrc",
    "wandb: 🚀 View run fluent-sky-12 at: https://wandb.ai/team/proj/runs/abc123",
    "API key loaded from the environment (WANDB_API_KEY)",
    "Token is valid (permission: read).",
    "Your token has been saved to /root/.cache/huggingface/token",
    # downloads and checkpoints that completed
    "model.safetensors: 100%|██████████| 4.94G/4.94G [00:41<00:00, 120MB/s]",
    "Fetching 12 files: 100%|██████████| 12/12 [00:03<00:00,  3.55it/s]",
    "Saving checkpoint to /workspace/ckpt/step_4000.pt (1.2 GB)",
    "Checkpoint saved; 38.2 GB free on /workspace",
    "Resuming from checkpoint step_4000.pt (sha256 ok)",
    "tokenizer: truncation=True, max_length=2048",
    # ssh and boxes that are fine
    "Connection to 203.0.113.7 closed.",
    "debug1: Authentication succeeded (publickey).",
    "Server listening on 0.0.0.0 port 22.",
    "ssh-keygen: generating new host keys: RSA ECDSA ED25519",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f2c1a9e-0b3d-4c2e-9a7f-1e2d3c4b5a69)",
    "Driver Version: 550.54.15   CUDA Version: 12.4",
    "torch 2.4.0+cu121, CUDA available: True, 8 GPUs",
    "Requested 1 x A100 in us-central1-a; instance is RUNNING",
    "GPU quota this week: 12.5 of 30 hours used",
    "Quota request for NVIDIA_A100_GPUS in us-central1 approved: 8",
    "Instance i-0abc123 is now running (p4d.24xlarge, us-east-1a)",
    # the routine lines around a run that mention the words the rules look for
    "wandb: WARNING Config item 'timeout' was locked by 'sweep' (ignored update).",
    "node1:2211:2300 [0] NCCL INFO Call to connect returned Connection refused, retrying",
    "Ignore above cudart dlerror if you do not have a GPU set up on your machine.",
    "GPU available: True (cuda), used: True",
    "TPU available: False, using: 0 TPU cores",
    "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1,2,3]",
    "wandb: Synced 5 W&B file(s), 0 media file(s), 2 artifact file(s) and 0 other file(s)",
    "[W ProcessGroupNCCL.cpp:1856] Warning: TORCH_NCCL_ASYNC_ERROR_HANDLING is deprecated",
    "NCCL version 2.18.1+cuda12.1",
    "srun: job 4242 queued and waiting for resources",
    "Warning: Permanently added 'ssh.runpod.io' (ED25519) to the list of known hosts.",
    "Last login: Mon Nov 20 10:00:00 2023 from 203.0.113.9",
    "Mounted at /content/drive",
    "Your runtime has 54.8 gigabytes of available RAM",
    "Requirement already satisfied: numpy in /usr/local/lib/python3.10/dist-packages (1.26.4)",
    "Killed by the user at step 1200 (Ctrl-C); checkpoint saved",
    "[INFO] Out-of-memory protection: gradient checkpointing enabled",
    "timeout: 600s per evaluation batch",
    "git lfs pull: Downloading model.safetensors (4.9 GB)",
    # scheduling, image pulls and evictions that went fine (K8S1, K8S3, K8S5 read any wording)
    "Evicted 0 pods from node gpu-node-1",
    'Normal   Pulled     41s   kubelet  Successfully pulled image "nvcr.io/nvidia/pytorch:24.01"'
    " in 41.2s",
    "Normal   Scheduled  12s   default-scheduler  Successfully assigned default/train-0 to gpu-1",
    'Container image "busybox:1.36" already present on machine',
    "Pod train-0 started; image pulled in 12.3s",
    "Taints: nvidia.com/gpu=present:NoSchedule",
    "DiskPressure   False   KubeletHasNoDiskPressure   kubelet has no disk pressure",
    "3/3 nodes are Ready; 24 nvidia.com/gpu allocatable",
    # transfers that completed (U12 reads any rsync/scp/sftp transport failure)
    "sent 1,234 bytes  received 35 bytes  2,538.00 bytes/sec",
    "total size is 52,428,800  speedup is 1.00",
    "sending incremental file list",
    "rsync: sent 1,234 bytes in 2 files, 0 errors",
    # a driver and NVML that work (U57, U58)
    "nvml initialised: 8 devices found",
    "NVML Version : 12.550.54.15",
    # Hugging Face reachable (U50 reads every way huggingface.co is not)
    "Downloading https://huggingface.co/gpt2/resolve/main/config.json: 100%|██████████| 665/665",
    "huggingface.co reachable: HTTP 200 in 84 ms",
    "Using the proxy http://proxy.internal:3128 for huggingface.co",
    "SSL certificate verify ok.",
    # ssh keys and Slurm allocations that work (U48, SLURM6)
    "Waiting for SSH key to propagate.",
    'Authenticated to 203.0.113.7 ([203.0.113.7]:22) using "publickey".',
    "Updating project ssh metadata...done.",
    "salloc: Granted job allocation 4242",
    "srun: job 4242 has been allocated resources",
    # libraries and limits that are in place (U64, U65), Colab with a GPU (NB6)
    "ldd: libGL.so.1 => /usr/lib/x86_64-linux-gnu/libGL.so.1 (0x00007f3a2c000000)",
    "open files                      (-n) 1048576",
    "torch.multiprocessing sharing strategy: file_system",
    "GPU usage 98% | memory 71.2/80 GB",
    "Colab Pro: 100 compute units per month; 87.5 left",
    "Connected to a Python 3 Google Compute Engine backend (GPU)",
    "wandb: 0 errors, 2 warnings",
]


def test_the_set_is_big_enough_and_distinct():
    assert len(HARMLESS) >= 30 and len(set(HARMLESS)) == len(HARMLESS)


@pytest.mark.parametrize("line", HARMLESS, ids=lambda line: line[:40])
def test_a_harmless_line_gets_no_answer(line):
    assert [(h.gotcha.id, h.why, h.match) for h in search_gotchas(line)] == []
