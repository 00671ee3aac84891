"""What a record says about where, under what load and by what code it was measured (no torch import).

  envinfo.py        the environment, captured inside the worker: torch and its libraries, CUDA, the CPU, the harness's
                    own source digest and commit (code_identity)
  hardware_id.py    the one rule for the ids of hardware: the machine's, the GPU's
  nvml.py           NVML set up in one place: which device, and every fact read from it
  contention.py     how busy the machine was while a run was timed: other processes on its CPUs, steal, GPU processes
  workload_code.py  the workload's code identity: gpt/ and the worker's timed loop, hashed (asv's benchmark hash)
"""
