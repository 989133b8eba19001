#!/bin/sh
# The project's shipped runs.
torchrun --nproc_per_node 8 train_base.py --data_dir /data/imagenet64 --lr 1e-4 --batch_size 256 --use_fp16 True
torchrun --nproc_per_node 8 train_distill.py --data_dir /data/imagenet64 --lr 8e-6 --use_fp16 True
python train_small.py --data_dir /data/cifar --lr 2e-4
