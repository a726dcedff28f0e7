#!/bin/bash
# A real --time / --signal=USR1@90 job on scripts/slurm_cluster.sh's 2 nodes: Slurm's own
# time-limit warning (not scancel --signal) must make rank 0 checkpoint and requeue, and the
# requeued run must finish. Not a ctest case (over 2 minutes). Run, as root:
#   scripts/slurm_cluster.sh run 2 900 -- tests/slurm/time_limit_by_hand.sh
set -u
CLI=$(cd "$(dirname "$0")/../.." && pwd)/${TANDEM_BUILD_DIR:-build}/bin/tandem
dir=/tmp/tandem_timelimit; rm -rf $dir; mkdir -p $dir; cd $dir
cat > job.sh <<EOS
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=2
#SBATCH --signal=USR1@90
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=$dir/job.out
echo "run start \$(date +%T) SLURM_RESTART_COUNT=\${SLURM_RESTART_COUNT:-0}"
srun --mpi=pmix env OMP_NUM_THREADS=1 $CLI fit --model=mlp --model.hidden=[64] --data.batch_size=64 \
  --trainer.num_nodes=2 --trainer.devices=1 --trainer.accelerator=cpu --trainer.max_epochs=40 \
  --trainer.enable_progress_bar=false --seed_everything=1 --trainer.default_root_dir=$dir/run
echo "run end \$(date +%T) rc=\$?"
EOS
job=$(sbatch --parsable job.sh); echo "submitted $job at $(date +%T)"
start=$(date +%s)
last=""
while [ $(( $(date +%s) - start )) -lt 840 ]; do
  s=$(scontrol -o show job $job 2>/dev/null | grep -o 'JobState=[A-Z_]* Reason=[^ ]*\|Restarts=[0-9]*' | tr '\n' ' ')
  [ "$s" != "$last" ] && echo "$(date +%T) $s" && last=$s
  case "$s" in *JobState=COMPLETED*|*JobState=FAILED*|*JobState=TIMEOUT*|*JobState=CANCELLED*) break ;; esac
  sleep 2
done
scontrol -o show job $job | tr ' ' '\n' | grep -E "JobState|Restarts|RunTime|TimeLimit|ExitCode"
echo "--- job.out"; grep -vE "^\s*$" job.out | grep -vE "^\| (epoch|step)" | tail -60
ls -la $dir/run $dir/run/lightning_logs/*/checkpoints 2>/dev/null
# Passes when Slurm's warning requeued the job and the requeued run finished from the checkpoint.
info=$(scontrol -o show job $job)
[[ "$info" == *JobState=COMPLETED* && "$info" != *Restarts=0* ]] && grep -q "requeueing job $job" job.out &&
  grep -q "resuming the requeued Slurm job from" job.out && echo "PASS" && exit 0
echo "FAIL: not requeued by the time limit's signal and completed"; exit 1
