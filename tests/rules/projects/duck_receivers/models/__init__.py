import importlib


def create_model(name):
    module = importlib.import_module(f"models.{name}_model")
    cls = getattr(module, name.capitalize() + "Model")
    return cls()
