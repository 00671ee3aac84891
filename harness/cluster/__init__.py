"""The matrix (envs x GPU types x one plan) on a cluster: Slurm job arrays, or Kubernetes Jobs.

  python -m harness.cluster slurm submit --envs torch212,nightly --gpus a100,h100 --plan seed-ladder
  python -m harness.cluster slurm status [--wait]
  python -m harness.cluster slurm collect
  python -m harness.cluster slurm resubmit [--cells torch212/h100]
  python -m harness.cluster k8s render --envs torch212,nightly --gpus a100,h100 --plan seed-ladder -o k8s/

matrix.py: the cells, what each must record, the manifest and which records a cell already has.
slurm.py: sbatch scripts, submitting, and job states from sacct/squeue. k8s.py: Job manifests.
No torch import anywhere here: this runs on a login node. docs/cluster.md says how to use it.
"""
