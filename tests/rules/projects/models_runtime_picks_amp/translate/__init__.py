"""Translators picked by name at run time: ``translate/<kind>_translator.py`` holds ``<Kind>Translator``."""
import importlib

from translate.base import BaseTranslator


def find_translator(kind):
    module_name = "translate." + kind + "_translator"
    lib = importlib.import_module(module_name)
    for name, cls in vars(lib).items():
        if name.lower() == kind.replace("_", "") + "translator" and issubclass(cls, BaseTranslator):
            return cls
    raise ValueError(f"no translator {kind}")


def build_translator(opt):
    cls = find_translator(opt.kind)
    return cls(opt)
