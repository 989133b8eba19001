from . import fcn  # noqa: F401
from . import mlp_mixer  # noqa: F401
