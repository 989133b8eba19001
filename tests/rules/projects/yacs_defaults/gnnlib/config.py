# Defaults of a yacs configuration, filled by a function (the GraphGym / detectron shape); runs
# override keys from a YAML file or `key value` pairs after the options.
from yacs.config import CfgNode as CN

cfg = CN()


def set_cfg(cfg):
    cfg.device = "auto"
    cfg.num_workers = 0
    cfg.prefetch_workers = 4
    cfg.pin_memory = False
    cfg.train = CN()
    cfg.train.batch_size = 32
    cfg.optim = CN()
    cfg.optim.base_lr = 0.01


set_cfg(cfg)
