"""A catalogue filled by a decorator: the classes register themselves when their module is imported."""

_NETS = {}


def register_net(cls=None, *, name=None):
    def _add(c):
        _NETS[name or c.__name__.lower()] = c
        return c

    return _add if cls is None else _add(cls)


def net_class(name):
    return _NETS[name]


def make_net(cfg):
    net = net_class(cfg["arch"])(cfg)
    return net.to(cfg["device"])
