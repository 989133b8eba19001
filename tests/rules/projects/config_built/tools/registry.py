"""Build objects from a configuration: the class is named by a dotted string."""
import importlib


class Options(dict):
    """A dict whose keys read as attributes."""

    def __getattr__(self, key):
        return self[key]


def locate(path):
    module_name, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def build_from_name(*args, class_name=None, **kwargs):
    cls = locate(class_name)
    return cls(*args, **kwargs)
