"""The node-loss drill's checkpoints (suite/stages/fault/node_checkpoint.py) on two real gloo processes, each
with a folder of its own (two nodes' own disks): each saves the replicated state where only it can read it,
one node a checkpoint ahead of the other; the resume agrees on the newest step both can read, and each rank's
model and optimizer after loading equal, elementwise, what that step held."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.dist

RANK = r"""
import json, sys
from pathlib import Path
import torch, torch.distributed as dist
from suite.stages.fault.node_checkpoint import agreed_step, load_replica, readable_steps, save_replica
rank, store, disk = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
opt = torch.optim.AdamW(model.parameters(), lr=0.1)
held = {}
for step in range(1, 5):
    opt.zero_grad()
    model(torch.full((2, 8), float(step))).square().sum().backward()
    opt.step()
    if step % 2 == 0 and (rank == 0 or step == 2):  # the second node lags: its step-4 file never came
        save_replica(model, opt, disk, step, f"node{rank}", local_rank=0)
        held[step] = [p.detach().clone() for p in model.parameters()]
    save_replica(model, opt, disk, 99, f"node{rank}", local_rank=1)  # another local rank writes nothing
fresh = torch.nn.Linear(8, 4)
fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
step = agreed_step(disk, None, torch.device("cpu"))
path = load_replica(fresh, fresh_opt, disk, step, torch.device("cpu"))
same = all(torch.equal(a, b) for a, b in zip(fresh.parameters(), held[step]))
moments = fresh_opt.state_dict()["state"][0]["exp_avg"].abs().sum().item()
print(json.dumps({"step": step, "file": path.name, "same": same, "moments": moments,
                  "files": sorted(p.name for p in readable_steps(disk).values())}))
dist.destroy_process_group()
"""


def test_each_node_resumes_from_its_own_disk_at_the_step_both_have(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(r), str(tmp_path / "store"), str(tmp_path / f"disk{r}")],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    said = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
        said.append(json.loads(out.strip().splitlines()[-1]))
    assert [s["step"] for s in said] == [2, 2]  # node0 has 4 too, but node1 does not: both resume at 2
    assert said[0]["file"] == "step_2.node0.pt" and said[1]["file"] == "step_2.node1.pt"
    assert said[0]["files"] == ["step_2.node0.pt", "step_4.node0.pt"] and said[1]["files"] == [
        "step_2.node1.pt"
    ]
    assert all(s["same"] for s in said) and all(s["moments"] > 0 for s in said)
    assert not list(tmp_path.glob("disk*/.*partial"))
