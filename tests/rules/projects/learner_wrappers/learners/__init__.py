"""Learners register themselves; every module of this folder is imported by name at start-up."""
import importlib
import pkgutil

LEARNERS = {}


def register(name):
    def wrap(cls):
        LEARNERS[name] = cls
        return cls
    return wrap


for info in pkgutil.iter_modules(__path__):
    if not info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{info.name}")


def create_learner(cfg):
    return LEARNERS[cfg["learner"]](cfg)
