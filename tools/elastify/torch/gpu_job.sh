#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU job (one NVIDIA H200, about 5 minutes): Taylor scores of the original model, then recovery
# LoRA adapters for every level of the elastic model, with a table of held-out perplexities.
#
#   gpu_job.sh BASE.gguf ELASTIC.gguf TOKENS_DIR [OUT]
#     BASE.gguf     the original model (scores in its neuron order, for elastify --score taylor);
#                   or the elastic file itself (scores_to_original.py moves its scores back); "-" to skip the scores
#     ELASTIC.gguf  llmsvc elastify's output
#     TOKENS_DIR    make_tokens.py's folder for this model (ppl.npy, calib.npy, kjv.npy)
#     OUT           where results go (default $OUT): 7 files, at most 16 MiB each
#       taylor_vector.json.gz, taylor_element.json.gz   {"ffn": [[n_ff] per layer]}
#       adapters-<i>.tar, PER_TAR adapters each (3: L20..40, L50..70, L80, 90): lora-L<percent>.gguf
#       recovery.json (perplexities, losses, checks), job.log (everything printed)
# Needs python3 with torch (CUDA) and numpy; gguf comes from _vendor (vendor_gguf.sh).
# Settings through the environment: STEPS (500), BATCH (8), SEQ (512), RANK (8), LR (1e-3), MIX (0.5),
# GEN_SAMPLES (256), GEN_BATCH (128), LEVELS (every level below 100), MAX_MINUTES (5.5: training stops past it),
# FIT_STEPS (1: shorten STEPS to what fits in MAX_MINUTES, so the cosine schedule ends; 0: off), DEVICE (cuda),
# MATRICES (every layer matrix; e.g. ffn_gate,ffn_up,ffn_down), PER_TAR (3: adapters a tar; 2 for larger ones).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=$1 elastic=$2 tokens=$3 out=${4:-${OUT:?give OUT}}
mkdir -p "$out"
exec > >(tee "$out/job.log") 2>&1
export PYTHONPATH="$here/_vendor:$here${PYTHONPATH:+:$PYTHONPATH}"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
dev=${DEVICE:-cuda}
py=${PYTHON:-python3}
work=$(mktemp -d)
t0=$(date +%s)
"$py" -c 'import gguf, numpy, torch; print("gguf", gguf.__file__, "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name())'
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true

if [ "$base" != "-" ]; then
  for kind in vector element; do
    flag=; [ $kind = element ] && flag=--element
    "$py" "$here/taylor_scores.py" "$base" --tokens "$tokens/calib.npy" -o "$work/taylor_$kind.json" --device "$dev" $flag
    gzip -c "$work/taylor_$kind.json" > "$out/taylor_$kind.json.gz"
  done
fi

levels=${LEVELS:+--levels $LEVELS}
"$py" "$here/train_recovery.py" "$elastic" --tokens "$tokens" -o "$work/adapters" --device "$dev" --check \
  --steps "${STEPS:-500}" --batch "${BATCH:-8}" --seq "${SEQ:-512}" --rank "${RANK:-8}" --lr "${LR:-1e-3}" \
  --mix "${MIX:-0.5}" --gen-samples "${GEN_SAMPLES:-256}" --gen-batch "${GEN_BATCH:-128}" \
  --max-minutes "${MAX_MINUTES:-5.5}" $levels ${MATRICES:+--matrices $MATRICES} \
  $([ "${FIT_STEPS:-1}" = 1 ] && echo --fit-steps)
cp "$work/adapters/recovery.json" "$out/"
# PER_TAR adapters a tar (3: about 3 MB each for SmolLM2): within the 16 MiB a file and 8 files.
(cd "$work/adapters" && ls lora-L*.gguf | sort -t L -k2 -n | xargs -n "${PER_TAR:-3}" echo) | {
  i=0
  while read -r group; do
    i=$((i + 1))
    tar -C "$work/adapters" -cf "$out/adapters-$i.tar" $group
    echo "adapters-$i.tar: $group"
  done
}
rm -rf "$work"
echo "gpu_job: $(( $(date +%s) - t0 )) s"
ls -la "$out"
