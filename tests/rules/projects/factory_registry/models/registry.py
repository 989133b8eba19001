"""Models registered by name: each builder is decorated with @register_model."""
_model_entrypoints = {}


def register_model(fn):
    _model_entrypoints[fn.__name__] = fn
    return fn


def list_models():
    return sorted(_model_entrypoints)


def model_entrypoint(name):
    return _model_entrypoints[name]


def create_model(name, pretrained=False, **kwargs):
    create_fn = model_entrypoint(name)
    model = create_fn(**kwargs)
    if pretrained:
        model.load_pretrained()
    return model
