"""The rule oracle: every rule's verdict held to torch.

Generators (`generators/`, one per rule family: A, C, each contract rule AGL401-AGL411, and the
rules issue 32 asks for; issue 31's AGL201 on collectives, `collective-layout`, and AGL403 on
containers of tensors, `ctx-lists`) build small multi-file programs with and without each
hazard, in the forms real code takes (`forms.py`). `batch.py` writes a batch as packages of one
project, runs `autogradlint check --output-format json` on it once (`lint_side.py`) and the
programs under torch in subprocesses (`torch_side.py`, several programs per process),
collectives in a 2-rank gloo group (where what NCCL would refuse is told from the layout a
collective receives). `harms.py` maps each rule to the harm it predicts and judges agreement
both ways; `known.md` lists the disagreement classes found, and `test_oracle.py` holds CI's
derandomised sample to exactly those. `python -m tests.oracle --n 2000` searches further and
shrinks (`shrink.py`) each new disagreement to a minimal program.
"""
