#!/bin/sh
python -u run.py --model Seasonal --channels 21 --pred_len 96 --train_epochs 10
python -u run.py --model Vanilla --channels 21 --pred_len 192 --train_epochs 10
