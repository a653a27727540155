#!/usr/bin/env bash
# Multi30K German -> English: RNNsearch and the Transformer, 60 minutes of training each,
# sacreBLEU on test2016 (beam 5). The two models train at the same time, one thread each,
# so the whole run takes about 70 minutes on a 2-core machine.
#
#   bash scripts/multi30k.sh DATA_DIR [OUT_DIR]
#
# DATA_DIR holds train.{de,en}.gz, val.{de,en}.gz and test_2016_flickr.{de,en}.gz.
# Set ATTNKIT to the command to run (default: attnkit on PATH, e.g. .venv/bin/attnkit);
# SECONDS_EACH (3600) and SPM_VOCAB (8000) change the budget and the subword vocabulary.
set -euo pipefail
D=${1:?usage: bash scripts/multi30k.sh DATA_DIR [OUT_DIR]}
OUT=${2:-runs/multi30k}
ATTNKIT=${ATTNKIT:-attnkit}
SECONDS_EACH=${SECONDS_EACH:-3600}
for f in train.de.gz train.en.gz val.de.gz val.en.gz test_2016_flickr.de.gz test_2016_flickr.en.gz; do
  [[ -f "$D/$f" ]] || { echo "missing $D/$f: DATA_DIR must hold the Multi30K files" >&2; exit 2; }
done
FILES=(--train-src "$D/train.de.gz" --train-tgt "$D/train.en.gz"
       --valid-src "$D/val.de.gz" --valid-tgt "$D/val.en.gz"
       --test-src "$D/test_2016_flickr.de.gz" --test-tgt "$D/test_2016_flickr.en.gz")
DATA=("${FILES[@]}" --tokenise spm --spm-vocab "${SPM_VOCAB:-8000}")
RUN=(--threads 1 --batch-size 128 --epochs 100 --patience 5 --time-limit "$SECONDS_EACH"
     --valid-decode 0 --save-every 500 --no-progress)
mkdir -p "$OUT"
"$ATTNKIT" train "${DATA[@]}" "${RUN[@]}" --model rnnsearch --preset base --lr 1e-3 \
    --out "$OUT/rnnsearch" > "$OUT/rnnsearch.log" 2>&1 &
first=$!
"$ATTNKIT" train "${DATA[@]}" "${RUN[@]}" --model transformer --preset base --lr 1e-3 \
    --warmup 400 --label-smoothing 0.1 --out "$OUT/transformer" > "$OUT/transformer.log" 2>&1 &
second=$!
wait "$first" || { tail "$OUT/rnnsearch.log" >&2; exit 1; }
wait "$second" || { tail "$OUT/transformer.log" >&2; exit 1; }
for m in rnnsearch transformer; do
  tail -n 1 "$OUT/$m.log"
  "$ATTNKIT" evaluate --checkpoint "$OUT/$m" "${FILES[@]}" --beam 5 | tee "$OUT/$m.test.txt"
done
