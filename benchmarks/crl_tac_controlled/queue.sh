#!/bin/bash
cd /work/main && . .venv/bin/activate
export OMP_NUM_THREADS=1
H="python benchmarks/crl_tac_controlled/harness.py --steps 300 --nfit 600 --ntest 400"
for seed in 0 1; do
  TAC_SELFNEG=1 $H --name fix --seed $seed
  TAC_SELFNEG=0 $H --name old --seed $seed
  $H --name simclr --seed $seed --args '{"train_channel": false}'
done
for seed in 0 1; do
  TAC_SELFNEG=1 $H --name fix_lamB --seed $seed --args '{"entropy_weight": 0.08}'
  TAC_SELFNEG=1 TAC_WARMUP=100 $H --name fix_warm100 --seed $seed
  TAC_SELFNEG=1 TAC_MC=32 $H --name fix_mc32 --seed $seed
done
# added after the first queue (the fixed code, no patch needed): lambda between the two readings
for seed in 0 1; do
  $H --name fix_lam0.01 --seed $seed --args '{"entropy_weight": 0.01}'
  $H --name fix_lam0.02 --seed $seed --args '{"entropy_weight": 0.02}'
done
# row 8 of the comparison (the fixed code, no patch needed): P(T|X)'s network as paper 002's Fig. 5 draws it
for seed in 0 1; do
  $H --name fix_paper_channel --seed $seed --args '{"channel_net": "paper"}'
done
