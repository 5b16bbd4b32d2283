"""depth3dseg-train under torchrun: 2 processes, DDP over gloo on CPU, the same script as
single-process, in two chunks (time limit, then --resume).

Only rank 0 validates, prints epoch lines and writes files; the data are sharded by
DistributedSampler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from depth3dseg_ros.core.modelfile import load_model
from depth3dseg_ros.training.checkpoint import load_checkpoint
from trainutil import make_dataset_dir, tiny_train_args


@pytest.mark.timeout(400)
def test_torchrun_two_processes_gloo(real_dir, tmp_path):
    data = make_dataset_dir(real_dir, tmp_path / 'ds', size=(80, 60))
    out = tmp_path / 'run'
    torchrun = [
        sys.executable,
        '-m',
        'torch.distributed.run',
        '--standalone',
        '--nproc_per_node',
        '2',
        '-m',
        'depth3dseg_ros.training.train',
    ]
    env = dict(os.environ, OMP_NUM_THREADS='1', GLOO_SOCKET_IFNAME='lo', MASTER_ADDR='127.0.0.1')
    # a chunk that hits its time limit: both ranks leave the loop together (rank 0 decides), rank 0
    # saves
    res = subprocess.run(
        torchrun + tiny_train_args(data, out, '--time-limit-min', '0', epochs=2),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert res.stdout.count('stopped: time limit (resume with --resume)') == 1
    assert load_checkpoint(out / 'last.pt')['global_step'] == 1
    # the next chunk resumes under torchrun and finishes
    res = subprocess.run(
        torchrun + ['--out', str(out), '--resume', '--set', 'train.time_limit_min=null'],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    # rank 0 alone reports and writes
    assert res.stdout.count('epoch 1:') == 1 and res.stdout.count('stopped: max epochs (2)') == 1
    ck = load_checkpoint(out / 'last.pt')
    # 7 training frames -> DistributedSampler gives each rank 4 (padded), batch 2 -> 2 steps per
    # epoch
    assert ck['epoch'] == 2 and ck['global_step'] == 4
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['stop_reason'] == 'max epochs (2)' and len(summary['history']) == 2
    model, meta = load_model(out / 'model.pt', map_location='cpu')
    assert meta['input_size'] == [64, 48]
    assert not any(
        k.startswith('module.') for k in model.state_dict()
    )  # saved unwrapped, not the DDP module
