#!/usr/bin/env bash
# The ~2,000-file tree of real projects for cold repository-scale lint against TorchFix (issue 34):
# 13 whole candidate projects at their pinned commits (../shared/realcorpus/CANDIDATES.tsv), copied
# so each keeps its own first-party imports, launch scripts and configs. 2,025 .py files, 426,533
# lines; 1,326 of them import a torch package. Third-party code: built outside the repository.
#
#   bash benchmarks/speed_tree.sh /work/trees/candidates /work/trees/speed5-2k
#   python benchmarks/lint_arms.py --arm this= --torchfix --defaults --rounds 1 --cwd /tmp \
#       --save OUT -- /work/trees/speed5-2k/*/ -- --output-format json
#
# CANDIDATES: a folder of the candidate trees (built by ../shared/realcorpus/build.sh).
set -euo pipefail
src=${1:?usage: speed_tree.sh CANDIDATES DEST}
dest=${2:?usage: speed_tree.sh CANDIDATES DEST}
projects=(
  AntixK__PyTorch-VAE CompVis__taming-transformers DLR-RM__stable-baselines3 EleutherAI__gpt-neox
  RUCAIBox__RecBole SWivid__F5-TTS facebookresearch__detectron2 facebookresearch__dinov2
  graphdeeplearning__benchmarking-gnns kohya-ss__sd-scripts lyuwenyu__RT-DETR
  real-stanford__diffusion_policy vturrisi__solo-learn
)
mkdir -p "$dest"
for p in "${projects[@]}"; do
  [ -d "$src/$p" ] || { echo "missing $src/$p (build the candidates first)" >&2; exit 2; }
  rm -rf "${dest:?}/$p"
  cp -a "$src/$p" "$dest/"
done
echo "$(find "$dest" -name '*.py' | wc -l) .py files in $dest"
