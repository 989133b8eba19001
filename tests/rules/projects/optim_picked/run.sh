#!/bin/sh
# The project's own runs: the main optimizer is always RMSprop here, the auxiliary one SGD.
python train.py --optim RMSprop --aux-optim SGD --lr 1e-3
